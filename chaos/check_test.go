package chaos

import (
	"strings"
	"testing"
	"time"
)

// Hand-written histories: the history's zero is the unix epoch (start 0),
// so an op's times are unix ns and due times in ms read directly.

const ms = int64(time.Millisecond)

type hist struct{ ops []Op }

func (h *hist) rec(op Op) *hist {
	op.Index = len(h.ops)
	h.ops = append(h.ops, op)
	return h
}

func payloadOf(job string, due, ack int64) string {
	return EncodePayload(Payload{UID: job, Due: due, AckTimeout: ack})
}

// add records an add of job to "q" invoked at inv ms, answered at ret ms,
// due at due ms, with ack timeout ack ms.
func (h *hist) add(job string, inv, ret, due, ack int64, out Outcome) *hist {
	return h.rec(Op{Kind: KindAdd, Queue: "q", Job: job, Payload: payloadOf(job, due, ack), Due: due,
		AckTimeout: ack, Invoke: inv * ms, Return: ret * ms, Outcome: out})
}

// pop records a pop of "q" that returned job ("" = null) with the add's payload.
func (h *hist) pop(client int, job string, inv, ret, due, ack int64, out Outcome) *hist {
	op := Op{Client: client, Kind: KindPop, Queue: "q", Job: job, Invoke: inv * ms, Return: ret * ms, Outcome: out}
	if job != "" && out == OK {
		op.Payload, op.Due, op.AckTimeout, op.Count = payloadOf(job, due, ack), due, ack, 1
	}
	return h.rec(op)
}

func (h *hist) cmd(kind Kind, job string, inv, ret, count int64, out Outcome) *hist {
	return h.rec(Op{Kind: kind, Queue: "q", Job: job, Count: count, Invoke: inv * ms, Return: ret * ms, Outcome: out})
}

func (h *hist) check() Report { return Check(0, h.ops, CheckOptions{}) }

// expectRules asserts the exact multiset of rules broken.
func expectRules(t *testing.T, r Report, want ...Rule) {
	t.Helper()
	var got []string
	for _, v := range r.Violations {
		got = append(got, string(v.Rule))
	}
	var w []string
	for _, x := range want {
		w = append(w, string(x))
	}
	if strings.Join(got, ",") != strings.Join(w, ",") {
		t.Fatalf("violations %v, want %v\n%s", got, w, r)
	}
}

func TestCheckCleanHistories(t *testing.T) {
	cases := map[string]*hist{
		"add, pop when due, ack": new(hist).
			add("j1", 1000, 1002, 2000, 5000, OK).
			pop(1, "j1", 1990, 2001, 2000, 5000, OK).
			cmd(KindAck, "j1", 2005, 2006, 1, OK),
		// The server may take the job at its due ms and the reply come
		// back within that ms; the clock tolerance forgives 1 ms.
		"reply within the tolerance of due": new(hist).
			add("j1", 1000, 1002, 2000, 5000, OK).
			pop(1, "j1", 1900, 1999, 2000, 5000, OK),
		"redelivery after the deadline": new(hist).
			add("j1", 1000, 1001, 1000, 5000, OK).
			pop(1, "j1", 1000, 1010, 1000, 5000, OK). // deadline >= 6000 - 1 ms
			pop(2, "j1", 5990, 6000, 1000, 5000, OK), // may be at 5999.x: not proof
		"redelivery after a nack": new(hist).
			add("j1", 1000, 1001, 1000, 5000, OK).
			pop(1, "j1", 1000, 1010, 1000, 5000, OK).
			cmd(KindNack, "j1", 1020, 1021, 1, OK).
			pop(2, "j1", 1030, 1040, 1000, 5000, OK),
		"redelivery after an unknown ack that may have run": new(hist).
			add("j1", 1000, 1001, 1000, 5000, OK).
			pop(1, "j1", 1000, 1010, 1000, 5000, OK).
			cmd(KindAck, "j1", 1020, 3000, 0, Unknown).
			pop(2, "j1", 1030, 1040, 1000, 5000, OK),
		"cancelled before delivery": new(hist).
			add("j1", 1000, 1001, 3000, 5000, OK).
			cmd(KindCancel, "j1", 1500, 1501, 1, OK),
		"unknown cancel may have removed it": new(hist).
			add("j1", 1000, 1001, 3000, 5000, OK).
			cmd(KindCancel, "j1", 1500, 9000, 0, Unknown),
		"unknown add need not be delivered": new(hist).
			add("j1", 1000, 9000, 3000, 5000, Unknown),
		"unknown add may be delivered": new(hist).
			add("j1", 1000, 9000, 3000, 5000, Unknown).
			pop(1, "j1", 4000, 4001, 3000, 5000, OK),
		"at-most-once job taken by a pop nobody saw": new(hist).
			add("f1", 1000, 1001, 1000, 0, OK).
			pop(1, "", 1100, 9000, 0, 0, Unknown),
		"pop overlapping a cancel may have run first": new(hist).
			add("j1", 1000, 1001, 1000, 5000, OK).
			cmd(KindCancel, "j1", 2000, 2010, 1, OK).
			pop(1, "j1", 2005, 2030, 1000, 5000, OK),
		"failed ops have no effect": new(hist).
			add("j1", 1000, 1001, 1000, 5000, OK).
			cmd(KindCancel, "j1", 1002, 1003, 0, Fail).
			pop(1, "j1", 1004, 1005, 1000, 5000, OK).
			cmd(KindAck, "j1", 1006, 1007, 0, Fail).
			pop(2, "j1", 7000, 7001, 1000, 5000, OK),
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			r := h.check()
			expectRules(t, r)
			if !r.OK() {
				t.Fatal("OK() false with no violations")
			}
		})
	}
}

