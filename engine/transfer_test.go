package engine

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
)

// scanAll pages through a queue with ScanJobs, calling between after each
// page, and returns every job listed, in order.
func scanAll(t *testing.T, e *Engine, q string, count int, between func()) []ScanJob {
	t.Helper()
	var all []ScanJob
	cursor := uint64(0)
	for pages := 0; ; pages++ {
		if pages > 100000 {
			t.Fatal("the scan does not end")
		}
		next, page, _ := e.ScanJobs(b(q), cursor, count)
		if len(page) > count {
			t.Fatalf("a page of %d jobs for count %d", len(page), count)
		}
		all = append(all, page...)
		if next == 0 {
			return all
		}
		if next <= cursor {
			t.Fatalf("the cursor went from %d to %d", cursor, next)
		}
		cursor = next
		between()
	}
}

// A queue with jobs in every state scans whole, each job that stays for the
// whole scan exactly once, while jobs of it are added and cancelled and
// other queues' jobs come and go between pages.
func TestScanJobsEveryJobOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		rng := rand.New(rand.NewPCG(5, 6))
		stay := map[string]string{} // id -> state
		for i := range 2000 {
			id := fmt.Sprint("j", i)
			addOpts(t, e, AddArgs{Queue: b("q"), ID: b(id), Payload: b("p"), Delay: int64(rng.IntN(3)) * 1000, AckTimeout: 5000, Retry: -1})
			addOpts(t, e, AddArgs{Queue: b("other"), Payload: b("o"), Delay: 1000, AckTimeout: -1, Retry: -1})
		}
		for range 300 { // reserve some of the ready ones
			d := mustPop(t, e, "q")
			stay[string(d.ID)] = "reserved"
		}
		for i := range 2000 {
			id := fmt.Sprint("j", i)
			switch {
			case i%7 == 0: // may be cancelled below
				delete(stay, id)
			case stay[id] == "":
				stay[id] = state(e, "q", id)
			}
		}
		n := 0
		got := scanAll(t, e, "q", 37, func() {
			for range 3 {
				n++
				addOpts(t, e, AddArgs{Queue: b("q"), ID: b(fmt.Sprint("new", n)), Payload: b("p"), Delay: 500, AckTimeout: -1, Retry: -1})
				e.Cancel(b("q"), [][]byte{b(fmt.Sprint("j", 7*rng.IntN(2000/7)))})
				add(t, e, "other", 100, "o")
			}
			e.Cancel(b("other"), [][]byte{b(add(t, e, "other", 100, "o"))})
		})
		seen := map[string]int{}
		for _, j := range got {
			seen[string(j.ID)]++
			if string(j.Queue) != "q" {
				t.Fatalf("a job of %q in q's scan", j.Queue)
			}
		}
		for id, st := range stay {
			if seen[id] != 1 {
				t.Errorf("%s (%s) listed %d times", id, st, seen[id])
			}
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("%s listed %d times", id, k)
			}
		}
		for _, j := range got {
			if st := stay[string(j.ID)]; st != "" && j.State != st {
				t.Errorf("%s listed %s, is %s", j.ID, j.State, st)
			}
			if j.State == "reserved" && (j.AckDeadline != e.Now()+5000 || j.Deliveries != 1) {
				t.Errorf("%s reserved: deadline %d (now %d), deliveries %d", j.ID, j.AckDeadline, e.Now(), j.Deliveries)
			}
		}
	})
}

// A page visits a bounded number of slots: a queue's only job behind many
// of another queue's comes after pages that are empty but move the cursor,
// never after a walk of the whole slab under the lock.
func TestScanJobsBoundedWalk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for range 3 * jobs.ScanMinVisit {
			add(t, e, "big", 1000, "x")
		}
		add(t, e, "small", 1000, "x")
		next, page, _ := e.ScanJobs(b("small"), 0, 1)
		if len(page) != 0 || next != jobs.ScanMinVisit {
			t.Fatalf("first page: %d jobs, next %d; want none, next %d", len(page), next, jobs.ScanMinVisit)
		}
		if got := scanAll(t, e, "small", 1, func() {}); len(got) != 1 {
			t.Fatalf("the whole scan found %d jobs", len(got))
		}
		if next, page, _ := e.ScanJobs(b("none"), 0, 10); next != 0 || page != nil {
			t.Fatalf("a queue that does not exist: %d %v", next, page)
		}
	})
}

