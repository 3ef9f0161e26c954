package bucket

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/delayd/delayd/aof"
)

// The design's crash rule, end to end at the leaf: an owner keeps jobs in
// memory and in the Set, logs every change (never the Set's own moves),
// checkpoints, and compacts its log as hard as the rule allows (every job
// in memory restated, everything before the checkpoint's position
// dropped). A start then opens the Set and replays what is left of the
// log, skipping a record before the position whose job a run holds
// (InRun). The jobs it ends with must be the jobs the owner had.

type simRec struct {
	pos     int64
	op      byte // 'a' add (whole: new, restated or loaded), 'c' cancel, 'm' move, 'd' del of a queue
	sid     uint64
	due     int64
	seq     uint64
	queue   string
	payload []byte
}

type simJob struct {
	due     int64
	seq     uint64
	queue   string
	payload []byte
	at      int64 // memory only: the position of its last whole record
}

type sim struct {
	t   *testing.T
	fs  *aof.MemFS
	log *fakeLog
	s   *Set
	mem map[uint64]simJob
	rec []simRec
	pos int64
	// restarts, and those with no far job to keep: the test must see
	// enough of the others.
	restarts, empty int
}

func (m *sim) append(r simRec) simRec {
	m.pos++
	r.pos = m.pos
	if r.op == 'a' {
		m.log.segs[1][r.pos] = r.payload // its payload lies at its record's position
	}
	m.rec = append(m.rec, r)
	return r
}

// jobs is every job the owner has, in memory or in the Set.
func (m *sim) jobs(s *Set, mem map[uint64]simJob) map[uint64]simJob {
	out := map[uint64]simJob{}
	for sid, j := range mem {
		j.at = 0
		out[sid] = j
	}
	s.x.each(func(sid uint64, _ uint32) {
		j, ok, err := s.Get(sid)
		if !ok || err != nil {
			m.t.Fatalf("Get(%d): %v %v", sid, ok, err)
		}
		if _, dup := out[sid]; dup {
			m.t.Fatalf("job %d both in memory and in the Set", sid)
		}
		out[sid] = simJob{due: j.Due, seq: j.Seq, queue: j.Queue, payload: j.Payload}
	})
	return out
}

// apply is what replay does with r, on the Set s and the jobs in memory.
func apply(t *testing.T, s *Set, mem map[uint64]simJob, r simRec) {
	switch r.op {
	case 'a':
		s.Remove(r.sid) // an add of an id the Set holds replaces it
		mem[r.sid] = simJob{r.due, r.seq, r.queue, r.payload, r.pos}
	case 'c':
		if !s.Remove(r.sid) {
			delete(mem, r.sid)
		}
	case 'm':
		if s.Has(r.sid) {
			if err := s.Move(r.sid, r.due, r.seq, headOf(r.sid, r.due)); err != nil {
				t.Fatal(err)
			}
		} else if j, ok := mem[r.sid]; ok {
			j.due, j.seq = r.due, r.seq
			mem[r.sid] = j
		}
	case 'd':
		js, err := s.ReadQueue(s.OfQueue(r.queue))
		if err != nil {
			t.Fatal(err)
		}
		for i := range js {
			s.Take(&js[i])
		}
		for sid, j := range mem {
			if j.queue == r.queue {
				delete(mem, sid)
			}
		}
	}
}

func TestReplayOverACheckpointLosesNothing(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulate(t, seed) })
	}
}

