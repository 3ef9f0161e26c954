package bucket

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/delayd/delayd/aof"
)

const testPath = "/data/delayd.aof"

// fakeLog is the log's payloads: segment -> offset -> bytes.
type fakeLog struct {
	segs map[uint16]map[int64][]byte
	next int64
}

func newFakeLog() *fakeLog { return &fakeLog{segs: map[uint16]map[int64][]byte{}} }

// put stores payload in segment seg and returns its locator.
func (l *fakeLog) put(seg uint16, payload []byte) Loc {
	if l.segs[seg] == nil {
		l.segs[seg] = map[int64][]byte{}
	}
	l.next += 100
	l.segs[seg][l.next] = slices.Clone(payload)
	return Loc{File: uint64(seg), Off: l.next, N: uint32(len(payload))}
}

func (l *fakeLog) ReadPayload(seg uint16, off int64, n int) ([]byte, error) {
	b, ok := l.segs[seg][off]
	if !ok || len(b) != n {
		return nil, fmt.Errorf("no payload of %d bytes at %d:%d", n, seg, off)
	}
	return slices.Clone(b), nil
}

// want is the model of one job.
type want struct {
	due           int64
	seq           uint64
	head, payload []byte
	queue         string
}

func queueOf(sid uint64) string { return fmt.Sprint("q", sid%3) }

