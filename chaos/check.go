package chaos

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// CheckOptions tune Check. The zero value is the strict default.
type CheckOptions struct {
	// ClockTolerance is how far the server's clock may read behind the
	// history's (default 1 ms, the most a server that keeps unix
	// milliseconds, from a wall offset read once at start, can round
	// down). Both run on the same machine and read the same clock; nothing
	// else is forgiven. Negative means 0.
	ClockTolerance time.Duration

	// StoppedMoves are the slot moves the run stopped between the target
	// group's commit of a queue and the source's drop of it, and that
	// redis-cli --cluster fix finished (docs/decisions/slot-moves.md).
	// Meanwhile both groups held the queue, and the group that did not end
	// as its owner went on serving it: what that group removed or changed
	// (an ack, a cancel, a pop) is undone by the copy the fix keeps, and the
	// job comes back, as if added again at one instant of the move. Each
	// job may come back once per stopped move, and then live its life
	// again (a nack, a redelivery) judged as any job's; Report.Comebacks
	// counts them. Nothing else is excused: a comeback is never a loss,
	// and a job of a queue no stopped move names is judged as before.
	StoppedMoves []StoppedMove
}

// StoppedMove is a move of slots left open by a crash and finished by
// redis-cli --cluster fix.
type StoppedMove struct {
	// Queues are the queues of the slots the crash left open (CLUSTER
	// NODES' [slot->-id] markers before the fix).
	Queues []string
	// From and To are history times: the move began (the target's commit
	// can come any time after) and the fix returned (one copy is left).
	From, To int64
}

func (o CheckOptions) tolerance() int64 {
	switch {
	case o.ClockTolerance < 0:
		return 0
	case o.ClockTolerance == 0:
		return int64(time.Millisecond)
	}
	return int64(o.ClockTolerance)
}

// Rule names the property a violation breaks.
type Rule string

const (
	// RuleLost: an add that was acknowledged (OK) was never delivered,
	// and no cancel can have removed it.
	RuleLost Rule = "lost"
	// RuleEarly: a job was handed out before its due time.
	RuleEarly Rule = "early"
	// RuleDoubleReserved: a job was handed out while an earlier delivery
	// of it still held it: inside the earlier reservation (before its
	// deadline, neither acked nor nacked meanwhile), or at all after an
	// at-most-once pop (ack timeout 0) removed it.
	RuleDoubleReserved Rule = "double-reserved"
	// RuleAfterCancel: a job was handed out after a cancel of it returned 1.
	RuleAfterCancel Rule = "delivered-after-cancel"
	// RuleAfterAck: a job was handed out after an ack of it returned 1.
	RuleAfterAck Rule = "delivered-after-ack"
	// RulePhantom: a delivery that no add can explain: a job never added,
	// or only by adds that failed, or a payload that is not the one added.
	RulePhantom Rule = "phantom"
)

// Violation is one broken property, with the operations that prove it.
type Violation struct {
	Rule  Rule
	Queue string
	Job   string
	Why   string
	Ops   []Op
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: job %q of queue %q: %s", v.Rule, v.Job, v.Queue, v.Why)
	for _, op := range v.Ops {
		fmt.Fprintf(&b, "\n\t%s", op)
	}
	return b.String()
}

// Report is the result of Check.
type Report struct {
	Violations []Violation

	Jobs         int // distinct jobs with an add that may have run (OK or Unknown)
	Required     int // jobs with an OK add: each must be delivered
	Excused      int // required jobs not delivered that a cancel or an unseen pop may have removed
	Delivered    int // distinct jobs delivered
	Deliveries   int // pops that returned a job
	Redeliveries int // deliveries after a job's first
	Comebacks    int // jobs that came back after a stopped move (CheckOptions.StoppedMoves), counted once per move

	// Outcomes counts operations by kind and outcome, for the run's log.
	Outcomes map[Kind]map[Outcome]int
}

// OK reports whether the history broke nothing.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Summary is one line of counts.
func (r Report) Summary() string {
	var kinds []string
	for k := KindAdd; k <= KindCancel; k++ {
		if m := r.Outcomes[k]; len(m) > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d/%d/%d", k, m[OK], m[Fail], m[Unknown]))
		}
	}
	comebacks := ""
	if r.Comebacks > 0 {
		comebacks = fmt.Sprintf(", %d comebacks after stopped moves", r.Comebacks)
	}
	return fmt.Sprintf("%d jobs (%d acknowledged, %d excused by a cancel or an unseen pop), %d delivered, "+
		"%d deliveries (%d redeliveries%s); ops ok/fail/unknown: %s; %d violations",
		r.Jobs, r.Required, r.Excused, r.Delivered, r.Deliveries, r.Redeliveries, comebacks,
		strings.Join(kinds, ", "), len(r.Violations))
}

