package raftlog

import (
	"bytes"
	"os"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/delayd/delayd/aof"
)

// crashFS is a MemFS that counts the calls that change the disk (a write,
// an fsync, a truncate, a create, a rename, a remove, a directory fsync)
// and keeps, at call at, what a crash just before it would leave.
type crashFS struct {
	*aof.MemFS
	n, at   int
	crashed *aof.MemFS
}

func (c *crashFS) step() {
	c.n++
	if c.n == c.at {
		c.crashed = c.MemFS.CrashClone()
	}
}

func (c *crashFS) OpenFile(name string, flag int, perm os.FileMode) (aof.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0 {
		c.step()
	}
	f, err := c.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return crashFile{f, c}, nil
}

func (c *crashFS) Rename(a, b string) error     { c.step(); return c.MemFS.Rename(a, b) }
func (c *crashFS) Remove(name string) error     { c.step(); return c.MemFS.Remove(name) }
func (c *crashFS) SyncDir(dir string) error     { c.step(); return c.MemFS.SyncDir(dir) }
func (f crashFile) Write(p []byte) (int, error) { f.c.step(); return f.File.Write(p) }
func (f crashFile) Sync() error                 { f.c.step(); return f.File.Sync() }
func (f crashFile) Truncate(n int64) error      { f.c.step(); return f.File.Truncate(n) }

type crashFile struct {
	aof.File
	c *crashFS
}

// newer is an entry of index i written by a later leader than entry(i).
func newer(i uint64) *raft.Log {
	l := entry(i + 7919)
	l.Index, l.Term = i, 1000+i
	return l
}

// kind says whether s's entry i is entry(i) (1), newer(i) (2), or neither
// (0).
func kind(t *testing.T, s *Store, i uint64) int {
	t.Helper()
	var l raft.Log
	if err := s.GetLog(i, &l); err != nil {
		t.Fatalf("GetLog(%d): %v", i, err)
	}
	for k, w := range []*raft.Log{entry(i), newer(i)} {
		if l.Term == w.Term && bytes.Equal(l.Data, w.Data) {
			return k + 1
		}
	}
	return 0
}

// TestCrashAtEveryStep crashes each change of the log before each of its
// disk operations in turn, and opens what the crash left: the log of
// before, of after, or one between that Raft accepts, never another.
func TestCrashAtEveryStep(t *testing.T) {
	const segSize = 2000
	cases := []struct {
		name string
		op   func(s *Store) error
		// ok checks the log a crash left; done says the op returned.
		ok func(t *testing.T, s *Store, done bool)
	}{{
		name: "suffix then a new leader's entries",
		op: func(s *Store) error {
			if err := s.DeleteRange(201, 300); err != nil {
				return err
			}
			return s.StoreLogs(newerRange(201, 230))
		},
		ok: func(t *testing.T, s *Store, done bool) {
			first, last := bounds(s)
			if first != 1 || last < 200 {
				t.Fatalf("%d..%d: the entries before the cut are lost", first, last)
			}
			want := 1
			if last >= 201 && kind(t, s, 201) == 2 {
				want = 2 // the new leader's, from 201 on: no old one after
			}
			for i := uint64(201); i <= last; i++ {
				if k := kind(t, s, i); k != want {
					t.Fatalf("entry %d is of kind %d, want %d (201..%d)", i, k, want, last)
				}
			}
			if done && (want != 2 || last != 230) {
				t.Fatalf("done, but %d..%d of kind %d", first, last, want)
			}
		},
	}, {
		name: "prefix",
		op:   func(s *Store) error { return s.DeleteRange(1, 150) },
		ok: func(t *testing.T, s *Store, done bool) {
			if first, last := bounds(s); first > 151 || last != 300 {
				t.Fatalf("%d..%d after deleting 1..150 of 1..300", first, last)
			}
		},
	}, {
		name: "everything, then entries after a snapshot",
		op: func(s *Store) error {
			if err := s.DeleteRange(1, 300); err != nil {
				return err
			}
			return s.StoreLogs(newerRange(1000, 1010))
		},
		ok: func(t *testing.T, s *Store, done bool) {
			first, last := bounds(s)
			switch {
			case first == 1 && last == 300 && !done: // before
			case first == 0 && last == 0 && !done:
			case first == 1000 && last == 1010:
				for i := first; i <= last; i++ {
					if kind(t, s, i) != 2 {
						t.Fatalf("entry %d is not the one written", i)
					}
				}
			default:
				t.Fatalf("%d..%d (done %v)", first, last, done)
			}
		},
	}, {
		name: "a batch that seals a segment",
		op: func(s *Store) error {
			for s.w.Size() < segSize {
				if err := s.StoreLogs(entries(s.last+1, s.last+1)); err != nil {
					return err
				}
			}
			return s.StoreLogs(entries(s.last+1, s.last+5))
		},
		ok: func(t *testing.T, s *Store, done bool) {
			if first, last := bounds(s); first != 1 || last < 300 {
				t.Fatalf("%d..%d", first, last)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for at := 1; ; at++ {
				mem := aof.NewMemFS()
				cfs := &crashFS{MemFS: mem, at: -1}
				s, err := Open(testPath, Options{FS: cfs, SegmentSize: segSize})
				if err != nil {
					t.Fatal(err)
				}
				store(t, s, 1, 300, 9)
				cfs.at = cfs.n + at
				err = tc.op(s)
				if err != nil {
					t.Fatalf("crash at step %d: %v", at, err)
				}
				crashed, done := cfs.crashed, cfs.crashed == nil
				if done {
					crashed = mem.CrashClone()
				}
				s.Close()
				c, err := Open(testPath, Options{FS: crashed, SegmentSize: segSize})
				if err != nil {
					t.Fatalf("crash at step %d: open: %v", at, err)
				}
				tc.ok(t, c, done)
				// What Raft does next works: the log takes the entry after
				// its last, and holds it after a restart.
				first, last := bounds(c)
				if err := c.StoreLogs([]*raft.Log{entry(last + 1)}); err != nil {
					t.Fatalf("crash at step %d: append: %v", at, err)
				}
				c.Close()
				c, err = Open(testPath, Options{FS: crashed, SegmentSize: segSize})
				if err != nil {
					t.Fatal(err)
				}
				if f, l := bounds(c); l != last+1 || (first != 0 && f != first) {
					t.Fatalf("crash at step %d: %d..%d then %d..%d", at, first, last, f, l)
				}
				c.Close()
				if done {
					t.Logf("%d steps", at-1)
					return
				}
			}
		})
	}
}

func newerRange(from, to uint64) []*raft.Log {
	var ls []*raft.Log
	for i := from; i <= to; i++ {
		ls = append(ls, newer(i))
	}
	return ls
}

func bounds(s *Store) (uint64, uint64) {
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	return f, l
}
