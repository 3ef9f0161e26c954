package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/delayd/delayd/aof"
)

const testPath = "/data/raft/raft.log"

// entry is a test entry of index i: its term, type, data and extensions
// are functions of i, so a read can be checked without keeping them.
func entry(i uint64) *raft.Log {
	rng := rand.New(rand.NewPCG(i, 7))
	l := &raft.Log{Index: i, Term: 1 + i/50, Type: raft.LogType(i % 6)}
	l.Data = make([]byte, rng.IntN(300))
	for k := range l.Data {
		l.Data[k] = byte(rng.Uint32())
	}
	if i%3 == 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d", i))
	}
	if i%4 != 0 {
		l.AppendedAt = time.Unix(1_700_000_000+int64(i), int64(i)*1000)
	}
	return l
}

func entries(from, to uint64) []*raft.Log {
	var ls []*raft.Log
	for i := from; i <= to; i++ {
		ls = append(ls, entry(i))
	}
	return ls
}

func open(t *testing.T, fs aof.FS, opts Options) *Store {
	t.Helper()
	opts.FS = fs
	s, err := Open(testPath, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func store(t *testing.T, s *Store, from, to uint64, batch int) {
	t.Helper()
	ls := entries(from, to)
	for len(ls) > 0 {
		n := min(batch, len(ls))
		if err := s.StoreLogs(ls[:n]); err != nil {
			t.Fatalf("StoreLogs %d..: %v", ls[0].Index, err)
		}
		ls = ls[n:]
	}
}

// holds checks that s holds exactly entries first..last, each as written.
func holds(t *testing.T, s *Store, first, last uint64) {
	t.Helper()
	if f, _ := s.FirstIndex(); f != first {
		t.Fatalf("FirstIndex %d, want %d", f, first)
	}
	if l, _ := s.LastIndex(); l != last {
		t.Fatalf("LastIndex %d, want %d", l, last)
	}
	for i := first; i <= last && first != 0; i++ {
		same(t, s, i)
	}
	var l raft.Log
	for _, i := range []uint64{first - 1, last + 1} {
		if i == 0 {
			continue
		}
		if err := s.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) of %d..%d: %v, want ErrLogNotFound", i, first, last, err)
		}
	}
}

func same(t *testing.T, s *Store, i uint64) {
	t.Helper()
	var got raft.Log
	if err := s.GetLog(i, &got); err != nil {
		t.Fatalf("GetLog(%d): %v", i, err)
	}
	want := entry(i)
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
		!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
		!got.AppendedAt.Equal(want.AppendedAt) {
		t.Fatalf("GetLog(%d) = %+v, want %+v", i, got, *want)
	}
}