func TestCheckLost(t *testing.T) {
	expectRules(t, new(hist).add("j1", 1000, 1001, 2000, 5000, OK).check(), RuleLost)
	// A cancel that found nothing (0) does not excuse it.
	expectRules(t, new(hist).
		add("j1", 1000, 1001, 2000, 5000, OK).
		cmd(KindCancel, "j1", 900, 950, 0, OK).check(), RuleLost)
	// An unseen pop excuses only at-most-once jobs: an at-least-once job
	// it took comes back when its reservation expires.
	expectRules(t, new(hist).
		add("j1", 1000, 1001, 1000, 5000, OK).
		pop(1, "", 1100, 9000, 0, 0, Unknown).check(), RuleLost)
	// An unseen pop of another queue excuses nothing.
	h := new(hist).add("f1", 1000, 1001, 1000, 0, OK)
	h.rec(Op{Kind: KindPop, Queue: "other", Invoke: 1100 * ms, Return: 9000 * ms, Outcome: Unknown})
	r := h.check()
	expectRules(t, r, RuleLost)
	if r.Required != 1 || r.Excused != 0 || r.Jobs != 1 {
		t.Fatalf("counts: %s", r.Summary())
	}
}

func TestCheckEarly(t *testing.T) {
	// Due at 2000 ms; the reply came at 1998 ms: 2 ms early, beyond the
	// 1 ms tolerance.
	r := new(hist).
		add("j1", 1000, 1001, 2000, 5000, OK).
		pop(1, "j1", 1990, 1998, 2000, 5000, OK).check()
	expectRules(t, r, RuleEarly)
	if !strings.Contains(r.Violations[0].Why, "2ms before its due time 2000") {
		t.Fatalf("why: %s", r.Violations[0].Why)
	}
	// With no tolerance, 0.5 ms early is early.
	h := new(hist).add("j1", 1000, 1001, 2000, 5000, OK)
	h.rec(Op{Kind: KindPop, Queue: "q", Job: "j1", Payload: payloadOf("j1", 2000, 5000), Due: 2000, AckTimeout: 5000,
		Count: 1, Invoke: 1990 * ms, Return: 2000*ms - ms/2, Outcome: OK})
	expectRules(t, Check(0, h.ops, CheckOptions{}))
	expectRules(t, Check(0, h.ops, CheckOptions{ClockTolerance: -1}), RuleEarly)
	// The history's start shifts every op into wall time.
	expectRules(t, Check(-10*ms, h.ops, CheckOptions{}), RuleEarly)
}