// String is the summary and up to 20 violations.
func (r Report) String() string {
	var b strings.Builder
	b.WriteString(r.Summary())
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "\n... and %d more", len(r.Violations)-i)
			break
		}
		b.WriteString("\n")
		b.WriteString(v.String())
	}
	return b.String()
}

type jobKey struct{ queue, job string }

// jobOps are one job's operations, each list in history order.
type jobOps struct {
	adds       []Op // OK or Unknown: may have run
	failedAdds []Op
	deliveries []Op // OK pops that returned the job
	cancels    []Op // OK or Unknown
	ends       []Op // acks and nacks, OK or Unknown
}

// Check judges a complete history against the delivery guarantees of a
// delay queue. start is History.Start(): the wall-clock time of the
// history's zero. The history must be complete: every client has stopped,
// and the run waited until every job that was due had been drained (no
// job delayed, ready or reserved anywhere), or RuleLost reports jobs that
// were merely not yet delivered.
//
// Each rule reports only what the recorded times prove whatever the
// server's real timing was; see the package documentation for each rule's
// argument. An operation's effect happened inside [Invoke, Return] if it
// is OK, at any time after Invoke (or never) if it is Unknown, and never
// if it is Fail.
//
// Cost: O(n log n) for n operations, plus O(k²) for a job delivered k times.
func Check(start int64, ops []Op, opts CheckOptions) Report {
	tol := opts.tolerance()
	r := Report{Outcomes: make(map[Kind]map[Outcome]int)}
	jobs := make(map[jobKey]*jobOps)
	get := func(q, j string) *jobOps {
		k := jobKey{q, j}
		if jobs[k] == nil {
			jobs[k] = &jobOps{}
		}
		return jobs[k]
	}
	unseenPop := make(map[string]bool) // queues where a pop may have taken a job no one saw
	moves := make(map[string][]StoppedMove)
	for _, m := range opts.StoppedMoves {
		for _, q := range m.Queues {
			moves[q] = append(moves[q], m)
		}
	}

	for _, op := range ops {
		if r.Outcomes[op.Kind] == nil {
			r.Outcomes[op.Kind] = make(map[Outcome]int)
		}
		r.Outcomes[op.Kind][op.Outcome]++
		switch op.Kind {
		case KindAdd:
			if op.Outcome == Fail {
				get(op.Queue, op.Job).failedAdds = append(get(op.Queue, op.Job).failedAdds, op)
			} else {
				get(op.Queue, op.Job).adds = append(get(op.Queue, op.Job).adds, op)
			}
		case KindPop:
			switch {
			case op.Outcome == Unknown:
				unseenPop[op.Queue] = true
			case op.Outcome == OK && op.Count > 0:
				get(op.Queue, op.Job).deliveries = append(get(op.Queue, op.Job).deliveries, op)
			}
		case KindCancel:
			if op.Outcome != Fail {
				get(op.Queue, op.Job).cancels = append(get(op.Queue, op.Job).cancels, op)
			}
		case KindAck, KindNack:
			if op.Outcome != Fail {
				get(op.Queue, op.Job).ends = append(get(op.Queue, op.Job).ends, op)
			}
		}
	}

	keys := make([]jobKey, 0, len(jobs))
	for k := range jobs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].queue != keys[j].queue {
			return keys[i].queue < keys[j].queue
		}
		return keys[i].job < keys[j].job
	})

	for _, k := range keys {
		j := jobs[k]
		if len(j.adds) > 0 {
			r.Jobs++
		}
		if len(j.deliveries) > 0 {
			r.Delivered++
			r.Deliveries += len(j.deliveries)
			r.Redeliveries += len(j.deliveries) - 1
		}
		c := jobCheck{k: k, j: j, start: start, tol: tol, r: &r, moves: moves[k.queue]}
		c.lost(unseenPop[k.queue])
		c.phantomAndEarly()
		c.doubleReserved()
		c.afterEnd(KindCancel, j.cancels, RuleAfterCancel)
		c.afterEnd(KindAck, j.ends, RuleAfterAck)
	}
	return r
}