func TestAppendGetReopen(t *testing.T) {
	fs := aof.NewMemFS()
	s := open(t, fs, Options{})
	holds(t, s, 0, 0)
	store(t, s, 1, 500, 7)
	holds(t, s, 1, 500)
	if err := s.StoreLog(entry(501)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	fs.Crash() // every StoreLogs was fsynced
	s = open(t, fs, Options{})
	holds(t, s, 1, 501)
	store(t, s, 502, 600, 50)
	holds(t, s, 1, 600)
}

func TestRefusesGaps(t *testing.T) {
	s := open(t, aof.NewMemFS(), Options{})
	store(t, s, 10, 20, 5) // an empty log starts anywhere (after a snapshot)
	if err := s.StoreLogs(entries(22, 23)); !errors.Is(err, ErrGap) {
		t.Fatalf("a gap: %v", err)
	}
	if err := s.StoreLogs([]*raft.Log{entry(21), entry(23)}); !errors.Is(err, ErrGap) {
		t.Fatalf("a gap in a batch: %v", err)
	}
	if err := s.DeleteRange(12, 15); !errors.Is(err, ErrHole) {
		t.Fatalf("a hole: %v", err)
	}
	holds(t, s, 10, 20)
	// A batch from an earlier entry replaces the entries from there.
	store(t, s, 15, 30, 16)
	holds(t, s, 10, 30)
}

func TestSegmentsAndDeletes(t *testing.T) {
	fs := aof.NewMemFS()
	opts := Options{SegmentSize: 2000} // about ten entries a segment
	s := open(t, fs, opts)
	store(t, s, 1, 300, 3)
	if n := len(s.segs); n < 10 {
		t.Fatalf("%d segments, want many", n)
	}
	holds(t, s, 1, 300)

	// A prefix: whole segments go.
	before := len(s.segs)
	if err := s.DeleteRange(1, 120); err != nil {
		t.Fatal(err)
	}
	holds(t, s, 121, 300)
	if len(s.segs) >= before {
		t.Fatalf("no segment dropped: %d then %d", before, len(s.segs))
	}
	// A suffix across segments, then entries of another leader's.
	if err := s.DeleteRange(201, 300); err != nil {
		t.Fatal(err)
	}
	holds(t, s, 121, 200)
	store(t, s, 201, 250, 4)
	holds(t, s, 121, 250)

	// Reopened: the prefix's rest in the first segment is back, older and
	// true; the leftovers are gone.
	s.Close()
	s = open(t, fs, opts)
	first, _ := s.FirstIndex()
	if first > 121 || first < 1 {
		t.Fatalf("FirstIndex %d after reopen", first)
	}
	holds(t, s, first, 250)
	if segs := countSegments(fs); segs != len(s.segs) {
		t.Fatalf("%d segment files, %d in the log", segs, len(s.segs))
	}

	// Everything (a snapshot installed): a new log starts past it.
	if err := s.DeleteRange(first, 250); err != nil {
		t.Fatal(err)
	}
	holds(t, s, 0, 0)
	store(t, s, 1000, 1010, 4)
	holds(t, s, 1000, 1010)
	s.Close()
	s = open(t, fs, opts)
	holds(t, s, 1000, 1010)
	if segs := countSegments(fs); segs != len(s.segs) {
		t.Fatalf("%d segment files, %d in the log", segs, len(s.segs))
	}
}

// countSegments counts the segment files a MemFS holds.
func countSegments(fs *aof.MemFS) int {
	n := 0
	for id := uint64(1); id < 1000; id++ {
		if _, err := fs.Stat(aof.SegPath(testPath, id)); err == nil {
			n++
		}
	}
	return n
}

// TestTornTailAtEveryByte cuts the last segment at every byte of its last
// records: the log opens to the entries written whole before the cut, and
// takes the next one.
func TestTornTailAtEveryByte(t *testing.T) {
	fs := aof.NewMemFS()
	s := open(t, fs, Options{})
	store(t, s, 1, 40, 4)
	var ends []int64 // where each entry's record ends
	for i := range s.segs[0].offs {
		ends = append(ends, s.segs[0].end(i))
	}
	s.Close()
	seg := aof.SegPath(testPath, 1)
	full, _ := fs.ReadFile(seg)
	manifest, _ := fs.ReadFile(testPath)
	for cut := ends[30]; cut <= int64(len(full)); cut++ {
		for _, zeros := range []bool{false, true} {
			c := aof.NewMemFS()
			c.WriteFile(testPath, manifest)
			b := bytes.Clone(full[:cut])
			if zeros { // the size reached the disk, the data did not
				b = append(b, make([]byte, len(full)-int(cut))...)
			}
			c.WriteFile(seg, b)
			s, err := Open(testPath, Options{FS: c})
			if err != nil {
				t.Fatalf("cut at %d (zeros %v): %v", cut, zeros, err)
			}
			// Entries written whole before the cut; with zeros after it,
			// a record whose missing bytes were zeros is whole too.
			want := uint64(0)
			for want < uint64(len(ends)) && ends[want] <= int64(len(b)) && bytes.Equal(b[:ends[want]], full[:ends[want]]) {
				want++
			}
			holds(t, s, 1, want)
			if err := s.StoreLog(entry(want + 1)); err != nil {
				t.Fatalf("cut at %d: append: %v", cut, err)
			}
			s.Close()
			s, err = Open(testPath, Options{FS: c})
			if err != nil {
				t.Fatal(err)
			}
			holds(t, s, 1, want+1)
			s.Close()
		}
	}
}

// TestChecksum: a flipped bit before the tail refuses the log; one in an
// entry read later fails that read, never returns other bytes.
func TestChecksum(t *testing.T) {
	fs := aof.NewMemFS()
	s := open(t, fs, Options{})
	store(t, s, 1, 20, 5)
	seg := aof.SegPath(testPath, 1)
	at := s.segs[0].offs[5] + aof.RecordHeaderSize + 3
	s.Close()
	b, _ := fs.ReadFile(seg)
	b[at] ^= 0x10
	fs.WriteFile(seg, b)
	if _, err := Open(testPath, Options{FS: fs}); !errors.Is(err, aof.ErrCorrupt) {
		t.Fatalf("open with entry 6 damaged: %v, want aof.ErrCorrupt", err)
	}
	b[at] ^= 0x10
	fs.WriteFile(seg, b)
	s = open(t, fs, Options{})
	f, _ := fs.OpenFile(seg, os.O_RDWR, 0)
	f.Seek(at, 0)
	f.Write([]byte{b[at] ^ 0x01})
	f.Close()
	var l raft.Log
	if err := s.GetLog(6, &l); !errors.Is(err, aof.ErrChecksum) {
		t.Fatalf("GetLog of a damaged entry: %v", err)
	}
	same(t, s, 7)
}

// TestNoSync: with NoSync a crash loses what was appended since the last
// Sync, never more, and the log opens.
func TestNoSync(t *testing.T) {
	fs := aof.NewMemFS()
	s := open(t, fs, Options{NoSync: true})
	store(t, s, 1, 30, 5)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	store(t, s, 31, 40, 5)
	c := fs.CrashClone()
	s2, err := Open(testPath, Options{FS: c})
	if err != nil {
		t.Fatal(err)
	}
	holds(t, s2, 1, 30)
	s2.Close()
}

// TestConcurrentReaders: Raft's replication goroutines read while its main
// goroutine appends, seals and deletes, and a Sync runs beside them (run
// with -race). A read of an entry the log holds returns that entry.
func TestConcurrentReaders(t *testing.T) {
	s := open(t, aof.NewMemFS(), Options{SegmentSize: 4000, NoSync: true})
	store(t, s, 1, 50, 5)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for r := range 3 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				first, last := bounds(s)
				if first == 0 {
					continue
				}
				i := first + rng.Uint64N(last-first+1)
				var l raft.Log
				err := s.GetLog(i, &l)
				if errors.Is(err, raft.ErrLogNotFound) {
					continue // deleted since bounds
				}
				if err != nil || l.Index != i || !bytes.Equal(l.Data, entry(i).Data) {
					errs <- fmt.Errorf("GetLog(%d): %v, index %d", i, err, l.Index)
					return
				}
			}
		}()
	}
	go func() {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
				if err := s.Sync(); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	for next := uint64(51); next < 2000; next += 5 {
		store(t, s, next, next+4, 5)
		if next%200 == 1 {
			if err := s.DeleteRange(1, next-100); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSplitEntries runs the tests above with every entry over 64 bytes
// split over records, as entries over 16 MiB are.
func TestSplitEntries(t *testing.T) {
	defer func(n int) { maxPart = n }(maxPart)
	maxPart = 64
	for name, f := range map[string]func(*testing.T){
		"AppendGetReopen": TestAppendGetReopen, "RefusesGaps": TestRefusesGaps,
		"SegmentsAndDeletes": TestSegmentsAndDeletes, "TornTailAtEveryByte": TestTornTailAtEveryByte,
		"Checksum": TestChecksum, "NoSync": TestNoSync, "CrashAtEveryStep": TestCrashAtEveryStep,
	} {
		t.Run(name, f)
	}
	// And one of the records a batch of large payloads makes.
	s := open(t, aof.NewMemFS(), Options{})
	big := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte("x"), 10_000)}
	if err := s.StoreLog(big); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); err != nil || !bytes.Equal(l.Data, big.Data) {
		t.Fatalf("GetLog of a split entry: %v, %d bytes", err, len(l.Data))
	}
}

// BytesAfter is the size the entries after an index take on disk, across
// segments and after a deleted prefix: what the same entries take written
// alone into one segment.
func TestBytesAfter(t *testing.T) {
	s := open(t, aof.NewMemFS(), Options{SegmentSize: 2000})
	store(t, s, 1, 300, 3)
	if err := s.DeleteRange(1, 40); err != nil {
		t.Fatal(err)
	}
	for _, k := range []uint64{0, 39, 40, 41, 57, 150, 151, 299, 300, 400} {
		var want int64
		if k < 300 {
			alone := open(t, aof.NewMemFS(), Options{SegmentSize: 1 << 30})
			store(t, alone, max(k+1, 41), 300, 7)
			want = alone.segs[0].size - alone.segs[0].offs[0]
		}
		if got := s.BytesAfter(k); got != want {
			t.Fatalf("BytesAfter(%d) = %d, want %d (%d segments)", k, got, want, len(s.segs))
		}
	}
}