func TestCheckDoubleReserved(t *testing.T) {
	// Taken at >= 1000 ms with a 5 s ack timeout: nobody else may get it
	// before 5999 ms, unless it is acked or nacked first.
	base := func() *hist {
		return new(hist).
			add("j1", 900, 901, 900, 5000, OK).
			pop(1, "j1", 1000, 1010, 900, 5000, OK)
	}
	r := base().pop(2, "j1", 3000, 3010, 900, 5000, OK).check()
	expectRules(t, r, RuleDoubleReserved)
	if v := r.Violations[0]; len(v.Ops) != 2 || v.Ops[0].Client != 1 || v.Ops[1].Client != 2 {
		t.Fatalf("violation should name both deliveries: %s", v)
	}
	// Just inside the earliest deadline (5999 ms): still proof.
	expectRules(t, base().pop(2, "j1", 5990, 5998, 900, 5000, OK).check(), RuleDoubleReserved)
	// A nack that returned 0 ended nothing.
	expectRules(t, base().
		cmd(KindNack, "j1", 1020, 1021, 0, OK).
		pop(2, "j1", 3000, 3010, 900, 5000, OK).check(), RuleDoubleReserved)
	// A nack that ran after the second pop returned cannot excuse it.
	expectRules(t, base().
		pop(2, "j1", 3000, 3010, 900, 5000, OK).
		cmd(KindNack, "j1", 3020, 3021, 1, OK).check(), RuleDoubleReserved)
	// Two concurrent pops both given the job: whichever ran first, the
	// other was inside its reservation.
	expectRules(t, base().pop(2, "j1", 1005, 1015, 900, 5000, OK).check(), RuleDoubleReserved)
	// At-most-once: any second delivery is one too many.
	expectRules(t, new(hist).
		add("f1", 900, 901, 900, 0, OK).
		pop(1, "f1", 1000, 1010, 900, 0, OK).
		pop(2, "f1", 60000, 60010, 900, 0, OK).check(), RuleDoubleReserved)
	// The same with the job added twice (a producer's retry) and the
	// second add able to land between: not proof.
	expectRules(t, new(hist).
		add("f1", 900, 901, 900, 0, OK).
		pop(1, "f1", 1000, 1010, 900, 0, OK).
		add("f1", 1005, 1020, 900, 0, OK).
		pop(2, "f1", 2000, 2010, 900, 0, OK).check())
}

func TestCheckAfterCancelAndAck(t *testing.T) {
	expectRules(t, new(hist).
		add("j1", 1000, 1001, 3000, 5000, OK).
		cmd(KindCancel, "j1", 2000, 2010, 1, OK).
		pop(1, "j1", 3000, 3010, 3000, 5000, OK).check(), RuleAfterCancel)
	// Acked, then handed out again: also a double delivery? No: the ack
	// ended the first reservation; the second delivery breaks the ack.
	expectRules(t, new(hist).
		add("j1", 1000, 1001, 1000, 5000, OK).
		pop(1, "j1", 1000, 1010, 1000, 5000, OK).
		cmd(KindAck, "j1", 1020, 1030, 1, OK).
		pop(2, "j1", 1040, 1050, 1000, 5000, OK).check(), RuleAfterAck)
	// An ack that returned 0 deleted nothing: the redelivery after the
	// deadline is fine.
	expectRules(t, new(hist).
		add("j1", 1000, 1001, 1000, 5000, OK).
		pop(1, "j1", 1000, 1010, 1000, 5000, OK).
		cmd(KindAck, "j1", 7020, 7030, 0, OK).
		pop(2, "j1", 7000, 7050, 1000, 5000, OK).check())
}

func TestCheckPhantom(t *testing.T) {
	expectRules(t, new(hist).pop(1, "ghost", 1000, 1001, 0, 5000, OK).check(), RulePhantom)
	expectRules(t, new(hist).
		add("j1", 1000, 1001, 1000, 5000, Fail).
		pop(1, "j1", 2000, 2001, 1000, 5000, OK).check(), RulePhantom)
	h := new(hist).add("j1", 1000, 1001, 1000, 5000, OK)
	h.rec(Op{Kind: KindPop, Queue: "q", Job: "j1", Payload: "something else", Count: 1,
		Invoke: 2000 * ms, Return: 2001 * ms, Outcome: OK})
	expectRules(t, h.check(), RulePhantom)
}