func simulate(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	m := &sim{t: t, fs: aof.NewMemFS(), log: newFakeLog(), mem: map[uint64]simJob{}}
	m.log.segs[1] = map[int64][]byte{}
	m.s = newSet(t, m.fs, m.log, 16)
	var sid, seq uint64
	pick := func(in map[uint64]simJob) (uint64, bool) {
		for id := range in {
			return id, true
		}
		return 0, false
	}
	inSet := func() (uint64, bool) {
		var found uint64
		n := 0
		m.s.x.each(func(id uint64, _ uint32) {
			if n++; rng.IntN(n) == 0 {
				found = id
			}
		})
		return found, n > 0
	}
	for step := range 1500 {
		switch k := rng.IntN(100); {
		case k < 30: // a new job, in memory
			sid++
			seq++
			r := m.append(simRec{op: 'a', sid: sid, due: int64(rng.IntN(5000)), seq: seq, queue: queueOf(sid), payload: payloadOf(sid)})
			m.mem[sid] = simJob{r.due, r.seq, r.queue, r.payload, r.pos}
		case k < 50: // the spiller moves a job from memory to the Set: nothing logged
			if id, ok := pick(m.mem); ok {
				j := m.mem[id]
				if err := m.s.Add(j.due, j.seq, id, j.queue, headOf(id, j.due), Loc{File: 1, Off: j.at, N: uint32(len(j.payload))}); err != nil {
					t.Fatal(err)
				}
				delete(m.mem, id)
			}
		case k < 60: // a cancel, wherever the job is
			if id, ok := inSet(); ok && rng.IntN(2) == 0 {
				m.append(simRec{op: 'c', sid: id})
				m.s.Remove(id)
			} else if id, ok := pick(m.mem); ok {
				m.append(simRec{op: 'c', sid: id})
				delete(m.mem, id)
			}
		case k < 72: // a reschedule
			seq++
			due := int64(rng.IntN(5000))
			if id, ok := inSet(); ok && rng.IntN(2) == 0 {
				m.append(simRec{op: 'm', sid: id, due: due, seq: seq})
				if err := m.s.Move(id, due, seq, headOf(id, due)); err != nil {
					t.Fatal(err)
				}
			} else if id, ok := pick(m.mem); ok {
				m.append(simRec{op: 'm', sid: id, due: due, seq: seq})
				j := m.mem[id]
				j.due, j.seq = due, seq
				m.mem[id] = j
			}
		case k < 80: // loading: taken out of the Set and restated
			p := m.s.Due(int64(rng.IntN(5000)), 8)
			js, err := m.s.ReadDue(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range js {
				j := &js[i]
				if m.s.Take(j) {
					r := m.append(simRec{op: 'a', sid: j.SID, due: j.Due, seq: j.Seq, queue: j.Queue, payload: j.Payload})
					m.mem[j.SID] = simJob{j.Due, j.Seq, j.Queue, j.Payload, r.pos}
				}
			}
			m.s.Settle(p)
		case k < 82: // DEL of a queue
			r := m.append(simRec{op: 'd', queue: queueOf(uint64(step))})
			apply(t, m.s, m.mem, r)
		case k < 92: // a checkpoint, then compaction as hard as it may go
			cp := m.s.Checkpoint(Pos{1, m.pos + 1})
			for _, f := range cp.Frozen() {
				r, err := m.s.WriteFrozen(f, nil)
				if err != nil {
					t.Fatal(err)
				}
				m.s.Install(f, r)
			}
			if err := WriteCheckpoint(m.fs, testPath, cp); err != nil {
				t.Fatal(err)
			}
			RemoveRuns(m.fs, testPath, m.s.Installed(cp))
			// Compaction drops the log before some point behind the
			// checkpoint's position, the jobs in memory whose last whole
			// record lies there restated at the head first.
			drop := 1 + rng.Int64N(cp.Pos.Off)
			for id, j := range m.mem {
				if j.at < drop {
					r := m.append(simRec{op: 'a', sid: id, due: j.due, seq: j.seq, queue: j.queue, payload: j.payload})
					j.at = r.pos
					m.mem[id] = j
				}
			}
			keep := m.rec[:0]
			for _, r := range m.rec {
				if r.pos >= drop {
					keep = append(keep, r)
				} else {
					delete(m.log.segs[1], r.pos)
				}
			}
			m.rec = keep
		case k < 94 && step > 0: // a merge, all of it
			if mg := m.s.PlanMerge(); mg != nil {
				r, err := m.s.WriteMerge(mg, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.s.BeginMerge(mg, r); err != nil {
					t.Fatal(err)
				}
				for !m.s.Step(mg, 5) {
				}
			}
		default: // a crash and a start
			m.restart()
		}
	}
	m.restart()
	if m.restarts-m.empty < 10 {
		t.Fatalf("only %d restarts of %d had far jobs to keep", m.restarts-m.empty, m.restarts)
	}
}

// restart crashes, opens the Set from disk and replays the log over it,
// then checks it holds what the owner had.
func (m *sim) restart() {
	t := m.t
	want := m.jobs(m.s, m.mem)
	m.fs.Crash()
	s := newSet(t, m.fs, m.log, 16)
	mem := map[uint64]simJob{}
	// The jobs the runs hold that no record after the checkpoint names
	// must stay in the runs: replay brings no far job into memory.
	stay := map[uint64]bool{}
	s.x.each(func(id uint64, _ uint32) { stay[id] = true })
	for _, r := range m.rec {
		if r.pos >= s.Pos().Off {
			delete(stay, r.sid)
			if r.op == 'd' {
				for id := range stay {
					if queueOf(id) == r.queue {
						delete(stay, id)
					}
				}
			}
		}
	}
	for _, r := range m.rec {
		if r.pos >= s.Pos().Off {
			apply(t, s, mem, r)
			continue
		}
		// Before the checkpoint's position a record never changes the
		// Set: the runs have their jobs as of it.
		switch {
		case r.op == 'd':
			apply(t, New(Options{}), mem, r)
		case !s.InRun(r.sid):
			apply(t, s, mem, r)
		}
	}
	for id := range stay {
		if !s.InRun(id) {
			t.Fatalf("replay took job %d out of its run", id)
		}
	}
	if len(stay) == 0 && len(m.rec) > 0 {
		m.empty++
	}
	m.restarts++
	got := m.jobs(s, mem)
	if len(got) != len(want) {
		t.Fatalf("after a restart %d jobs, want %d", len(got), len(want))
	}
	for id, w := range want {
		g, ok := got[id]
		if !ok || g.due != w.due || g.seq != w.seq || g.queue != w.queue || !bytes.Equal(g.payload, w.payload) {
			t.Fatalf("after a restart job %d = %+v (%v), want %+v", id, g, ok, w)
		}
	}
	// The restarted owner goes on from what it replayed.
	m.s, m.mem = s, mem
}
