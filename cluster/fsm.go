package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/delayd/delayd/record"
)

// Entry kinds: the first byte of every Raft entry's data.
const (
	entryEngine byte = 1 // an engine batch: records, each a uvarint length then the record
	entryMember byte = 2 // a member's addresses (JSON member)
	// entryVersion (versions.go), 3: the cluster's version raised.
	// entrySlots (slots.go), 4: the slot map changed (group 0 only).
)

// member is what Raft's configuration does not hold: where a node's clients
// connect. Kept in the state machine, so every node can answer MOVED.
type member struct {
	ID      string `json:"id"`
	Addr    string `json:"addr"`
	BusAddr string `json:"bus"`
	Remove  bool   `json:"remove,omitempty"`
}

// fsm is the Raft state machine: the engine plus the members' addresses.
//
// The leader applied its own entries when it made them, so it skips them
// here: an entry of the term this node leads in (ownTerm) is its own. When
// it stops leading with entries that did not commit, it rebuilds the
// engine (rebuildLocked) and ownTerm goes back to 0, so that those entries,
// should the next leader commit them after all, are applied like any other.
type fsm struct {
	c *Cluster

	mu      sync.Mutex // Apply, Snapshot, Restore, and leadership changes
	ownTerm uint64     // guarded by mu
	applied uint64     // guarded by mu: the last index applied
	// done is the last index whose effects are in place, for readers that
	// wait for an entry (waitApplied): Raft's AppliedIndex moves when it
	// hands entries to this goroutine, before they are applied.
	done atomic.Uint64
	// restores counts the snapshots restored (at start, or sent by a
	// leader): a wiped node that rejoins restores one.
	restores atomic.Int64

	mmu     sync.Mutex
	members map[string]member // guarded by mmu
	removed map[string]bool   // ids member entries removed since start; guarded by mmu

	// version is the cluster's format version, the gate (versions.go):
	// raised by a version entry or a versioned snapshot, never lowered.
	version atomic.Uint32

	// slots is the slot map (slots.go), group 0's with several groups:
	// nil until its first entry. Written under mu.
	slots atomic.Pointer[SlotMap]

	// cacheDir holds the members' file (memberscache.go), rewritten under
	// mu whenever members change; "" writes none.
	cacheDir string

	// A capture made by takeSnapshot (snapshot.go), for the next Snapshot
	// call to take.
	cmu     sync.Mutex
	pending *capture // guarded by cmu
}

// Apply applies one committed entry.
func (f *fsm) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.done.Store(l.Index)
	f.applied = l.Index
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	switch l.Data[0] {
	case entryEngine:
		if f.ownTerm != 0 && l.Term == f.ownTerm {
			return nil // this leader applied it when it made it
		}
		if err := f.c.eng.ApplyBatch(l.Data[1:]); err != nil {
			if errors.Is(err, record.ErrNewer) {
				return f.tooOld(err, l.Index)
			}
			// The log is the truth; a batch that does not apply is a bug
			// that would make this node diverge: say so loudly.
			f.c.log.Error().Err(err).Uint64("index", l.Index).Msg("cluster: a committed batch did not apply")
			return err
		}
	case entryMember:
		var m member
		if err := json.Unmarshal(l.Data[1:], &m); err != nil {
			return err
		}
		f.mmu.Lock()
		if m.Remove {
			delete(f.members, m.ID)
			if f.removed == nil {
				f.removed = map[string]bool{}
			}
			f.removed[m.ID] = true
		} else {
			delete(f.removed, m.ID)
			f.members[m.ID] = m
		}
		f.mmu.Unlock()
		f.cacheMembers()
	case entryVersion:
		if err := f.applyVersion(l.Data[1:]); err != nil {
			return f.tooOld(err, l.Index)
		}
	case entrySlots:
		return f.applySlots(l.Data[1:], l.Index)
	}
	return nil
}

// cacheMembers writes the members to the cache file; called under mu, so
// writes are in apply order.
func (f *fsm) cacheMembers() {
	if f.cacheDir == "" {
		return
	}
	if err := saveMembersCache(f.cacheDir, f.memberList()); err != nil {
		f.c.log.Warn().Err(err).Msg("cluster: the members' address file was not written (a restart waits for the log to learn them)")
	}
}

// forgotten says whether a member entry removed id since this node
// started (not kept in snapshots: a FORGET repeated across a restart gets
// Redis's "Unknown node").
func (f *fsm) forgotten(id string) bool {
	f.mmu.Lock()
	defer f.mmu.Unlock()
	return f.removed[id]
}

func (f *fsm) memberList() map[string]member {
	f.mmu.Lock()
	defer f.mmu.Unlock()
	out := make(map[string]member, len(f.members))
	for k, v := range f.members {
		out[k] = v
	}
	return out
}

// errSnapshotBusy: the leader's engine is ahead of the applied log (writes
// in flight), so a snapshot of it now would not be the state at the index
// Raft labels it with. Raft tries again later.
var errSnapshotBusy = errors.New("writes in flight: the leader's snapshot is taken when they commit")