func TestCheckReportShowsOps(t *testing.T) {
	r := new(hist).
		add("j1", 1000, 1001, 3000, 5000, OK).
		cmd(KindCancel, "j1", 2000, 2010, 1, OK).
		pop(7, "j1", 3000, 3010, 3000, 5000, OK).check()
	s := r.String()
	for _, want := range []string{
		"delivered-after-cancel: job \"j1\" of queue \"q\"",
		"#1 client 0 cancel q j1 -> 1 ok [2.000000s, 2.010000s]",
		"#2 client 7 pop q j1 (due 3000, ackTimeout 5000) ok [3.000000s, 3.010000s]",
		"1 jobs (1 acknowledged",
	} {
		if !strings.Contains(s, want) {
			t.Fatalf("report lacks %q:\n%s", want, s)
		}
	}
}

func TestHistoryRecordsConcurrently(t *testing.T) {
	h := NewHistory()
	done := make(chan struct{})
	for c := 0; c < 8; c++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 100; i++ {
				inv := h.Now()
				h.Record(Op{Client: c, Kind: KindAdd, Invoke: inv, Return: h.Now(), Outcome: OK})
			}
		}()
	}
	for c := 0; c < 8; c++ {
		<-done
	}
	ops := h.Ops()
	if len(ops) != 800 || h.Len() != 800 {
		t.Fatalf("%d ops", len(ops))
	}
	for i, op := range ops {
		if op.Index != i || op.Return < op.Invoke {
			t.Fatalf("op %d: %+v", i, op)
		}
	}
	if d := time.Duration(time.Now().UnixNano() - h.Start() - h.Now()); d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("Start()+Now() is %v off the wall clock", d)
	}
}

