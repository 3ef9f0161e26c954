package cluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/rs/zerolog"
	"go.etcd.io/bbolt"

	"github.com/delayd/delayd/raftlog"
)

// writeBolt writes entries into a raft.db of dir as the releases before
// raftlog did (raftboltdb with the options cluster.New gave it).
func writeBolt(t *testing.T, dir string, entries []*raft.Log) {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, boltLog),
		BoltOptions: &bbolt.Options{Timeout: 10 * time.Second, NoFreelistSync: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLogs(entries); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func testEntry(i uint64, tag string) *raft.Log {
	return &raft.Log{Index: i, Term: 1 + i/10, Type: raft.LogCommand, Data: fmt.Appendf(nil, "%s-%d", tag, i), AppendedAt: time.Unix(1_700_000_000, int64(i))}
}

// A data dir of an earlier release, then a copy cut short: each start
// copies raft.db whole, the entries before a gap left out, and renames it
// once the copy is on disk.
func TestMigrateBolt(t *testing.T) {
	dir := t.TempDir()
	var old []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		old = append(old, testEntry(i, "before-gap"))
	}
	for i := uint64(50); i <= 80; i++ {
		old = append(old, testEntry(i, "old"))
	}
	writeBolt(t, dir, old)
	check := func(s *raftlog.Store) {
		t.Helper()
		if f, _ := s.FirstIndex(); f != 50 {
			t.Fatalf("FirstIndex %d, want 50 (the run after the gap)", f)
		}
		if l, _ := s.LastIndex(); l != 80 {
			t.Fatalf("LastIndex %d, want 80", l)
		}
		for i := uint64(50); i <= 80; i++ {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil {
				t.Fatal(err)
			}
			w := testEntry(i, "old")
			if l.Term != w.Term || !bytes.Equal(l.Data, w.Data) || !l.AppendedAt.Equal(w.AppendedAt) {
				t.Fatalf("entry %d: %+v, want %+v", i, l, *w)
			}
		}
	}
	// A copy cut short: the new log holds something else, raft.db is there.
	s, err := raftlog.Open(filepath.Join(dir, "raft.log"), raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs([]*raft.Log{testEntry(50, "partial"), testEntry(51, "partial")}); err != nil {
		t.Fatal(err)
	}
	if err := migrateBolt(dir, s, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	check(s)
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, boltLog+".migrated")); err != nil {
		t.Fatal(err)
	}
	refusedByEarlierRelease(t, dir)
	// Once done, a start copies nothing again.
	s, err = raftlog.Open(filepath.Join(dir, "raft.log"), raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := migrateBolt(dir, s, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	check(s)
}

// refusedByEarlierRelease checks that raft.db in dir is what an earlier
// release, which opened it with raft-boltdb, refuses to start on.
func refusedByEarlierRelease(t *testing.T, dir string) {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, boltLog),
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true},
	})
	if err == nil {
		b.Close()
		t.Fatal("raft-boltdb opens raft.db: an earlier release would start on an empty log")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, boltLog)); string(got) != boltMarker {
		t.Fatalf("raft.db holds %q", got)
	}
}

// A new node's raft.db is the marker.
func TestNewNodeMarksRaftDB(t *testing.T) {
	n := startNode(t, Config{Bootstrap: true})
	n.stop()
	refusedByEarlierRelease(t, filepath.Join(n.dir, "raft"))
}

// A node of an earlier release (its log in raft.db, entries after its
// snapshot) starts on this one with every job.
func TestMigratedNodeKeepsItsJobs(t *testing.T) {
	n := startNode(t, Config{Bootstrap: true})
	nodes := []*testNode{n}
	for i := range 30 {
		add(t, nodes, "m", fmt.Sprint("a", i), 60_000)
	}
	if err := n.c.r().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		add(t, nodes, "m", fmt.Sprint("b", i), 0)
	}
	cfg := n.cfg
	n.stop()

	// Make the dir an earlier release's: the entries in raft.db.
	raftDir := filepath.Join(cfg.Dir, "raft")
	s, err := raftlog.Open(filepath.Join(raftDir, "raft.log"), raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	var entries []*raft.Log
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err := s.GetLog(i, l); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, l)
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(raftDir, "raft.log*"))
	for _, f := range append(files, filepath.Join(raftDir, boltLog)) {
		os.Remove(f)
	}
	writeBolt(t, raftDir, entries)

	for range 2 { // migrated, then started again from the new log alone
		n = startNode(t, cfg)
		leaderOf(t, []*testNode{n})
		waitFor(t, 10*time.Second, "every job back", func() bool {
			st := n.eng.QueueStats([]byte("m"))
			return st.Ready == 20 && st.Delayed == 30
		})
		n.stop()
		if _, err := os.Stat(filepath.Join(raftDir, boltLog+".migrated")); err != nil {
			t.Fatal(err)
		}
		refusedByEarlierRelease(t, raftDir)
	}
}