// jobCheck applies the rules to one job.
type jobCheck struct {
	k     jobKey
	j     *jobOps
	start int64 // wall ns of history time 0
	tol   int64 // ns
	r     *Report

	moves []StoppedMove
	readd [][2]int64 // per move, when its one comeback of this job can have happened (history time)
}

// comeback reports whether a stopped move can explain a delivery that
// looks like a second life of the job: the fix brought the job back from
// the other group's copy, which is as if it had been added again at one
// instant T of the move's [From, To], after from and before to (the op the
// delivery seems to break, and the delivery). The copy was taken after the
// move began and before that op took effect, so the op must be able to
// have taken effect after From (done, its latest time): an ack before the
// move began is never undone by it. One T must explain every
// delivery a move excuses for the job, so each job comes back at most once
// per move; what happens to it after that (a nack, a redelivery after its
// deadline) is judged as any job's. The first pair that no common T
// explains is reported (which one of several is arbitrary; that one is,
// is not).
func (c *jobCheck) comeback(from, done, to int64) bool {
	if len(c.moves) == 0 {
		return false
	}
	if c.readd == nil {
		c.readd = make([][2]int64, len(c.moves))
		for i, m := range c.moves {
			c.readd[i] = [2]int64{m.From, m.To}
		}
	}
	for i, m := range c.moves {
		lo, hi := max(c.readd[i][0], from), min(c.readd[i][1], to)
		if done <= m.From || lo >= hi {
			continue
		}
		if c.readd[i] == [2]int64{c.moves[i].From, c.moves[i].To} {
			c.r.Comebacks++
		}
		c.readd[i] = [2]int64{lo, hi}
		return true
	}
	return false
}

func (c *jobCheck) report(rule Rule, why string, ops ...Op) {
	c.r.Violations = append(c.r.Violations, Violation{Rule: rule, Queue: c.k.queue, Job: c.k.job, Why: why, Ops: ops})
}

// wall is an operation time as unix ns.
func (c *jobCheck) wall(t int64) int64 { return c.start + t }

// latest is when op's effect happened at the latest: its return if OK,
// never bounded if Unknown.
func latest(op Op) int64 {
	if op.Outcome == OK {
		return op.Return
	}
	return math.MaxInt64
}

// removes reports whether op may have removed the job: an OK reply of 1
// (or more), or an Unknown outcome. An OK 0 removed nothing.
func removes(op Op) bool { return op.Outcome == Unknown || (op.Outcome == OK && op.Count > 0) }

// mayHappenIn reports whether op's effect can lie strictly inside the
// interval (from, to) of history time: after from, before to.
func mayHappenIn(op Op, from, to int64) bool { return op.Invoke < to && latest(op) > from }

// readdPossible reports whether the job can have been added again between
// from and to: a second add of its id, after the first made it. Workload
// ids are added once, so this excuses nothing there; it keeps the rules
// sound for histories that retry adds.
func (c *jobCheck) readdPossible(from, to int64) bool {
	if len(c.j.adds) < 2 {
		return false
	}
	for _, a := range c.j.adds {
		if mayHappenIn(a, from, to) {
			return true
		}
	}
	return false
}

// lost: (a) an OK add must be delivered at least once. Excused when a
// cancel may have removed it (OK with 1, or Unknown: a cancel's effect
// can land before the job's first pop), and for an at-most-once job
// (ack timeout 0) when a pop of its queue had an unknown outcome: that pop
// may have taken it, and nobody saw the reply.
func (c *jobCheck) lost(unseenPop bool) {
	var ok []Op
	for _, a := range c.j.adds {
		if a.Outcome == OK {
			ok = append(ok, a)
		}
	}
	if len(ok) == 0 {
		return
	}
	c.r.Required++
	if len(c.j.deliveries) > 0 {
		return
	}
	for _, cn := range c.j.cancels {
		if removes(cn) {
			c.r.Excused++
			return
		}
	}
	if unseenPop {
		for _, a := range c.j.adds {
			if a.AckTimeout == 0 {
				c.r.Excused++
				return
			}
		}
	}
	c.report(RuleLost, "acknowledged add never delivered (and no cancel may have removed it)",
		append(ok, c.j.cancels...)...)
}