// Snapshot captures the state at the last applied index: the capture
// takeSnapshot made and the engine batches committed after it (Persist
// streams both), or else a copy made at once under the engine's lock, if
// it is settled (Raft's own timer, as a backstop).
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmu.Lock()
	cp := f.pending
	f.pending = nil
	f.cmu.Unlock()
	version := f.version.Load()
	f.mmu.Lock()
	ms, err := json.Marshal(f.members)
	f.mmu.Unlock()
	if err != nil {
		return nil, err
	}
	slots, err := f.slotsJSON()
	if err != nil {
		return nil, err
	}
	header := appendSnapshotHeader(nil, version, ms, slots)
	if cp != nil {
		if f.c.eng.Generation() != cp.gen {
			// Restored or rebuilt since: the log after cp.from may not
			// follow the capture.
			os.Remove(cp.path)
			return nil, errSnapshotBusy
		}
		return &streamedSnapshot{c: f.c, header: header, path: cp.path, from: cp.from, to: f.applied, version: version}, nil
	}
	data, ok := f.c.eng.SnapshotSettled()
	if !ok || f.c.unacked.Load() > 0 || f.c.lost.Load() {
		return nil, errSnapshotBusy
	}
	if version < FormatVersion {
		if data, err = downgrade(data, version); err != nil {
			return nil, fmt.Errorf("snapshot for version %d members: %w", version, err)
		}
	}
	return &snapshot{header: header, data: data}, nil
}

// Restore replaces the state with a snapshot's (at start, or one the
// leader sent because this node was too far behind).
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restores.Add(1)
	f.c.eng.Reset()
	ms, slots, err := f.restoreFrom(rc)
	if err != nil {
		return err
	}
	if err := f.restoreSlots(slots); err != nil {
		return err
	}
	f.mmu.Lock()
	f.members = ms
	f.mmu.Unlock()
	f.cacheMembers()
	// Raft restores the newest snapshot in the store (at start, or the one
	// a leader just sent): the state is now that snapshot's index.
	if metas, err := f.c.snaps.List(); err == nil && len(metas) > 0 {
		f.done.Store(metas[0].Index)
	}
	return nil
}

// restoreFrom reads a snapshot into the (reset) engine and returns its
// members and its slot map's JSON (nil for none). A rebuild takes the
// engine's part only: the members and the map are the applied log's.
func (f *fsm) restoreFrom(r io.Reader) (map[string]member, []byte, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	version, buf, slots, err := readSnapshotHeader(br)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot header: %w", err)
	}
	f.raise(version)
	ms := make(map[string]member)
	if err := json.Unmarshal(buf, &ms); err != nil {
		return nil, nil, fmt.Errorf("snapshot header: %w", err)
	}
	if err := f.c.eng.Restore(br); err != nil {
		return nil, nil, err
	}
	return ms, slots, nil
}

// rebuildLocked makes the engine the committed state again: the last
// snapshot, then every engine entry after it up to the last applied index.
// Called with mu held (no entry applies meanwhile). O(state).
//
// Raft may finish a snapshot and compact the log under it while this runs
// (the snapshot is written outside the state machine's lock): an entry
// gone missing means a newer snapshot now covers it, so it starts again
// from that one.
func (f *fsm) rebuildLocked() {
	c := f.c
	for try := 1; ; try++ {
		err := f.rebuildOnce()
		if err == nil {
			break
		}
		if try == 10 {
			// The engine is not the committed state: refuse to serve it.
			c.log.Error().Err(err).Msg("cluster: rebuilding the engine failed; this node stops")
			go c.Close()
			return
		}
		c.log.Warn().Err(err).Int("try", try).Msg("cluster: rebuilding again from the newest snapshot")
		time.Sleep(50 * time.Millisecond)
	}
	c.eng.Rebuilt()
	c.lost.Store(false)
	f.ownTerm = 0
}

func (f *fsm) rebuildOnce() error {
	c := f.c
	applied := max(f.applied, c.r().AppliedIndex())
	c.eng.Reset()
	from := uint64(1)
	if metas, err := c.snaps.List(); err == nil && len(metas) > 0 {
		meta, rc, err := c.snaps.Open(metas[0].ID)
		if err == nil {
			_, _, err = f.restoreFrom(rc)
			rc.Close()
		}
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", metas[0].ID, err)
		}
		from = meta.Index + 1
	} else if first, err := c.store.FirstIndex(); err == nil && first > 1 {
		from = first
	}
	n := 0
	for i := from; i <= applied; i++ {
		var l raft.Log
		if err := c.store.GetLog(i, &l); err != nil {
			return fmt.Errorf("log entry %d: %w", i, err)
		}
		if l.Type == raft.LogCommand && len(l.Data) > 0 && l.Data[0] == entryEngine {
			if err := c.eng.ApplyBatch(l.Data[1:]); err != nil {
				return fmt.Errorf("log entry %d: %w", i, err)
			}
			n++
		}
	}
	c.log.Info().Uint64("from", from).Uint64("to", applied).Int("batches", n).Msg("cluster: engine rebuilt from the committed log")
	return nil
}

// snapshot is the members' header (appendSnapshotHeader) and the engine's
// records.
type snapshot struct {
	header, data []byte
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	err := func() error {
		if _, err := sink.Write(s.header); err != nil {
			return err
		}
		_, err := sink.Write(s.data)
		return err
	}()
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
