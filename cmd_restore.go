package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/backup"
	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/dirlock"
	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/record"
)

// restoreCmd is "delayd restore --dir DIR [--cluster] FILE": it makes DIR, an
// empty data directory, hold the backup FILE.
//
// A single node's is a log (delayd.aof) of the backup's records, which the
// server replays at start as it replays a rewritten log. A cluster's is the
// backup's snapshot left in raft/ (cluster.RestoreFile) for the node started
// there with --cluster-bootstrap: once it leads it installs the snapshot in
// Raft, and nodes that join it get it by snapshot. Either way the file is
// checked whole first, and DIR holds nothing of it if the check fails.
func restoreCmd(args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("delayd restore", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "./data", "the empty data directory to restore into")
	clustered := fs.Bool("cluster", false, "restore as a new cluster's first node (start it with --cluster-enabled yes --cluster-bootstrap yes)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: delayd restore --dir DIR [--cluster] FILE")
		return 2
	}
	file := fs.Arg(0)
	fail := func(err error) int {
		fmt.Fprintln(stderr, "delayd restore:", err)
		return 1
	}
	// Check the whole file before touching DIR: a restore that stops half
	// way would leave a directory that starts with half the jobs.
	f, err := os.Open(file)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	h, counts, err := backup.Check(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fail(fmt.Errorf("%s: %w", file, err))
	}
	if err := emptyDir(*dir); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fail(err)
	}
	lk, err := dirlock.Acquire(*dir)
	if err != nil {
		return fail(err)
	}
	defer lk.Release()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	r, err := backup.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fail(err)
	}
	var dst string
	if *clustered {
		dst = cluster.RestorePath(*dir)
		err = restoreSnapshot(r, dst)
	} else {
		dst = filepath.Join(*dir, engine.LogFile)
		err = restoreLog(r, dst)
	}
	if err != nil {
		return fail(err)
	}
	next := "start delayd --dir " + *dir
	if *clustered {
		next = "start delayd --dir " + *dir + " --cluster-enabled yes --cluster-bootstrap yes ...; then join the other nodes to it, empty"
	}
	fmt.Fprintf(stderr, "%s: restored %d jobs (%d ready, %d delayed, %d reserved), %d schedules, %d limits, %d pauses, %d tombstones from %s (taken %s); %s\n",
		dst, counts.Jobs(), counts.Ready, counts.Delayed, counts.Reserved, counts.Schedules, counts.Limits, counts.Pauses,
		counts.Tombstones, file, time.UnixMilli(h.Created).UTC().Format(time.RFC3339), next)
	return 0
}

// emptyDir refuses a data directory that holds anything (but a
// filesystem's lost+found, and the lock of a directory no server holds):
// restoring on top of a log or Raft state would mix two histories.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); n != "lost+found" && n != dirlock.FileName {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	if len(names) > 3 {
		names = append(names[:3], "...")
	}
	return fmt.Errorf("data directory %s is not empty (it holds %s): restore into an empty directory", dir, strings.Join(names, ", "))
}

// restoreLog writes the backup's records as a log file: the rewrite's
// temporary file, installed (fsynced, renamed, the directory fsynced) once
// the reader has checked the end.
func restoreLog(r *backup.Reader, path string) error {
	w, tmp, err := aof.CreateTemp(aof.OS, path)
	if err != nil {
		return err
	}
	err = func() error {
		for {
			b, err := r.Next()
			if err != nil {
				return err
			}
			if b == nil {
				break
			}
			w.Append(b)
			if w.Buffered() > 1<<20 {
				if err := w.Flush(); err != nil {
					return err
				}
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return aof.Install(aof.OS, tmp, path)
	}()
	w.Close()
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// restoreSnapshot writes the backup's records as the engine's snapshot
// stream (record.AppendSnap framing and its end mark) where a cluster
// node's first start finds it.
func restoreSnapshot(r *backup.Reader, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = func() error {
		bw := bufio.NewWriterSize(f, 1<<20)
		var buf []byte
		for {
			b, err := r.Next()
			if err != nil {
				return err
			}
			if b == nil {
				break
			}
			buf = record.AppendSnap(buf[:0], b)
			if _, err := bw.Write(buf); err != nil {
				return err
			}
		}
		if _, err := bw.Write(record.EndSnap(nil)); err != nil {
			return err
		}
		return bw.Flush()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = aof.Install(aof.OS, tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// checkBackup is "delayd check-backup FILE": it verifies a backup file whole
// (header, format version, checksum, every record decodes, the header's
// counts) and says what it holds. Exit 0: the file restores.
func checkBackup(args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("delayd check-backup", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	queues := fs.Bool("queues", false, "also print the jobs of each queue")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: delayd check-backup [--queues] FILE")
		return 2
	}
	path := fs.Arg(0)
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(stderr, "delayd check-backup:", err)
		return 1
	}
	defer f.Close()
	h, c, err := backup.Check(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		fmt.Fprintf(stderr, "delayd check-backup: %s: %v\n", path, err)
		return 1
	}
	out := os.Stdout
	fmt.Fprintf(out, "%s: ok\n", path)
	fmt.Fprintf(out, "format_version: %d\nserver_version: %s\nmode: %s\n", h.Version, h.Server, h.Mode)
	fmt.Fprintf(out, "created: %s\n", time.UnixMilli(h.Created).UTC().Format(time.RFC3339Nano))
	if h.Mode == backup.Cluster {
		fmt.Fprintf(out, "raft_index: %d\n", h.Index)
	}
	fmt.Fprintf(out, "records: %d\njobs: %d\nready: %d\ndelayed: %d\nreserved: %d\n", c.Records, c.Jobs(), c.Ready, c.Delayed, c.Reserved)
	fmt.Fprintf(out, "schedules: %d\nlimits: %d\npauses: %d\ntombstones: %d\nqueues: %d\n", c.Schedules, c.Limits, c.Pauses, c.Tombstones, len(c.Queues))
	if *queues {
		names := make([]string, 0, len(c.Queues))
		for q := range c.Queues {
			names = append(names, q)
		}
		slices.Sort(names)
		for _, q := range names {
			fmt.Fprintf(out, "queue %q: %d\n", q, c.Queues[q])
		}
	}
	return 0
}