func newSet(t *testing.T, fs aof.FS, log LogReader, maxOpen int) *Set {
	t.Helper()
	s, err := Open(Options{FS: fs, Path: testPath, Log: log, MaxOpen: maxOpen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func headOf(sid uint64, due int64) []byte { return fmt.Appendf(nil, "head %d due %d", sid, due) }

func payloadOf(sid uint64) []byte { return bytes.Repeat([]byte{byte(sid)}, 1+int(sid%300)) }

// check asserts that s holds exactly m, each job read back whole.
func check(t *testing.T, s *Set, m map[uint64]want) {
	t.Helper()
	if s.Len() != int64(len(m)) {
		t.Fatalf("Len %d, want %d", s.Len(), len(m))
	}
	for sid, w := range m {
		j, ok, err := s.Get(sid)
		if !ok || err != nil {
			t.Fatalf("Get(%d): ok %v, %v", sid, ok, err)
		}
		if j.Due != w.due || j.Seq != w.seq || j.Queue != w.queue || !bytes.Equal(j.Head, w.head) || !bytes.Equal(j.Payload, w.payload) {
			t.Fatalf("Get(%d) = due %d seq %d head %q payload %d bytes; want due %d seq %d head %q payload %d bytes",
				sid, j.Due, j.Seq, j.Head, len(j.Payload), w.due, w.seq, w.head, len(w.payload))
		}
	}
	n := 0
	s.x.each(func(sid uint64, _ uint32) {
		if _, ok := m[sid]; !ok {
			t.Fatalf("index holds %d, which is not in the model", sid)
		}
		n++
	})
	if n != len(m) {
		t.Fatalf("index holds %d ids, want %d", n, len(m))
	}
}

// checkpoint runs a whole checkpoint as the owner would, at pos.
func checkpoint(t *testing.T, s *Set, fs aof.FS, pos Pos) {
	t.Helper()
	cp := s.Checkpoint(pos)
	for _, f := range cp.Frozen() {
		r, err := s.WriteFrozen(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Install(f, r)
	}
	if err := WriteCheckpoint(fs, testPath, cp); err != nil {
		t.Fatal(err)
	}
	RemoveRuns(fs, testPath, s.Installed(cp))
}

// load runs one loading round at until and returns what it took.
func load(t *testing.T, s *Set, until int64, max int) []Job {
	t.Helper()
	p := s.Due(until, max)
	js, err := s.ReadDue(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []Job
	for i := range js {
		if s.Take(&js[i]) {
			got = append(got, js[i])
		}
	}
	s.Settle(p)
	return got
}

func TestIndexAgainstAMap(t *testing.T) {
	var x index
	defer x.reset()
	m := map[uint64]uint32{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300_000 {
		sid := 1 + rng.Uint64N(50_000)
		if i%3 == 0 {
			sid = rng.Uint64() | 1
		}
		switch rng.IntN(3) {
		case 0, 1:
			loc := rng.Uint32() &^ 1 // never tombLoc
			x.put(sid, loc)
			m[sid] = loc
		case 2:
			_, had := m[sid]
			if x.del(sid) != had {
				t.Fatalf("del(%d) = %v, want %v", sid, !had, had)
			}
			delete(m, sid)
		}
	}
	if x.n != len(m) {
		t.Fatalf("n %d, want %d", x.n, len(m))
	}
	for sid, loc := range m {
		if got, ok := x.get(sid); !ok || got != loc {
			t.Fatalf("get(%d) = %d %v, want %d", sid, got, ok, loc)
		}
	}
	for i := range 1000 {
		sid := uint64(1_000_000 + i)
		if _, ok := x.get(sid); ok {
			t.Fatalf("get(%d) found an id never put", sid)
		}
	}
	// At most 3/4 full, at least 3/8 for a shard that grew: about 12/0.56 bytes a job.
	if per := float64(x.bytes()) / float64(len(m)); per > 36 {
		t.Fatalf("%.1f index bytes a job", per)
	}
}

// fileAll files in another order than it is given (by shard, shards over
// CPUs): the index must end as put one at a time leaves it, duplicates
// (the last wins), ids already filed and tombstones included, on both the
// one-CPU and the shared-out path.
func TestFileAllMatchesPut(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var x, y index
	defer x.reset()
	defer y.reset()
	var f filer
	for _, n := range []int{100, 5_000, fileParallel * 3} {
		sids, locs := make([]uint64, n), make([]uint32, n)
		for i := range sids {
			sids[i] = 1 + rng.Uint64N(uint64(n)) // about a third are duplicates
			if i%4 == 0 {
				sids[i] = rng.Uint64() | 1
			}
			locs[i] = rng.Uint32() &^ 1
		}
		for i := range n / 10 { // tombstones where ids will go
			x.put(sids[i], 7)
			y.put(sids[i], 7)
			x.del(sids[i])
			y.del(sids[i])
		}
		for i := range sids {
			x.put(sids[i], locs[i])
		}
		y.fileAll(&f, sids, locs)
		if x.n != y.n {
			t.Fatalf("%d ids: n %d one at a time, %d by fileAll", n, x.n, y.n)
		}
		x.each(func(sid uint64, loc uint32) {
			if got, ok := y.get(sid); !ok || got != loc {
				t.Fatalf("%d ids: get(%d) = %d %v after fileAll, want %d", n, sid, got, ok, loc)
			}
		})
	}
}

func TestRunRoundTripAndBound(t *testing.T) {
	fs := aof.NewMemFS()
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 1000
	jobs := make([]runJob, n)
	for i := range jobs {
		sid := uint64(i + 1)
		due := 1000 + rng.Int64N(50) // many equal dues: order by seq
		jobs[i] = runJob{Due: due, Seq: uint64(n - i), SID: sid, Queue: uint32(i % 2), Head: headOf(sid, due), Payload: payloadOf(sid)}
	}
	r, err := writeRunJobs(fs, testPath, 7, []string{"a", "bb"}, n, func(i int) (runJob, error) { return jobs[i], nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	var order []Sorted
	r, err = OpenRun(fs, testPath, 7, func(pos int, s Sorted) { order = append(order, s) })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(order) != n || r.N != n {
		t.Fatalf("%d sorted entries, N %d", len(order), r.N)
	}
	for k := 1; k < n; k++ {
		a, b := order[k-1], order[k]
		if a.Due > b.Due || a.Due == b.Due && a.Seq > b.Seq {
			t.Fatalf("sorted[%d] = %+v before %+v", k, a, b)
		}
	}
	for i, j := range jobs {
		got, err := r.ReadData(uint32(i))
		if err != nil {
			t.Fatal(err)
		}
		if got.Due != j.Due || got.Seq != j.Seq || got.SID != j.SID || got.Queue != j.Queue || !bytes.Equal(got.Head, j.Head) || !bytes.Equal(got.Payload, j.Payload) {
			t.Fatalf("job %d read back as %+v", i, got)
		}
		_, off, err := r.read(uint32(i))
		if p, _ := r.ReadPayload(off, len(j.Payload)); err != nil || !bytes.Equal(p, j.Payload) {
			t.Fatalf("read(%d)'s payload offset: %v", i, err)
		}
	}
	for until := int64(990); until <= 1060; until++ {
		b := r.Bound(until)
		for k, s := range order {
			if s.Due <= until && k >= b {
				t.Fatalf("Bound(%d) = %d, but sorted[%d] is due at %d", until, b, k, s.Due)
			}
		}
	}
}

// TestTornRunIsRefused cuts a run at every length and flips every byte
// of its trailer and sections: OpenRun refuses each (or, for a byte of a
// job's data, ReadData does), never reads a wrong job.
func TestTornRunIsRefused(t *testing.T) {
	fs := aof.NewMemFS()
	const n = 20
	r, err := writeRunJobs(fs, testPath, 1, []string{"q", "r"}, n, func(i int) (runJob, error) {
		return runJob{Due: int64(i), Seq: uint64(i), SID: uint64(i + 1), Queue: uint32(i % 2), Head: []byte("h"), Payload: payloadOf(uint64(i))}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	whole, _ := fs.ReadFile(RunPath(testPath, 1))
	for cut := 0; cut < len(whole); cut++ {
		fs.WriteFile(RunPath(testPath, 1), whole[:cut])
		if r, err := OpenRun(fs, testPath, 1, nil); !errors.Is(err, ErrCorrupt) {
			if r != nil {
				r.Close()
			}
			t.Fatalf("cut at %d of %d: %v", cut, len(whole), err)
		}
	}
	for at := range whole {
		b := slices.Clone(whole)
		b[at] ^= 0x40
		fs.WriteFile(RunPath(testPath, 1), b)
		r, err := OpenRun(fs, testPath, 1, nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d flipped: %v", at, err)
			}
			continue
		}
		bad := 0
		for i := range uint32(n) {
			if _, err := r.ReadData(i); err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("byte %d flipped: job %d: %v", at, i, err)
				}
				bad++
			}
		}
		r.Close()
		if bad == 0 {
			t.Fatalf("byte %d flipped: nothing noticed", at)
		}
	}
	// A run under another id's name is refused too.
	fs.WriteFile(RunPath(testPath, 2), whole)
	if _, err := OpenRun(fs, testPath, 2, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("run 1 opened as run 2: %v", err)
	}
}

func TestAddGetRemoveMoveAcrossASeal(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 4)
	m := map[uint64]want{}
	add := func(sid uint64, due int64) {
		t.Helper()
		p := payloadOf(sid)
		if err := s.Add(due, sid*10, sid, queueOf(sid), headOf(sid, due), log.put(3, p)); err != nil {
			t.Fatal(err)
		}
		m[sid] = want{due, sid * 10, headOf(sid, due), p, queueOf(sid)}
	}
	for sid := uint64(1); sid <= 10; sid++ {
		add(sid, int64(5000-sid))
	}
	if err := s.Add(1, 1, 3, queueOf(3), nil, Loc{}); !errors.Is(err, ErrExists) {
		t.Fatalf("a second add of id 3: %v", err)
	}
	if err := s.Add(1, 1, 0, queueOf(0), nil, Loc{}); !errors.Is(err, ErrZeroID) {
		t.Fatalf("id 0: %v", err)
	}
	check(t, s, m)
	if in := s.Info(); in.Mem != 3 || in.Runs != 0 {
		t.Fatalf("10 jobs in buckets of 4: %+v", in)
	}
	if !s.Remove(4) || s.Remove(4) || s.Remove(99) {
		t.Fatal("Remove")
	}
	delete(m, 4)
	if seg, ok := s.LogInUse(); !ok || seg != 3 {
		t.Fatalf("LogInUse = %d %v, want segment 3", seg, ok)
	}
	checkpoint(t, s, fs, Pos{3, 1000})
	if seg, ok := s.LogInUse(); ok {
		t.Fatalf("LogInUse = %d after the seal", seg)
	}
	if in := s.Info(); in.Mem != 0 || in.Runs != 3 {
		t.Fatalf("after a checkpoint: %+v", in)
	}
	if !s.InRun(5) || s.InRun(4) {
		t.Fatal("InRun")
	}
	check(t, s, m)
	// The log's copies are gone (compaction may drop them): runs hold all.
	clear(log.segs)
	check(t, s, m)
	// Moving from a run: the payload stays in the run until the open bucket is sealed.
	if err := s.Move(5, 9000, 555, headOf(5, 9000)); err != nil {
		t.Fatal(err)
	}
	m[5] = want{9000, 555, headOf(5, 9000), m[5].payload, queueOf(5)}
	if s.InRun(5) {
		t.Fatal("a moved job is still in its run")
	}
	check(t, s, m)
	for sid := uint64(1); sid <= 10; sid++ {
		if sid != 5 {
			s.Remove(sid) // every run but the moved job's payload is dead now
			delete(m, sid)
		}
	}
	cp := s.Checkpoint(Pos{3, 2000})
	if len(cp.Frozen()) != 1 {
		t.Fatalf("%d frozen", len(cp.Frozen()))
	}
	// Before the frozen bucket is installed, the run its payload lies in stays.
	if gone := s.Installed(&Checkpoint{Pos: cp.Pos}); len(gone) != 2 {
		t.Fatalf("runs gone before the seal: %v", gone)
	}
	check(t, s, m)
	r, err := s.WriteFrozen(cp.Frozen()[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Install(cp.Frozen()[0], r)
	if err := WriteCheckpoint(fs, testPath, cp); err != nil {
		t.Fatal(err)
	}
	gone := s.Installed(cp)
	RemoveRuns(fs, testPath, gone)
	if len(gone) != 1 || s.Info().Runs != 1 {
		t.Fatalf("runs gone %v, %+v", gone, s.Info())
	}
	check(t, s, m)
	s2 := newSet(t, fs, log, 4)
	check(t, s2, m)
	if s2.Pos() != (Pos{3, 2000}) {
		t.Fatalf("Pos %+v", s2.Pos())
	}
}

// TestLoadNeverLateNorEarly: with a fake clock stepping on, each round
// loads every live job due within the window ahead and none beyond it, in
// (due, add order), whether it sits in the open bucket, a frozen one or a
// run; cancels and moves between rounds are honoured.
func TestLoadNeverLateNorEarly(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 64)
	rng := rand.New(rand.NewPCG(5, 6))
	m := map[uint64]want{}
	const ahead = 500
	now := int64(10_000)
	sid := uint64(0)
	for step := range 400 {
		for range rng.IntN(20) {
			sid++
			due := now + ahead + 1 + rng.Int64N(20_000)
			p := payloadOf(sid)
			if err := s.Add(due, sid, sid, queueOf(sid), headOf(sid, due), log.put(uint16(sid%7), p)); err != nil {
				t.Fatal(err)
			}
			m[sid] = want{due, sid, headOf(sid, due), p, queueOf(sid)}
		}
		if len(m) > 0 && rng.IntN(3) == 0 {
			for victim := range m {
				if rng.IntN(2) == 0 {
					s.Remove(victim)
					delete(m, victim)
				} else {
					due := now + ahead + 1 + rng.Int64N(20_000)
					sid++ // the move's add order
					if err := s.Move(victim, due, sid, headOf(victim, due)); err != nil {
						t.Fatal(err)
					}
					m[victim] = want{due, sid, headOf(victim, due), m[victim].payload, queueOf(victim)}
				}
				break
			}
		}
		if step%37 == 0 {
			checkpoint(t, s, fs, Pos{1, int64(step)})
		}
		if step%53 == 52 {
			// DEL of a queue: every job of it, wherever it is, and no other.
			q := queueOf(uint64(step))
			p := s.OfQueue(q)
			js, err := s.ReadQueue(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := range js {
				if js[i].Queue != q {
					t.Fatalf("OfQueue(%s) read %+v", q, js[i])
				}
				if s.Take(&js[i]) {
					if _, ok := m[js[i].SID]; !ok {
						t.Fatalf("OfQueue(%s) took %d, which was gone", q, js[i].SID)
					}
					delete(m, js[i].SID)
				}
			}
			for id, w := range m {
				if w.queue == q {
					t.Fatalf("job %d of %s left after its DEL", id, q)
				}
			}
		}
		now += 1 + rng.Int64N(100)
		got := load(t, s, now+ahead, 1<<20)
		for k, j := range got {
			w, ok := m[j.SID]
			if !ok {
				t.Fatalf("loaded %d, which was removed", j.SID)
			}
			if j.Due > now+ahead || j.Due != w.due || j.Seq != w.seq || !bytes.Equal(j.Payload, w.payload) || !bytes.Equal(j.Head, w.head) {
				t.Fatalf("at %d loaded %+v, want %+v", now, j, w)
			}
			if k > 0 && (got[k-1].Due > j.Due || got[k-1].Due == j.Due && got[k-1].Seq > j.Seq) {
				t.Fatalf("loaded out of (due, add order): %+v then %+v", got[k-1], j)
			}
			delete(m, j.SID)
		}
		for id, w := range m {
			if w.due <= now+ahead {
				t.Fatalf("at %d, job %d due at %d was not loaded", now, id, w.due)
			}
		}
		check(t, s, m)
	}
	if sid < 3000 {
		t.Fatalf("only %d jobs", sid)
	}
}

// TestCrashBetweenSteps crashes the filesystem between every step of a
// checkpoint and reopens: the Set is the last checkpoint's whole (the log
// after its position holds the rest), and no file outside it is left.
func TestCrashBetweenSteps(t *testing.T) {
	for stop := range 6 {
		t.Run(fmt.Sprint(stop), func(t *testing.T) {
			fs, log := aof.NewMemFS(), newFakeLog()
			s := newSet(t, fs, log, 8)
			m := map[uint64]want{}
			for sid := uint64(1); sid <= 30; sid++ {
				p := payloadOf(sid)
				s.Add(int64(sid), sid, sid, queueOf(sid), headOf(sid, int64(sid)), log.put(1, p))
				m[sid] = want{int64(sid), sid, headOf(sid, int64(sid)), p, queueOf(sid)}
			}
			checkpoint(t, s, fs, Pos{1, 100})
			before := maps(m)
			// Second round: a removal, a move, new jobs, a load.
			s.Remove(2)
			delete(m, 2)
			s.Move(3, 500, 99, headOf(3, 500))
			m[3] = want{500, 99, headOf(3, 500), m[3].payload, queueOf(3)}
			for sid := uint64(31); sid <= 45; sid++ {
				p := payloadOf(sid)
				s.Add(int64(sid)+100, sid, sid, queueOf(sid), headOf(sid, int64(sid)+100), log.put(2, p))
				m[sid] = want{int64(sid) + 100, sid, headOf(sid, int64(sid)+100), p, queueOf(sid)}
			}
			for _, j := range load(t, s, 10, 100) {
				delete(m, j.SID)
			}
			cp := s.Checkpoint(Pos{2, 100})
			crash := func(step int) bool {
				if stop != step {
					return false
				}
				fs.Crash()
				s2 := newSet(t, fs, log, 8)
				check(t, s2, before)
				if s2.Pos() != (Pos{1, 100}) {
					t.Fatalf("Pos %+v", s2.Pos())
				}
				for id := uint64(1); id < cp.NextID+20; id++ {
					if _, err := fs.Stat(RunPath(testPath, id) + ".tmp"); err == nil {
						t.Fatalf("run %d's temporary left", id)
					}
					_, err := fs.Stat(RunPath(testPath, id))
					if named := slices.ContainsFunc(cpOf(t, fs).Runs, func(r RunState) bool { return r.ID == id }); named != (err == nil) {
						t.Fatalf("run %d: named %v, on disk %v", id, named, err == nil)
					}
				}
				return true
			}
			for i, f := range cp.Frozen() {
				if crash(i) {
					return
				}
				r, err := s.WriteFrozen(f, nil)
				if err != nil {
					t.Fatal(err)
				}
				s.Install(f, r)
			}
			if crash(4) {
				return
			}
			fs.Inject(aof.Fault{Op: aof.OpRename, Path: CheckpointPath(testPath) + ".tmp"})
			if err := WriteCheckpoint(fs, testPath, cp); err == nil {
				t.Fatal("a failed rename went unnoticed")
			}
			if crash(5) {
				return
			}
			if err := WriteCheckpoint(fs, testPath, cp); err != nil {
				t.Fatal(err)
			}
			gone := s.Installed(cp)
			fs.Crash() // before RemoveRuns: the next start removes them
			s2 := newSet(t, fs, log, 8)
			check(t, s2, m)
			for _, id := range gone {
				if _, err := fs.Stat(RunPath(testPath, id)); err == nil {
					t.Fatalf("dropped run %d left on disk", id)
				}
			}
		})
	}
}

func cpOf(t *testing.T, fs aof.FS) *Checkpoint {
	cp, err := readCheckpoint(fs, testPath)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func maps(m map[uint64]want) map[uint64]want {
	c := make(map[uint64]want, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func TestTornCheckpointIsRefused(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 8)
	for sid := uint64(1); sid <= 20; sid++ {
		s.Add(int64(sid), sid, sid, queueOf(sid), nil, log.put(1, payloadOf(sid)))
	}
	s.Remove(7)
	checkpoint(t, s, fs, Pos{1, 1})
	whole, _ := fs.ReadFile(CheckpointPath(testPath))
	for cut := range len(whole) {
		fs.WriteFile(CheckpointPath(testPath), whole[:cut])
		if _, err := Open(Options{FS: fs, Path: testPath}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: %v", cut, len(whole), err)
		}
	}
	for at := range whole {
		b := slices.Clone(whole)
		b[at] ^= 1
		fs.WriteFile(CheckpointPath(testPath), b)
		if _, err := Open(Options{FS: fs, Path: testPath}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", at, err)
		}
	}
	fs.WriteFile(CheckpointPath(testPath), whole)
	fs.Remove(RunPath(testPath, 2))
	if _, err := Open(Options{FS: fs, Path: testPath}); err == nil {
		t.Fatal("a checkpoint naming a missing run opened")
	}
}

// TestIndexLocOfAllOnes: the last slot's last entry packs to the tombstone's
// loc; a live cell is told by its id, never by its loc.
func TestIndexLocOfAllOnes(t *testing.T) {
	var x index
	defer x.reset()
	l := packLoc(maxSlots-1, maxEntries-1)
	if l != tombLoc {
		t.Fatalf("packLoc = %#x", l)
	}
	x.put(42, l)
	if got, ok := x.get(42); !ok || got != l {
		t.Fatalf("get = %#x %v", got, ok)
	}
	if !x.del(42) || x.del(42) {
		t.Fatal("del")
	}
	if _, ok := x.get(0); ok {
		t.Fatal("id 0 found")
	}
}

// TestFormatIsPinned pins the bytes of a run and of a checkpoint: a change
// of either format must come with a new magic (old files must open: the
// first run format's are TestFirstFormatRunsRead's) and a new pin here.
func TestFormatIsPinned(t *testing.T) {
	fs := aof.NewMemFS()
	r, err := writeRunJobs(fs, testPath, 3, []string{"mail"}, 2, func(i int) (runJob, error) {
		return runJob{Due: int64(2 - i), Seq: uint64(i), SID: uint64(0x100 + i), Head: []byte{'h', byte(i)}, Payload: []byte{'p'}}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	run, _ := fs.ReadFile(RunPath(testPath, 3))
	const wantRun = "444c59424b540002" + // magic
		"02" + "01" + "6801" + "70" + "a78a5f94" + // job 1 (due 1) first: hlen, plen, head, payload, CRC
		"02" + "01" + "6800" + "70" + "d012fd87" +
		"1100000000000000" + "01000000" + "0800000000000000" + "00000000" + // byindex: data, sorted place
		"0100000000000000" + "0100000000000000" + "0101000000000000" + "01000000" + "00000000" + // sorted: job 1 (due 1) first
		"0200000000000000" + "0000000000000000" + "0001000000000000" + "00000000" + "00000000" +
		"01000000" + "04000000" + "6d61696c" + // names
		"444c5942454e4401" + "0300000000000000" + "0200000000000000" + "1a00000000000000" + "3200000000000000" + "7200000000000000" +
		"94f071c7" + "798aae7b" + "099b63b6" + "7b230000" // trailer
	if got := fmt.Sprintf("%x", run); got != wantRun {
		t.Errorf("run bytes:\n got %s\nwant %s", got, wantRun)
	}
	cp := &Checkpoint{Pos: Pos{5, 77}, NextID: 4, Runs: []RunState{{ID: 3, N: 2, Cursor: 1, Dead: []uint64{1}}}, Drop: []uint64{2}}
	const wantCP = "444c5942434b5001" + "0500000000000000" + "4d00000000000000" + "0400000000000000" + "01000000" + "01000000" +
		"0300000000000000" + "02000000" + "01000000" + "0100000000000000" + "0200000000000000" + "84b205f0"
	if got := fmt.Sprintf("%x", cp.encode()); got != wantCP {
		t.Errorf("checkpoint bytes:\n got %s\nwant %s", got, wantCP)
	}
}

// TestMergeWhileJobsChange merges mostly dead runs while jobs are removed,
// moved and loaded between its steps: no job is lost, doubled or changed,
// the old runs leave at the next checkpoint, and a start finds the same.
func TestMergeWhileJobsChange(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 32)
	rng := rand.New(rand.NewPCG(7, 8))
	m := map[uint64]want{}
	sid := uint64(0)
	for round := range 8 {
		for range 40 {
			sid++
			due := int64(1000 + rng.IntN(10_000))
			p := payloadOf(sid)
			if err := s.Add(due, sid, sid, queueOf(sid), headOf(sid, due), log.put(1, p)); err != nil {
				t.Fatal(err)
			}
			m[sid] = want{due, sid, headOf(sid, due), p, queueOf(sid)}
		}
		checkpoint(t, s, fs, Pos{1, int64(round)})
	}
	for id := range m {
		if rng.IntN(10) < 8 {
			s.Remove(id)
			delete(m, id)
		}
	}
	clear(log.segs) // compaction dropped the log's copies: the runs hold every job
	runs := s.Info().Runs
	mg := s.PlanMerge()
	if mg == nil {
		t.Fatalf("no merge of %d mostly dead runs", runs)
	}
	r, err := s.WriteMerge(mg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BeginMerge(mg, r); err != nil {
		t.Fatal(err)
	}
	for step := 0; !s.Step(mg, 3); step++ {
		for id := range m {
			switch step % 3 {
			case 0:
				s.Remove(id)
				delete(m, id)
			case 1:
				sid++
				if err := s.Move(id, 20_000, sid, headOf(id, 20_000)); err != nil {
					t.Fatal(err)
				}
				m[id] = want{20_000, sid, headOf(id, 20_000), m[id].payload, queueOf(id)}
			}
			break
		}
		if step%5 == 4 {
			for _, j := range load(t, s, 1000+int64(step)*200, 1<<20) {
				if _, ok := m[j.SID]; !ok {
					t.Fatalf("loaded %d, which is gone", j.SID)
				}
				delete(m, j.SID)
			}
		}
		check(t, s, m)
	}
	check(t, s, m)
	if nb := s.b[mg.slot]; len(mg.from) < mergeMin || len(mg.out) < 20 || nb.live == 0 || nb.live == len(mg.out) {
		t.Fatalf("merged %d runs, %d jobs, %d still there: the test tests nothing", len(mg.from), len(mg.out), nb.live)
	}
	checkpoint(t, s, fs, Pos{2, 0})
	if got := s.Info().Runs; got >= runs {
		t.Fatalf("%d runs after merging, %d before", got, runs)
	}
	for _, f := range mg.from {
		if _, err := fs.Stat(RunPath(testPath, f.id)); err == nil {
			t.Fatalf("merged run %d still on disk", f.id)
		}
	}
	fs.Crash()
	check(t, newSet(t, fs, log, 32), m)
}

// TestRunDiskPerJob: the target is disk at most 1.3x the payload
// bytes with 256-byte payloads; a run adds 44 bytes a job and the framing
// beside the head (the engine's, about 10 bytes for a plain job).
func TestRunDiskPerJob(t *testing.T) {
	fs := aof.NewMemFS()
	const n = 10_000
	head, payload := make([]byte, 10), make([]byte, 256)
	r, err := writeRunJobs(fs, testPath, 1, []string{"reminders"}, n, func(i int) (runJob, error) {
		return runJob{Due: int64(i), Seq: uint64(i), SID: uint64(i + 1), Head: head, Payload: payload}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	b, _ := fs.ReadFile(RunPath(testPath, 1))
	per := float64(len(b)-len(payload)*n) / n
	if ratio := float64(len(b)) / float64(len(payload)*n); ratio > 1.3 || per > 44+10+7+1 {
		t.Fatalf("%.1f bytes a job beside the payload: %.2fx the payload bytes", per, ratio)
	}
}

// TestResetWhileASealIsWritten: FLUSHALL comes while a frozen bucket is
// being written off the lock; the write and install go on, the next
// checkpoint names nothing, and every run leaves the disk.
func TestResetWhileASealIsWritten(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 8)
	for sid := uint64(1); sid <= 20; sid++ {
		s.Add(int64(sid), sid, sid, queueOf(sid), headOf(sid, int64(sid)), log.put(1, payloadOf(sid)))
	}
	checkpoint(t, s, fs, Pos{1, 1})
	s.Move(3, 99, 100, headOf(3, 99)) // the open bucket reads a payload from a run
	for sid := uint64(21); sid <= 30; sid++ {
		s.Add(int64(sid), sid, sid, queueOf(sid), headOf(sid, int64(sid)), log.put(1, payloadOf(sid)))
	}
	fz := s.Freeze()
	if len(fz) == 0 {
		t.Fatal("nothing frozen")
	}
	s.Reset()
	check(t, s, map[uint64]want{})
	for _, f := range fz {
		r, err := s.WriteFrozen(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Install(f, r)
	}
	s.Add(5, 5, 500, "q", nil, log.put(1, []byte("after"))) // a job after the FLUSHALL
	checkpoint(t, s, fs, Pos{1, 2})
	if in := s.Info(); in.Runs != 1 || in.Jobs != 1 {
		t.Fatalf("after FLUSHALL and a checkpoint: %+v", in)
	}
	s2 := newSet(t, fs, log, 8)
	check(t, s2, map[uint64]want{500: {5, 5, nil, []byte("after"), "q"}})
	for id := uint64(1); id < s2.nextID; id++ {
		_, err := fs.Stat(RunPath(testPath, id))
		if (err == nil) != (id == s2.nextID-1) {
			t.Fatalf("run %d on disk: %v", id, err == nil)
		}
	}
}

// TestCrashDuringMerge: a checkpoint between a merge's write and its
// begin, then a crash: the start finds the runs as they were and removes
// the merged run no checkpoint names.
func TestCrashDuringMerge(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 8)
	m := map[uint64]want{}
	for sid := uint64(1); sid <= 64; sid++ {
		p := payloadOf(sid)
		s.Add(int64(sid), sid, sid, queueOf(sid), headOf(sid, int64(sid)), log.put(1, p))
		if sid%8 == 0 {
			checkpoint(t, s, fs, Pos{1, int64(sid)})
		}
		if sid%8 == 3 {
			m[sid] = want{int64(sid), sid, headOf(sid, int64(sid)), p, queueOf(sid)}
		}
	}
	for sid := uint64(1); sid <= 64; sid++ {
		if _, ok := m[sid]; !ok {
			s.Remove(sid)
		}
	}
	checkpoint(t, s, fs, Pos{1, 100})
	mg := s.PlanMerge()
	if mg == nil {
		t.Fatal("no merge")
	}
	if _, err := s.WriteMerge(mg, nil); err != nil {
		t.Fatal(err)
	}
	checkpoint(t, s, fs, Pos{1, 200})
	fs.Crash()
	s2 := newSet(t, fs, log, 8)
	check(t, s2, m)
	if _, err := fs.Stat(RunPath(testPath, mg.id)); err == nil {
		t.Fatalf("merged run %d left on disk", mg.id)
	}
}

// TestEachIsTheCheckpointsState: a backup's walk of the far jobs sees each
// job live at the checkpoint once, whole, whatever changes after it.
func TestEachIsTheCheckpointsState(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 16)
	m := map[uint64]want{}
	for sid := uint64(1); sid <= 100; sid++ {
		p := payloadOf(sid)
		s.Add(int64(sid*7%50), sid, sid, queueOf(sid), headOf(sid, int64(sid*7%50)), log.put(1, p))
		m[sid] = want{int64(sid * 7 % 50), sid, headOf(sid, int64(sid*7%50)), p, queueOf(sid)}
		if sid == 40 {
			checkpoint(t, s, fs, Pos{1, 1}) // some runs already written, some frozen below
		}
	}
	for sid := uint64(1); sid <= 100; sid += 3 {
		s.Remove(sid)
		delete(m, sid)
	}
	s.Move(2, 77, 1000, headOf(2, 77))
	m[2] = want{77, 1000, headOf(2, 77), m[2].payload, queueOf(2)}
	cp := s.Checkpoint(Pos{1, 2})
	for _, f := range cp.Frozen() {
		r, err := s.WriteFrozen(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Install(f, r)
	}
	for sid := uint64(2); sid <= 100; sid += 3 {
		s.Remove(sid) // after the capture: Each still sees them
	}
	seen := map[uint64]bool{}
	err := cp.Each(func(j *Job) error {
		w, ok := m[j.SID]
		if !ok || seen[j.SID] {
			t.Fatalf("Each gave %d (in the model %v, seen %v)", j.SID, ok, seen[j.SID])
		}
		if j.Due != w.due || j.Seq != w.seq || j.Queue != w.queue || !bytes.Equal(j.Head, w.head) || !bytes.Equal(j.Payload, w.payload) {
			t.Fatalf("Each gave %+v, want %+v", j, w)
		}
		seen[j.SID] = true
		return nil
	})
	if err != nil || len(seen) != len(m) {
		t.Fatalf("Each: %v, %d jobs of %d", err, len(seen), len(m))
	}
	// A damaged byte of a job's data stops the walk with ErrCorrupt.
	name := RunPath(testPath, cp.Runs[0].ID)
	b, _ := fs.ReadFile(name)
	b[headerSize+4] ^= 1
	fs.WriteFile(name, b)
	r, err := OpenRun(fs, testPath, cp.Runs[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cp.runs[cp.Runs[0].ID] = r
	if err := cp.Each(func(*Job) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a damaged run walked: %v", err)
	}
}

// TestEarliestPagesThroughAQueue: pages of Earliest, each after the last
// one's end, list a queue's live jobs in (due, add order), each once,
// across runs and buckets in memory.
func TestEarliestPagesThroughAQueue(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 200)
	rng := rand.New(rand.NewPCG(9, 10))
	m := map[uint64]want{}
	for sid := uint64(1); sid <= 2000; sid++ {
		due := int64(rng.IntN(300)) // many equal dues across runs
		p := payloadOf(sid)
		s.Add(due, sid, sid, queueOf(sid), headOf(sid, due), log.put(1, p))
		m[sid] = want{due, sid, headOf(sid, due), p, queueOf(sid)}
		if sid%700 == 0 {
			checkpoint(t, s, fs, Pos{1, int64(sid)})
		}
	}
	for sid := uint64(1); sid <= 2000; sid += 5 {
		s.Remove(sid)
		delete(m, sid)
	}
	var want1 []want
	for _, w := range m {
		if w.queue == "q1" {
			want1 = append(want1, w)
		}
	}
	slices.SortFunc(want1, func(a, b want) int {
		if a.due != b.due {
			return cmpInt(a.due, b.due)
		}
		return cmpInt(a.seq, b.seq)
	})
	var got []Job
	due, seq := int64(-1<<63), uint64(0)
	for {
		page, err := s.Earliest("q1", due, seq, 37)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		due, seq = page[len(page)-1].Due, page[len(page)-1].Seq
	}
	if len(got) != len(want1) {
		t.Fatalf("%d jobs listed, want %d", len(got), len(want1))
	}
	for i, j := range got {
		w := want1[i]
		if j.Due != w.due || j.Seq != w.seq || j.Queue != "q1" || !bytes.Equal(j.Payload, w.payload) || !bytes.Equal(j.Head, w.head) {
			t.Fatalf("listed %d: %+v, want %+v", i, j, w)
		}
	}
}

// TestOpenBucketPages: an open bucket's entries and heads span several
// mapped pages, a head never straddling two, read back whole before and
// after the seal; what is mapped follows what is used.
func TestOpenBucketPages(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 0)
	m := map[uint64]want{}
	const n = 3*entPage + 5
	for sid := uint64(1); sid <= n; sid++ {
		h := bytes.Repeat([]byte{byte(sid)}, 50+int(sid%101)) // ~100 B: heads fill several pages
		p := []byte(fmt.Sprint(sid))
		if err := s.Add(int64(sid), sid, sid, queueOf(sid), h, log.put(1, p)); err != nil {
			t.Fatal(err)
		}
		m[sid] = want{int64(sid), sid, h, p, queueOf(sid)}
	}
	b := s.b[s.open]
	if len(b.ents) != 4 || len(b.heads) < 4 {
		t.Fatalf("%d entry pages, %d head pages", len(b.ents), len(b.heads))
	}
	if in := s.Info(); in.MemBytes > int64(len(b.ents))*entPage*64+int64(len(b.heads))*headPage || in.MemBytes < n*64 {
		t.Fatalf("MemBytes %d for %d jobs", in.MemBytes, n)
	}
	check(t, s, m)
	checkpoint(t, s, fs, Pos{1, 1})
	check(t, s, m)
}

// Opened counts the live jobs of each queue in the runs a checkpoint names:
// what the owner's queues count once its replay reaches the checkpoint.
func TestOpenedCountsByQueue(t *testing.T) {
	fs, log := aof.NewMemFS(), newFakeLog()
	s := newSet(t, fs, log, 4)
	want := map[string]int{}
	for sid := uint64(1); sid <= 11; sid++ {
		if err := s.Add(int64(sid), sid, sid, queueOf(sid), nil, log.put(1, payloadOf(sid))); err != nil {
			t.Fatal(err)
		}
		want[queueOf(sid)]++
	}
	s.Remove(3)
	want[queueOf(3)]--
	checkpoint(t, s, fs, Pos{1, 0})
	s.Remove(4) // after the checkpoint: still live in it
	s2, err := Open(Options{FS: fs, Path: testPath, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := s2.Opened(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Opened = %v, want %v", got, want)
	}
}

// sortSorted's pieces (blocks sorted alone, merged bottom up) give the
// order one sort gives, at every size around a block's, and its yield
// comes at least once a block.
func TestSortSortedInPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for _, n := range []int{0, 1, 2, sortBlock - 1, sortBlock, sortBlock + 1, 2*sortBlock + 3, 5*sortBlock - 1, 40_000} {
		s := make([]Sorted, n)
		for i := range s {
			s[i] = Sorted{Due: rng.Int64N(int64(n/4 + 1)), Seq: uint64(i), SID: rng.Uint64(), Index: uint32(i)}
		}
		rng.Shuffle(n, func(i, j int) { s[i], s[j] = s[j], s[i] })
		want := slices.Clone(s)
		slices.SortFunc(want, cmpSorted)
		yields := 0
		sortSorted(s, func() { yields++ })
		if !slices.Equal(s, want) {
			t.Fatalf("%d entries: sorted in pieces differs from one sort", n)
		}
		if min := (n - 1) / sortBlock; yields < min {
			t.Fatalf("%d entries: %d yields, want at least %d", n, yields, min)
		}
	}
}

// byteLog is a log of segments of bytes, read as the journal reads them:
// a payload at a time or a span at a time.
type byteLog struct {
	segs          map[uint16][]byte
	payloads      int // ReadPayload calls
	spans, spanOK int
}

func (l *byteLog) put(seg uint16, filler int, payload []byte) Loc {
	if l.segs == nil {
		l.segs = map[uint16][]byte{}
	}
	l.segs[seg] = append(l.segs[seg], make([]byte, filler)...)
	off := int64(len(l.segs[seg]))
	l.segs[seg] = append(l.segs[seg], payload...)
	return Loc{File: uint64(seg), Off: off, N: uint32(len(payload))}
}

func (l *byteLog) ReadPayload(seg uint16, off int64, n int) ([]byte, error) {
	l.payloads++
	b := l.segs[seg]
	if off+int64(n) > int64(len(b)) {
		return nil, fmt.Errorf("no %d bytes at %d:%d", n, seg, off)
	}
	return slices.Clone(b[off : off+int64(n)]), nil
}

func (l *byteLog) ReadSpan(seg uint16, off int64, dst []byte) (int, error) {
	l.spans++
	b := l.segs[seg]
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	return copy(dst, b[off:]), nil
}

// A seal reads its payloads in the log through a window of it (a span
// read for many payloads) when they come in the log's order (jobs added
// with one delay), and alone when they are scattered (delays that
// differ): every job's payload comes out right, whatever its size (one
// larger than a window's share is read alone), across segments written in
// turns, at a segment's end.
func TestWriteFrozenReadsTheLogThroughAWindow(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		scattered            bool
		maxAlone, maxWindows int
	}{
		{"one delay", false, 200, 2000},
		{"delays that differ", true, 20_000, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := aof.NewMemFS()
			l := &byteLog{}
			s := newSet(t, fs, l, 0)
			rng := rand.New(rand.NewPCG(3, 4))
			m := map[uint64]want{}
			for i := range 20_000 {
				sid := uint64(i + 1)
				size := 1 + rng.IntN(600)
				if i%997 == 0 {
					size = windowSize/8 + 1 + rng.IntN(windowSize) // read alone
				}
				p := make([]byte, size)
				for k := range p {
					p[k] = byte(rng.Uint32())
				}
				seg := uint16(1 + (i/3000)%2) // two segments in turns
				loc := l.put(seg, rng.IntN(200), p)
				due := int64(1_000_000 + i)
				if tc.scattered {
					due = int64(1_000_000 + rng.IntN(1_000_000))
				}
				if err := s.Add(due, uint64(i+1), sid, queueOf(sid), headOf(sid, due), loc); err != nil {
					t.Fatal(err)
				}
				m[sid] = want{due: due, seq: uint64(i + 1), head: headOf(sid, due), payload: p, queue: queueOf(sid)}
			}
			checkpoint(t, s, fs, Pos{Seg: 9})
			check(t, s, m) // every job read back from the run
			if l.payloads > tc.maxAlone || l.spans > tc.maxWindows {
				t.Fatalf("the seal read %d payloads alone and %d windows for 20,000 jobs (at most %d and %d)", l.payloads, l.spans, tc.maxAlone, tc.maxWindows)
			}
		})
	}
}

// writeRunJobs is writeRun with each job's key taken from job itself.
func writeRunJobs(fs aof.FS, path string, id uint64, names []string, n int, job func(i int) (runJob, error), yield func()) (*Run, error) {
	return writeRun(fs, path, id, names, n, func(i int) Sorted {
		j, err := job(i)
		if err != nil {
			return Sorted{}
		}
		return Sorted{Due: j.Due, Seq: j.Seq, SID: j.SID, Queue: j.Queue}
	}, job, yield)
}
