package engine

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/journal"
)

// ackedAdds adds n delayed jobs to q and returns the ids whose write was
// acknowledged.
func ackedAdds(t *testing.T, e *Engine, q string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		res, err := e.Add(AddArgs{Queue: b(q), Delay: 100_000, Payload: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.WaitDurable(res.Ticket); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, string(res.ID))
	}
	return ids
}

// checkAcked restarts on what fs holds after a crash and checks every
// acknowledged job is there and none of the refused ones is.
func checkAcked(t *testing.T, fs *aof.MemFS, fsync, q string, acked, refused []string) {
	t.Helper()
	c := mustNew(t, logged(fs.CrashClone(), fsync))
	defer c.Close()
	for _, id := range acked {
		if _, ok := c.Get(b(q), []byte(id)); !ok {
			t.Fatalf("acknowledged job %s lost after restart", id)
		}
	}
	for _, id := range refused {
		if _, ok := c.Get(b(q), []byte(id)); ok {
			t.Fatalf("refused job %s present after restart", id)
		}
	}
}

func persistence(e *Engine) map[string]string {
	m := map[string]string{}
	for _, kv := range e.Persistence() {
		m[kv[0]] = kv[1]
	}
	return m
}

// An fsync that fails with EIO under appendfsync always: the write in
// flight gets the error, writes are refused from then on naming the cause
// (never retried, even once the disk seems fine), pops go on, and nothing
// acknowledged is lost.
func TestFaultsFsyncEIOAlways(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		acked := ackedAdds(t, e, "q", 50)
		add(t, e, "r", 0, "ready")
		e.WaitDurable(e.journal.Ticket())
		acked = append(acked, ackedAdds(t, e, "q", 1)...)

		fs.Inject(aof.Fault{Op: aof.OpSync, Path: seg1, Err: syscall.EIO})
		res, _ := e.Add(AddArgs{Queue: b("q"), ID: b("inflight"), Payload: b("x")})
		if err := e.WaitDurable(res.Ticket); !errors.Is(err, ErrLog) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("write whose fsync failed: %v", err)
		}
		fs.ClearFaults() // the disk looks fine again: an fsync would now succeed, and prove nothing
		sleep(5 * journal.ProbeEvery)
		_, err := e.Add(AddArgs{Queue: b("q"), ID: b("refused"), Payload: b("y")})
		if !errors.Is(err, ErrLog) || !strings.Contains(err.Error(), "input/output error") {
			t.Fatalf("write after a failed fsync: %v, want it refused naming EIO", err)
		}
		if d, ok := e.Pop([][]byte{b("r")}); !ok || string(d.Payload) != "ready" {
			t.Fatalf("pop after a failed fsync: %+v %v", d, ok)
		}
		if _, ok := e.Get(b("q"), []byte(acked[0])); !ok {
			t.Fatal("read after a failed fsync")
		}
		p := persistence(e)
		if p["aof_last_write_status"] != "err" || !strings.Contains(p["aof_last_error"], "input/output error") {
			t.Fatalf("INFO persistence: %v", p)
		}
		checkAcked(t, fs, FsyncAlways, "q", acked, []string{"refused"})
	})
}

// Under appendfsync everysec a failed background fsync stops writes too:
// the writes it covered were acknowledged, and the server must say so
// rather than go on.
func TestFaultsFsyncEIOEverySec(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncEverySec))
		defer e.Close()
		acked := ackedAdds(t, e, "q", 20)
		sleep(1100 * time.Millisecond) // fsynced by the background fsync

		fs.Inject(aof.Fault{Op: aof.OpSync, Path: seg1, Err: syscall.EIO, Sticky: true})
		ackedAdds(t, e, "q", 1) // acknowledged before its fsync, as everysec does
		sleep(1100 * time.Millisecond)
		_, err := e.Add(AddArgs{Queue: b("q"), ID: b("refused"), Payload: b("y")})
		if !errors.Is(err, ErrLog) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("write after a failed background fsync: %v", err)
		}
		p := persistence(e)
		if p["aof_last_write_status"] != "err" || !strings.Contains(p["aof_last_error"], "fsync") {
			t.Fatalf("INFO persistence: %v", p)
		}
		if _, ok := e.Get(b("q"), []byte(acked[0])); !ok {
			t.Fatal("read after a failed fsync")
		}
		checkAcked(t, fs, FsyncEverySec, "q", acked, []string{"refused"})
	})
}