// importAll writes every scanned job into e as `delayd import` would: a
// reservation becomes a delayed job due at its ack deadline.
// Ready jobs go in the order they were made ready, (due, add order), as
// the exporter writes them.
func importAll(t *testing.T, e *Engine, all []ScanJob) (added int) {
	t.Helper()
	all = slices.Clone(all)
	slices.SortStableFunc(all, func(x, y ScanJob) int { return cmp.Or(cmp.Compare(x.Due, y.Due), cmp.Compare(x.Seq, y.Seq)) })
	for _, j := range all {
		a := ImportArgs{Queue: j.Queue, ID: j.ID, Payload: j.Payload, Due: j.Due, Deliveries: j.Deliveries,
			AckTimeout: j.AckTimeout, Retry: j.Retry, DeadLetter: j.DeadLetter, Group: j.Group, Priority: j.Priority,
			Reason: []byte(j.Reason)}
		if j.State == "reserved" {
			a.Due = j.AckDeadline
		}
		if j.Origin != nil {
			o := j.OriginOpts
			o.Queue = j.Origin
			a.Origin = &o
		}
		ok, _, err := e.Import(a)
		if err != nil {
			t.Fatalf("import %s: %v", j.ID, err)
		}
		if ok {
			added++
		}
	}
	return added
}

// Jobs scanned from one engine and imported into another are the same jobs
// (id, payload, due, deliveries, options, group, priority, origin, failure
// reason), ready ones in the same order; the copy replays from its log as
// it was; importing again adds nothing.
func TestImportCopiesScannedJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newEngine(t, Options{})
		for i := range 20 {
			addOpts(t, src, AddArgs{Queue: b("q"), Payload: b(fmt.Sprint("ready", i)), AckTimeout: 60_000, Retry: -1,
				Group: b(fmt.Sprint("g", i%3)), Priority: uint8(i % 2)})
		}
		addOpts(t, src, AddArgs{Queue: b("q"), ID: b("late"), Payload: []byte{0xff, 0, 0xfe}, Delay: 60_000, AckTimeout: 0, Retry: 3, DeadLetter: b("dlq")})
		addOpts(t, src, AddArgs{Queue: b("q"), Payload: b("sid"), Delay: 30_000, AckTimeout: -1, Retry: -1})
		addOpts(t, src, AddArgs{Queue: b("w"), ID: b("dead"), Payload: b("d"), AckTimeout: 100, Retry: 0, DeadLetter: b("q")})
		mustPop(t, src, "q") // reserved
		mustPop(t, src, "w")
		nackReason(t, src, "w", "dead", 0, "boom") // no retry left: to q, its origin w
		if j, ok := src.Get(b("q"), b("dead")); !ok || string(j.Origin) != "w" || j.Reason != "boom" {
			t.Fatalf("the dead letter: %+v %v", j, ok)
		}
		all := scanAll(t, src, "q", 5, func() {})
		if len(all) != 23 {
			t.Fatalf("scanned %d jobs", len(all))
		}

		fs := aof.NewMemFS()
		dst := mustNew(t, logged(fs, FsyncAlways))
		sleep(time.Second) // the copy is made later: due times stay as they were
		if n := importAll(t, dst, all); n != len(all) {
			t.Fatalf("imported %d of %d", n, len(all))
		}
		if n := importAll(t, dst, all); n != 0 {
			t.Fatalf("imported %d again", n)
		}
		want := func(j ScanJob) ScanJob {
			j.Seq = 0
			if j.State == "reserved" { // delayed until its deadline, deliveries kept
				j.State, j.Due, j.AckDeadline = "delayed", j.AckDeadline, 0
			}
			if j.State == "delayed" && j.Due <= dst.Now() {
				j.State = "ready"
			}
			return j
		}
		check := func(what string, e *Engine) {
			t.Helper()
			got := map[string]ScanJob{}
			for _, j := range scanAll(t, e, "q", 1000, func() {}) {
				j.Seq = 0
				got[string(j.ID)] = j
			}
			for _, j := range all {
				if g, w := fmt.Sprintf("%+v", got[string(j.ID)]), fmt.Sprintf("%+v", want(j)); g != w {
					t.Errorf("%s: %s\n got %s\nwant %s", what, j.ID, g, w)
				}
			}
			if !slices.EqualFunc(drainOrder(src, "q"), drainOrder(e, "q"), func(a, b string) bool { return a == b }) {
				t.Errorf("%s: the ready order differs:\n%v\n%v", what, drainOrder(src, "q"), drainOrder(e, "q"))
			}
		}
		check("imported", dst)
		// A server-made id keeps its compact form, and the copy's own ids
		// never take one of the imported.
		for _, j := range all {
			if _, ok := jobs.ParseSID(j.ID); ok {
				if added, _, _ := dst.Import(ImportArgs{Queue: b("q"), ID: j.ID, Payload: b("x"), AckTimeout: -1, Retry: -1}); added {
					t.Fatalf("%s imported twice", j.ID)
				}
			}
		}
		if fresh := add(t, dst, "q", 1000, "fresh"); slices.ContainsFunc(all, func(j ScanJob) bool { return string(j.ID) == fresh }) {
			t.Fatalf("a new add took the imported id %s", fresh)
		}
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
		check("replayed", newEngine(t, logged(fs, FsyncAlways)))
	})
}

