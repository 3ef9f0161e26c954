package cluster

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/delayd/delayd/record"
)

// Snapshots streamed (docs/decisions/raft-snapshots.md). The engine's
// state is written to a file beside the Raft log under one hold of its
// lock, at an instant it is exactly the committed state at a known index
// (engine.CaptureTo); the lock is let go at once, and Raft is asked for a
// snapshot. Persist then streams the members' header, the file, every
// engine batch the log committed after that index up to the snapshot's,
// and the end mark: restored, the batches bring the captured state to the
// snapshot's index as a follower's applies would. The format is the one a
// snapshot always had (a header, framed records, an end mark): old
// snapshots restore as before and older nodes read new ones.

// capturePrefix starts a capture's name in the raft directory. Each
// capture has a name of its own: Raft's backstop snapshot may take a
// capture and still be streaming it when the next one is written.
const capturePrefix = "snapshot-capture-"

// capture is a capture ready for fsm.Snapshot to take.
type capture struct {
	path string
	gen  uint64 // the engine's Generation at the capture
	from uint64 // the index the capture is exact at
}

// takeSnapshot has Raft take a snapshot of a state captured to a file. On
// a leader the engine is held for one commit round plus the freeze; on a
// follower applies wait for the freeze. Neither waits for the encoding or
// for Raft.
func (c *Cluster) takeSnapshot(r *raft.Raft) error {
	f := c.fsm
	start := time.Now()
	fh, err := os.CreateTemp(filepath.Join(c.cfg.Dir, "raft"), capturePrefix+"*.tmp")
	if err != nil {
		return err
	}
	path := fh.Name()
	bw := bufio.NewWriterSize(fh, 1<<20)
	var from uint64
	f.mu.Lock() // a follower stays one while it is held (Lead is called under it)
	lead := !c.eng.Following()
	if lead {
		f.mu.Unlock() // a leader's batches are applied under it: Quiesce waits for them
	}
	t0 := time.Now()
	var held time.Duration
	gen, ok, err := c.eng.CaptureTo(lead, 2*time.Second, bw, func() bool {
		if lead {
			if !c.ackersDone(time.Now().Add(50 * time.Millisecond)) {
				return false
			}
			from = r.AppliedIndex() // every engine batch is applied (see Backup)
		} else {
			from = f.applied
		}
		return true
	}, func() {
		held = time.Since(t0) // on a leader, the commit round included
		if !lead {
			f.mu.Unlock() // the state is frozen: applies go on while it is encoded
		}
	})
	if err == nil && !ok {
		err = errSnapshotBusy
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	cp := &capture{path: path, gen: gen, from: from}
	f.cmu.Lock()
	f.pending = cp
	f.cmu.Unlock()
	err = r.Snapshot().Error()
	f.cmu.Lock()
	if f.pending == cp { // not taken: Raft refused before asking the state machine
		f.pending = nil
		os.Remove(path)
	}
	f.cmu.Unlock()
	if err != nil {
		return err
	}
	c.log.Info().Dur("took_ms", time.Since(start)).Dur("held_ms", held).Uint64("from", from).
		Uint64("index", r.AppliedIndex()).Msg("cluster: snapshot taken")
	return nil
}

// ackersDone waits, under the engine's lock (nothing new is proposed),
// until every batch answered early (--cluster-ack leader) has committed;
// false if that takes past deadline or one failed.
func (c *Cluster) ackersDone(deadline time.Time) bool {
	for c.unacked.Load() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	return !c.lost.Load()
}

// streamedSnapshot is a snapshot made from a capture: the header, the
// capture's records, the engine batches of (from, to], the end mark.
type streamedSnapshot struct {
	c        *Cluster
	header   []byte
	path     string
	from, to uint64
	version  uint32
}

func (s *streamedSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *streamedSnapshot) write(sink io.Writer) error {
	w := bufio.NewWriterSize(sink, 1<<20)
	if _, err := w.Write(s.header); err != nil {
		return err
	}
	fh, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer fh.Close()
	if s.version < FormatVersion {
		err = downgradeStream(w, fh, s.version)
	} else {
		_, err = io.Copy(w, fh)
	}
	if err != nil {
		return fmt.Errorf("snapshot capture: %w", err)
	}
	for i := s.from + 1; i <= s.to; i++ {
		var l raft.Log
		if err := s.c.store.GetLog(i, &l); err != nil {
			return fmt.Errorf("snapshot: log entry %d: %w", i, err)
		}
		if l.Type == raft.LogCommand && len(l.Data) > 0 && l.Data[0] == entryEngine {
			// A batch is framed as a snapshot's records are.
			if _, err := w.Write(l.Data[1:]); err != nil {
				return err
			}
		}
	}
	if err := w.WriteByte(0); err != nil { // the end mark
		return err
	}
	return w.Flush()
}

// Release drops the capture's file: Persist has copied it, or failed.
func (s *streamedSnapshot) Release() { os.Remove(s.path) }

// downgradeStream copies the framed records of r to w as members of
// version v read them (downgrade.go).
func downgradeStream(w io.Writer, r io.Reader, v uint32) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var buf []byte
	for {
		n, err := binary.ReadUvarint(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if n == 0 || n > 64<<20 {
			return record.ErrBad
		}
		buf = binary.AppendUvarint(buf[:0], n)
		k := len(buf)
		buf = append(buf, make([]byte, n)...)
		if _, err := io.ReadFull(br, buf[k:]); err != nil {
			return err
		}
		out, err := downgrade(buf, v)
		if err != nil {
			return err
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
}