func TestWriteJSON(t *testing.T) {
	var b strings.Builder
	ops := new(hist).add("j1", 1000, 1001, 2000, 5000, OK).pop(1, "", 1100, 1200, 0, 0, Unknown).ops
	if err := WriteJSON(&b, 42, ops); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || lines[0] != `{"start":42}` ||
		!strings.Contains(lines[1], `"Kind":"add"`) || !strings.Contains(lines[1], `"Outcome":"ok"`) ||
		!strings.Contains(lines[2], `"Kind":"pop"`) || !strings.Contains(lines[2], `"Outcome":"unknown"`) {
		t.Fatalf("history as JSON:\n%s", b.String())
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	p := Payload{UID: "p3-1234", Due: 1700000000123, AckTimeout: 5000, Pad: 16}
	s := EncodePayload(p)
	got, err := ParsePayload(s)
	if err != nil || got != p {
		t.Fatalf("%q -> %+v, %v", s, got, err)
	}
	for _, bad := range []string{"", "hello", "chaos1 uid=x due=y ack=1", "chaos1 due=1 ack=1 pad=", "chaos1 uid=x due=1 nonsense"} {
		if _, err := ParsePayload(bad); err == nil {
			t.Errorf("ParsePayload(%q) accepted", bad)
		}
	}
}

// A move stopped between the target's commit and the source's drop, then
// finished by --cluster fix: a job acked, cancelled or popped at most once
// at the source meanwhile may come back once from the other copy, and
// only once, and only on the queues the move left open.
func TestCheckStoppedMove(t *testing.T) {
	move := CheckOptions{StoppedMoves: []StoppedMove{{Queues: []string{"q"}, From: 1500 * ms, To: 4000 * ms}}}
	check := func(h *hist, o CheckOptions) Report { return Check(0, h.ops, o) }
	acked := func() *hist {
		return new(hist).
			add("j1", 1000, 1001, 1000, 5000, OK).
			pop(1, "j1", 1000, 1010, 1000, 5000, OK).
			cmd(KindAck, "j1", 2000, 2010, 1, OK)
	}
	// Acked inside the window, delivered again after the fix: a comeback.
	r := check(acked().pop(2, "j1", 7000, 7010, 1000, 5000, OK), move)
	expectRules(t, r)
	if r.Comebacks != 1 || !strings.Contains(r.Summary(), "1 comebacks after stopped moves") {
		t.Fatalf("comebacks %d: %s", r.Comebacks, r.Summary())
	}
	// Without the move it is what it looks like.
	expectRules(t, check(acked().pop(2, "j1", 7000, 7010, 1000, 5000, OK), CheckOptions{}), RuleAfterAck)
	// Back once, it lives again: a nack and a redelivery are its own.
	expectRules(t, check(acked().
		pop(2, "j1", 7000, 7010, 1000, 5000, OK).
		cmd(KindNack, "j1", 7020, 7030, 1, OK).
		pop(3, "j1", 7040, 7050, 1000, 5000, OK).
		cmd(KindAck, "j1", 7060, 7070, 1, OK), move))
	// Twice is a double: no one instant of the move explains both.
	r = check(acked().
		pop(2, "j1", 7000, 7010, 1000, 5000, OK).
		cmd(KindAck, "j1", 7020, 7030, 1, OK).
		pop(3, "j1", 8000, 8010, 1000, 5000, OK), move)
	expectRules(t, r, RuleAfterAck)
	if r.Comebacks != 1 || r.Violations[0].Ops[0].Invoke != 7020*ms {
		t.Fatalf("want the second ack's redelivery reported, one comeback: %s", r)
	}
	// Two acks inside the window, each followed by a delivery: one
	// instant must lie after the second ack and before the first
	// redelivery, which is impossible here.
	expectRules(t, check(new(hist).
		add("j1", 1000, 1001, 1000, 5000, OK).
		pop(1, "j1", 1000, 1010, 1000, 5000, OK).
		cmd(KindAck, "j1", 1600, 1610, 1, OK).
		pop(2, "j1", 2000, 2010, 1000, 5000, OK).
		cmd(KindAck, "j1", 2100, 2110, 1, OK).
		pop(3, "j1", 3000, 3010, 1000, 5000, OK), move), RuleAfterAck)
	// An ack before the move began cannot be undone by it.
	early := CheckOptions{StoppedMoves: []StoppedMove{{Queues: []string{"q"}, From: 2500 * ms, To: 4000 * ms}}}
	expectRules(t, check(acked().pop(2, "j1", 7000, 7010, 1000, 5000, OK), early), RuleAfterAck)
	// Another queue's move excuses nothing here.
	other := CheckOptions{StoppedMoves: []StoppedMove{{Queues: []string{"other"}, From: 1500 * ms, To: 4000 * ms}}}
	expectRules(t, check(acked().pop(2, "j1", 7000, 7010, 1000, 5000, OK), other), RuleAfterAck)
	// A cancel inside the window: the same.
	cancelled := func() *hist {
		return new(hist).
			add("j1", 1000, 1001, 6000, 5000, OK).
			cmd(KindCancel, "j1", 2000, 2010, 1, OK).
			pop(1, "j1", 6000, 6010, 6000, 5000, OK)
	}
	expectRules(t, check(cancelled(), move))
	expectRules(t, check(cancelled(), CheckOptions{}), RuleAfterCancel)
	// An at-most-once pop inside the window, the job popped again later.
	amo := func() *hist {
		return new(hist).
			add("f1", 1000, 1001, 1000, 0, OK).
			pop(1, "f1", 2000, 2010, 1000, 0, OK).
			pop(2, "f1", 5000, 5010, 1000, 0, OK)
	}
	expectRules(t, check(amo(), move))
	expectRules(t, check(amo(), CheckOptions{}), RuleDoubleReserved)
	expectRules(t, check(amo().pop(3, "f1", 6000, 6010, 1000, 0, OK), move), RuleDoubleReserved)
	// A comeback is never a loss: an acknowledged job still must arrive.
	expectRules(t, check(new(hist).add("j2", 1000, 1001, 1000, 5000, OK), move), RuleLost)
}