// Imported on a cluster's leader, the jobs are the same on its follower
// and in a snapshot restored elsewhere: an import is an add record.
func TestImportFollowerAndSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newEngine(t, Options{})
		addOpts(t, src, AddArgs{Queue: b("q"), ID: b("a"), Payload: b("p"), AckTimeout: 60_000, Retry: 2, Group: b("g")})
		addOpts(t, src, AddArgs{Queue: b("q"), Payload: b("sid"), Delay: 5000, AckTimeout: -1, Retry: -1, DeadLetter: b("dlq")})
		addOpts(t, src, AddArgs{Queue: b("w"), ID: b("d"), Payload: b("d"), AckTimeout: 100, Retry: 0, DeadLetter: b("q")})
		mustPop(t, src, "w")
		nackReason(t, src, "w", "d", 0, "boom")
		mustPop(t, src, "q")
		all := scanAll(t, src, "q", 10, func() {})

		g := newGroup(t, 2, Options{}, nil)
		ln := g.nodes[0]
		if n := importAll(t, ln.e, all); n != 3 {
			t.Fatalf("imported %d of 3", n)
		}
		g.sync(ln) // the follower holds the leader's state, or it fails
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(bytes.NewReader(ln.e.Snapshot())); err != nil {
			t.Fatal(err)
		}
		if replDump(x) != replDump(ln.e) {
			t.Fatalf("the restored state differs:\n%s", diffLines(replDump(ln.e), replDump(x)))
		}
		if j, ok := x.Get(b("q"), b("d")); !ok || string(j.Origin) != "w" || j.Reason != "boom" || j.Deliveries != 1 {
			t.Fatalf("the dead letter on a restored copy: %+v %v", j, ok)
		}
	})
}

// drainOrder is the order a queue's ready jobs would be handed out in,
// read without taking them (DELAY.PEEK).
func drainOrder(e *Engine, q string) []string {
	var out []string
	for _, p := range e.Peek(b(q), 1000) {
		out = append(out, string(p.Payload))
	}
	return out
}
