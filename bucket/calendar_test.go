package bucket

import (
	"math/rand/v2"
	"testing"

	"github.com/delayd/delayd/aof"
)

// A round offers every live job due by its time (all of them when it is
// not cut by its max, and never one due later), whatever the spread of
// dues: before the ring, in it, past it (later), in several buckets in
// memory, with removes and moves between rounds.
func TestCalendarAgainstAModel(t *testing.T) {
	log := newFakeLog()
	s, err := Open(Options{FS: aof.NewMemFS(), Path: testPath, Log: log, MaxOpen: 3000, Grain: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	live := map[uint64]int64{} // sid -> due
	var now int64 = 1_000_000
	var sid, seq uint64
	for step := range 4000 {
		for range rng.IntN(8) {
			sid++
			seq++
			due := now + 30 + rng.Int64N(600)
			switch rng.IntN(10) {
			case 0:
				due = now + 30 + rng.Int64N(2_000_000) // past the ring (4,096 slots of 10 ms)
			case 1:
				due = now - rng.Int64N(100) // already due: a restart's replay
			}
			if err := s.Add(due, seq, sid, queueOf(sid), nil, log.put(1, payloadOf(sid))); err != nil {
				t.Fatal(err)
			}
			live[sid] = due
		}
		for id, due := range live {
			if rng.IntN(40) != 0 {
				break
			}
			if rng.IntN(2) == 0 {
				if !s.Remove(id) {
					t.Fatalf("Remove(%d) found nothing", id)
				}
				delete(live, id)
			} else {
				seq++
				due = due + rng.Int64N(1000) - 500
				if err := s.Move(id, due, seq, nil); err != nil {
					t.Fatal(err)
				}
				live[id] = due
			}
		}
		now += rng.Int64N(25)
		if step%500 == 499 {
			now += 300_000 // a pause: the ring passes many slots at once
		}
		until, max := now+20, 1+rng.IntN(60)
		got := load(t, s, until, max)
		if len(got) > max {
			t.Fatalf("a round of at most %d took %d", max, len(got))
		}
		for _, j := range got {
			d, ok := live[j.SID]
			if !ok || d != j.Due || j.Due > until {
				t.Fatalf("round at %d took job %d due %d (live %v, due %d)", until, j.SID, j.Due, ok, d)
			}
			delete(live, j.SID)
		}
		if len(got) < max {
			for id, due := range live {
				if due <= until {
					t.Fatalf("step %d: round at %d took %d of at most %d and left job %d due %d", step, until, len(got), max, id, due)
				}
			}
		}
	}
	if s.Len() != int64(len(live)) {
		t.Fatalf("Len %d, model %d", s.Len(), len(live))
	}
}

// A round's work is the jobs due and the slot it ends in, not the bucket:
// 200,000 jobs spread over 30 days, rounds every 250 ms (a 1 s horizon)
// for 100 s look at each job due a few times, not at 200,000 a round.
func TestCalendarRoundIsOfJobsDue(t *testing.T) {
	log := newFakeLog()
	s, err := Open(Options{FS: aof.NewMemFS(), Path: testPath, Log: log, Grain: 125})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 200_000
	var now int64 = 1_800_000_000_000
	loc := log.put(1, []byte("p"))
	due := map[uint64]int64{}
	for sid := uint64(1); sid <= n; sid++ {
		d := now + 1000 + rng.Int64N(30*24*3600*1000)
		if sid%10 == 0 {
			d = now + 1000 + rng.Int64N(100_000) // a tenth due within the 100 s
		}
		due[sid] = d
		if err := s.Add(d, sid, sid, "q", nil, loc); err != nil {
			t.Fatal(err)
		}
	}
	b := s.b[s.open]
	taken := 0
	for r := range 400 {
		now += 250
		got := load(t, s, now+500, 1<<20)
		for _, j := range got {
			if j.Due > now+500 {
				t.Fatalf("job %d due %d taken at %d", j.SID, j.Due, now+500)
			}
		}
		taken += len(got)
		if r == 0 {
			b.cal.visits = 0 // the first round spreads the bucket into its ring
		}
	}
	want := 0
	for _, d := range due {
		if d <= now+500 {
			want++
		}
	}
	if taken != want {
		t.Fatalf("rounds took %d jobs, %d were due", taken, want)
	}
	if b.cal.visits > 4*want { // 2.5 a job due here; a scan a round would be 80M

		t.Fatalf("399 rounds looked at %d entries to take %d (a bucket of %d)", b.cal.visits, want, n)
	}
}

// The jobs loads take from a bucket while it is written as a run are the
// head of the run's sorted order; installing the run moves its cursor past
// them, so that the next round does not read them again.
func TestInstallSkipsWhatLoadsTook(t *testing.T) {
	log := newFakeLog()
	fs := aof.NewMemFS()
	s, err := Open(Options{FS: fs, Path: testPath, Log: log, Grain: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	for sid := uint64(1); sid <= 1000; sid++ {
		if err := s.Add(1000+rng.Int64N(1000), sid, sid, "q", nil, log.put(1, payloadOf(sid))); err != nil {
			t.Fatal(err)
		}
	}
	cp := s.Checkpoint(Pos{Seg: 1})
	fz := cp.Frozen()[0]
	r, err := s.WriteFrozen(fz, nil)
	if err != nil {
		t.Fatal(err)
	}
	took := len(load(t, s, 1500, 1<<20)) // a load between the write and the install
	s.Install(fz, r)
	if b := s.b[fz.slot]; b.cursor != took || took < 400 {
		t.Fatalf("the run's cursor is %d after loads took its first %d jobs", b.cursor, took)
	}
	if got := load(t, s, 1500, 1<<20); len(got) != 0 {
		t.Fatalf("a round after the install took %d jobs, all taken before", len(got))
	}
	if got := len(load(t, s, 3000, 1<<20)); took+got != 1000 {
		t.Fatalf("loads took %d then %d of 1,000 jobs", took, got)
	}
}