// A full disk: the write in flight is undone and gets ENOSPC, writes are
// refused naming it while reads and pops go on, and once space comes back
// writes resume by themselves; nothing acknowledged is lost.
func TestFaultsDiskFullResumes(t *testing.T) {
	for _, fsync := range []string{FsyncAlways, FsyncEverySec} {
		t.Run(fsync, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := aof.NewMemFS()
				e := mustNew(t, logged(fs, fsync))
				defer e.Close()
				acked := ackedAdds(t, e, "q", 30)
				add(t, e, "r", 0, "ready")
				e.WaitDurable(e.journal.Ticket())
				sleep(1100 * time.Millisecond)

				fs.Inject(aof.Fault{Op: aof.OpWrite, Path: seg1, Err: syscall.ENOSPC, Sticky: true})
				res, _ := e.Add(AddArgs{Queue: b("q"), ID: b("inflight"), Payload: b("x")})
				if err := e.WaitDurable(res.Ticket); !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("write on a full disk: %v", err)
				}
				if _, ok := e.Get(b("q"), b("inflight")); ok {
					t.Fatal("a write that did not reach the log was applied")
				}
				sleep(3 * journal.ProbeEvery) // still full: the probes fail
				_, err := e.Add(AddArgs{Queue: b("q"), ID: b("refused"), Payload: b("y")})
				if !errors.Is(err, ErrLog) || !strings.Contains(err.Error(), "no space left on device") {
					t.Fatalf("write while the disk is full: %v", err)
				}
				if persistence(e)["aof_last_write_status"] != "err" {
					t.Fatalf("INFO persistence: %v", e.Persistence())
				}
				if d, ok := e.Pop([][]byte{b("r")}); !ok || string(d.Payload) != "ready" {
					t.Fatalf("pop while the disk is full: %+v %v", d, ok)
				}

				fs.ClearFaults() // space is back
				sleep(journal.ProbeEvery)
				acked = append(acked, ackedAdds(t, e, "q", 5)...)
				if p := persistence(e); p["aof_last_write_status"] != "ok" {
					t.Fatalf("INFO persistence after space came back: %v", p)
				}
				sleep(1100 * time.Millisecond) // the rewrite that follows a resume; everysec's fsync
				checkAcked(t, fs, fsync, "q", acked, []string{"inflight", "refused"})
				// The pop served while writes were refused is in the log now (the
				// rewrite wrote the live set), so a restart does not deliver it again.
				c := mustNew(t, logged(fs.CrashClone(), fsync))
				defer c.Close()
				if _, ok := c.Pop([][]byte{b("r")}); ok {
					t.Fatal("a job popped while the disk was full came back after the rewrite")
				}
			})
		})
	}
}

// stallFS is a MemFS whose log fsyncs wait while stall is set: a disk busy
// with writeback, as after a burst of writes.
type stallFS struct {
	*aof.MemFS
	path string

	mu      sync.Mutex
	stall   chan struct{} // the log's fsyncs wait for it to be closed
	stalled int           // fsyncs that waited
}

func (s *stallFS) OpenFile(name string, flag int, perm os.FileMode) (aof.File, error) {
	f, err := s.MemFS.OpenFile(name, flag, perm)
	if err != nil || name != s.path {
		return f, err
	}
	return stallFile{f, s}, nil
}

func (s *stallFS) hold() {
	s.mu.Lock()
	s.stall = make(chan struct{})
	s.mu.Unlock()
}

func (s *stallFS) release() {
	s.mu.Lock()
	close(s.stall)
	s.stall = nil
	s.mu.Unlock()
}

type stallFile struct {
	aof.File
	fs *stallFS
}

func (f stallFile) Sync() error {
	f.fs.mu.Lock()
	c := f.fs.stall
	if c != nil {
		f.fs.stalled++
	}
	f.fs.mu.Unlock()
	if c != nil {
		<-c
	}
	return f.File.Sync()
}

// Under appendfsync everysec a slow fsync is the syncer's: writes are
// written and acknowledged while it runs (a write waiting on it would
// deadlock this test), a rewrite switches logs meanwhile, writes made
// during and after it are acknowledged (the old log is closed only once
// the fsync ends, never under it), a write made after it
// has run 2 s is counted as Redis's aof_delayed_fsync, and once the fsync
// ends nothing acknowledged is lost.
func TestFaultsSlowFsyncEverySecDoesNotBlockWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &stallFS{MemFS: aof.NewMemFS(), path: seg1}
		e := mustNew(t, logged(fs, FsyncEverySec))
		acked := ackedAdds(t, e, "q", 20)
		fs.hold()
		sleep(1100 * time.Millisecond) // the background fsync starts, and waits
		if fs.stalled != 1 {
			t.Fatalf("%d fsyncs waiting, want the background one", fs.stalled)
		}
		acked = append(acked, ackedAdds(t, e, "q", 20)...)
		if p := persistence(e); p["aof_delayed_fsync"] != "0" {
			t.Fatalf("aof_delayed_fsync %s after a 1 s fsync, want 0", p["aof_delayed_fsync"])
		}
		sleep(2100 * time.Millisecond) // still running: no second fsync starts
		acked = append(acked, ackedAdds(t, e, "q", 3)...)
		if fs.stalled != 1 {
			t.Fatalf("%d fsyncs started, want one at a time", fs.stalled)
		}
		if p := persistence(e); p["aof_delayed_fsync"] != "1" {
			t.Fatalf("aof_delayed_fsync %s after writes made while an fsync ran 3 s, want 1 (once per 2 s)", p["aof_delayed_fsync"])
		}

		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, ackedAdds(t, e, "q", 10)...) // while the rewrite runs
		opsWaitRewrite(e)                                  // its switch does not wait for the fsync
		acked = append(acked, ackedAdds(t, e, "q", 10)...) // to the new log
		fs.release()
		sleep(1100 * time.Millisecond)
		p := persistence(e)
		if p["aof_last_write_status"] != "ok" || p["aof_last_bgrewrite_status"] != "ok" || p["aof_last_fsync_unix"] == "0" {
			t.Fatalf("INFO persistence after the slow fsync: %v", p)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		checkAcked(t, fs.MemFS, FsyncEverySec, "q", acked, nil)
	})
}
