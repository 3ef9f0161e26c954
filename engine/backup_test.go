package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// restoreDump restores a backup's snapshot into a new follower and dumps it.
func restoreDump(t *testing.T, snap []byte) string {
	t.Helper()
	x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
	if err := x.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	return replDump(x)
}

func TestBackupSingleNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		rng := rand.New(rand.NewPCG(3, 4))
		var ids []string
		churn(t, e, rng, 2000, &ids)
		for i := range 500 {
			if _, err := e.Add(AddArgs{Queue: b("r"), Payload: b(fmt.Sprint(i)), AckTimeout: 60_000}); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 {
			e.Pop([][]byte{b("r")})
		}
		want := replDump(e)
		c, err := e.Backup(16)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.Data[:16], make([]byte, 16)) {
			t.Fatal("the prefix is not left zero for the header")
		}
		if got := restoreDump(t, c.Data[16:]); got != want {
			t.Fatalf("restored backup differs:\n%s", diffLines(want, got))
		}
		// A write after the capture is not in it.
		add(t, e, "after", 0, "x")
		if got := restoreDump(t, c.Data[16:]); got != want {
			t.Fatal("a write after the capture changed it")
		}
	})
}

func TestBackupLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 1, Options{}, nil)
		ln := g.nodes[0]
		L := ln.e
		ln.r.setAuto(true)
		for i := range 300 {
			if _, err := L.Add(AddArgs{Queue: b("q"), Payload: b(fmt.Sprint(i)), Delay: int64(i % 3 * 1000), AckTimeout: 5000}); err != nil {
				t.Fatal(err)
			}
		}
		L.Pop([][]byte{b("q")})
		synctest.Wait()
		want := replDump(L)
		c, err := L.BackupLeader(0, time.Second, func() (uint64, error) { return 42, nil })
		if err != nil || c.Index != 42 {
			t.Fatalf("index %d, %v", c.Index, err)
		}
		if got := restoreDump(t, c.Data); got != want {
			t.Fatalf("restored backup differs:\n%s", diffLines(want, got))
		}
		// at's error gives the capture up.
		boom := errors.New("boom")
		if _, err := L.BackupLeader(0, time.Second, func() (uint64, error) { return 0, boom }); !errors.Is(err, boom) {
			t.Fatalf("got %v", err)
		}
		// A batch that never commits: no settled moment, the backup is
		// refused rather than taken ahead of the log.
		ln.r.setAuto(false)
		add(t, L, "s", 0, "x")
		if _, err := L.BackupLeader(0, 100*time.Millisecond, func() (uint64, error) { return 1, nil }); !errors.Is(err, ErrBackupBusy) {
			t.Fatalf("got %v, want ErrBackupBusy", err)
		}
		ln.r.settle(nil)
		// A follower refuses.
		L.Follow()
		if _, err := L.BackupLeader(0, time.Second, func() (uint64, error) { return 1, nil }); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("got %v, want ErrNotLeader", err)
		}
	})
}