// phantomAndEarly: every delivery is of a job an add may have made, with
// that add's payload; and (b) it left the server no earlier than its due
// time. The payload's due time is a lower bound of the real one (see
// Op.Due); the delivery happened on the server before the client's Return,
// so Return < due, minus the clock tolerance, proves it early.
func (c *jobCheck) phantomAndEarly() {
	for _, d := range c.j.deliveries {
		switch {
		case len(c.j.adds) == 0 && len(c.j.failedAdds) > 0:
			c.report(RulePhantom, "delivered, but its only adds failed (a Fail must mean no effect)",
				append(append([]Op(nil), c.j.failedAdds...), d)...)
			continue
		case len(c.j.adds) == 0:
			c.report(RulePhantom, "delivered, but never added", d)
			continue
		}
		match := false
		for _, a := range c.j.adds {
			match = match || a.Payload == d.Payload
		}
		if !match {
			c.report(RulePhantom, "delivered with a payload no add of it sent", append([]Op{d}, c.j.adds...)...)
			continue
		}
		if due := d.Due * int64(time.Millisecond); c.wall(d.Return) < due-c.tol {
			c.report(RuleEarly, fmt.Sprintf("handed out %v before its due time %d (reply at unix ns %d)",
				time.Duration(due-c.wall(d.Return)), d.Due, c.wall(d.Return)), d)
		}
	}
}

// deadlineFloor is the earliest absolute deadline (unix ns) the server can
// have given the reservation that delivery d made: the server took the
// job at some time >= d.Invoke, in whole ms (which may read up to the
// tolerance behind), plus the ack timeout.
func (c *jobCheck) deadlineFloor(d Op) int64 {
	ms := int64(time.Millisecond)
	inv := c.wall(d.Invoke)
	return (inv - inv%ms) - c.tol + d.AckTimeout*ms
}

// inside reports whether delivery b certainly happened while delivery a's
// reservation held the job (had a been first): b's reply came before a's
// deadline could have passed. An at-most-once pop (ack timeout 0) holds
// the job forever: it removed it.
func (c *jobCheck) inside(b, a Op) bool {
	if a.AckTimeout == 0 {
		return true
	}
	return c.wall(b.Return) < c.deadlineFloor(a)
}

// doubleReserved: (c) no job with two workers at once. For deliveries d1
// and d2 of one job (d1 invoked first) it is a violation when
//   - d2 is certainly inside d1's reservation: d2's reply came before
//     the earliest deadline d1 can have had;
//   - if the two pops overlap in time (so either may have run first), d1
//     is also certainly inside d2's reservation;
//   - no ack or nack of the job (OK with 1, or Unknown) can lie between
//     them, which would have ended the first reservation early;
//   - and the job cannot have been added again in between.
func (c *jobCheck) doubleReserved() {
	ds := append([]Op(nil), c.j.deliveries...)
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Invoke < ds[j].Invoke })
	for i := 1; i < len(ds); i++ {
		d2 := ds[i]
		for _, d1 := range ds[:i] {
			if !c.inside(d2, d1) {
				continue
			}
			if d2.Invoke <= d1.Return && !c.inside(d1, d2) {
				continue
			}
			from, to := d1.Invoke, max(d1.Return, d2.Return)
			ended := false
			for _, e := range c.j.ends {
				if removes(e) && mayHappenIn(e, from, to) {
					ended = true
					break
				}
			}
			if ended || c.readdPossible(from, to) || c.comeback(from, d1.Return, to) {
				continue
			}
			why := fmt.Sprintf("handed out again while an earlier delivery held it (ack timeout %d ms, earliest deadline unix ns %d)",
				d1.AckTimeout, c.deadlineFloor(d1))
			if d1.AckTimeout == 0 {
				why = "handed out again after an at-most-once pop (ack timeout 0) removed it"
			}
			c.report(RuleDoubleReserved, why, d1, d2)
			break
		}
	}
}

// afterEnd: (d) no delivery after a cancel of the job returned 1, and no
// delivery after an ack of it returned 1 (both delete the job). "After"
// is certain: the pop was sent after that reply came back. A pop that
// overlaps the cancel may have run first and is not judged.
func (c *jobCheck) afterEnd(kind Kind, ends []Op, rule Rule) {
	for _, e := range ends {
		if e.Kind != kind || e.Outcome != OK || e.Count < 1 {
			continue
		}
		for _, d := range c.j.deliveries {
			if d.Invoke > e.Return && !c.readdPossible(e.Invoke, d.Return) && !c.comeback(e.Invoke, latest(e), d.Return) {
				c.report(rule, fmt.Sprintf("handed out after %s returned %d", kind, e.Count), e, d)
			}
		}
	}
}
