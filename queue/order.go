package queue

import (
	"math/bits"
	"slices"
	"strings"

	"github.com/delayd/delayd/jobs"
)

// The ready order of a queue: which ready job a pop takes next.
//
// A queue whose jobs use no PRIORITY, no GROUP and no GROUPCONCURRENCY keeps
// its ready jobs in one intrusive list (head, tail), as it always did: the
// common case pays one nil check for everything below.
//
// The first job with a priority or a group (or a GROUPCONCURRENCY limit)
// gives the queue lanes. A lane is the ready jobs of one group at one
// priority, in FIFO order; lane 0 is the default group (no GROUP) at
// priority 0. For each priority, the lanes that have ready jobs and whose
// group may take more form a ring. A pop takes the head job of the lane at
// the head of the highest priority's ring and moves that lane to the ring's
// tail: round-robin across groups within a priority, O(1) per pop, however
// many jobs one group holds.
//
// The rotation happens when the head job of the ring's head lane leaves the
// ready order, whatever takes it (a pop, a reservation, a cancel, a move).
// Replay and followers apply pops as the removal of named jobs, so they
// rotate the rings exactly as the live leader did: fairness survives a
// restart and a failover.
//
// A group at its GROUPCONCURRENCY limit is held: its lanes leave the rings
// until one of its reservations ends, so no pop ever looks at it (LLEN still
// counts its jobs, LRANGE still lists them).
//
// Groups and lanes are records in per-queue tables, freed when they hold no
// job in any state (delayed and reserved jobs keep their lane, which says
// where they go when they become ready again). A job's lane index is
// jobs.Job.Lane. When only lane 0 remains and no group limit is set, the
// queue drops back to the plain list.

// nprio is the number of priorities: PRIORITY 0 to 9.
const nprio = 10

// Order is a queue's ready jobs in the order pops take them.
type Order struct {
	head, tail uint32 // the plain list, slot+1, while x is nil
	x          *lanes
}

// lanes is the ready order of a queue that uses priorities or groups.
type lanes struct {
	ls     []lane
	lfree  []uint32
	gs     []laneGroup
	gfree  []uint32
	byName map[string]uint32 // group name -> index; the default group is not in it
	rings  [nprio]ring
	mask   uint16 // bit p: rings[p] is not empty
	gcap   uint32 // GROUPCONCURRENCY; 0: none
	nheld  int    // groups held at gcap
}

// lane is the ready jobs of one group at one priority.
type lane struct {
	head, tail   uint32 // ready jobs, slot+1
	rnext, rprev uint32 // ring links, lane+1
	group        uint32
	jobs         uint32 // jobs in any state; lane 0 is not counted (it lives as long as the lanes)
	prio         uint8
	inRing       bool
}

// laneGroup is one GROUP of a queue (index 0: the default group).
type laneGroup struct {
	name     string
	lanes    [nprio]uint32 // lane+1 by priority, 0: none
	nlanes   uint8
	held     bool // at gcap: its lanes are out of the rings
	reserved uint32
}

type ring struct{ head, tail uint32 } // lane+1

// listPush links slot s into a list at its head or tail.
func listPush(t *jobs.Slab, head, tail *uint32, s uint32, atHead bool) {
	j := t.At(s)
	if atHead {
		j.Prev, j.Next = 0, *head
		if *head != 0 {
			t.At(*head - 1).Prev = s + 1
		} else {
			*tail = s + 1
		}
		*head = s + 1
		return
	}
	j.Next, j.Prev = 0, *tail
	if *tail != 0 {
		t.At(*tail - 1).Next = s + 1
	} else {
		*head = s + 1
	}
	*tail = s + 1
}

// listUnlink takes slot s out of a list.
func listUnlink(t *jobs.Slab, head, tail *uint32, s uint32) {
	j := t.At(s)
	if j.Prev != 0 {
		t.At(j.Prev - 1).Next = j.Next
	} else {
		*head = j.Next
	}
	if j.Next != 0 {
		t.At(j.Next - 1).Prev = j.Prev
	} else {
		*tail = j.Prev
	}
	j.Next, j.Prev = 0, 0
}

// Push adds the ready job in slot s at the end of its lane (atHead: at the
// front, and its lane to the front of its ring, so it is the next a pop
// takes if nothing has a higher priority). O(1).
func (r *Order) Push(t *jobs.Slab, s uint32, atHead bool) {
	if r.x == nil {
		listPush(t, &r.head, &r.tail, s, atHead)
		return
	}
	r.x.push(t, s, atHead)
}

// Unlink takes the ready job in slot s out of the order. O(1).
func (r *Order) Unlink(t *jobs.Slab, s uint32) {
	if r.x == nil {
		listUnlink(t, &r.head, &r.tail, s)
		return
	}
	r.x.unlink(t, s)
}

// First is the job a pop from the head takes (slot+1; 0: none may be taken).
func (r *Order) First() uint32 {
	if r.x == nil {
		return r.head
	}
	return r.x.first()
}

// Last is the job a pop from the tail (RPOP, LMOVE RIGHT) takes: the
// newest job of the lowest priority, of the group last in that priority's
// turn. With one group per priority that is exactly the end of LRANGE's
// order; with several, it is the group served last in the current round.
func (r *Order) Last() uint32 {
	if r.x == nil {
		return r.tail
	}
	x := r.x
	if x.mask == 0 {
		return 0
	}
	p := bits.TrailingZeros16(x.mask)
	return x.ls[x.rings[p].tail-1].tail
}

// OldestDue returns the due time of the oldest head of the ready order, and
// whether there is a ready job: the head of a plain list, or the oldest
// of the lanes' heads, O(lanes) (the engine's queue latency).
func (r *Order) OldestDue(t *jobs.Slab) (int64, bool) {
	if r.x == nil {
		if r.head == 0 {
			return 0, false
		}
		return t.At(r.head - 1).Due, true
	}
	var due int64
	found := false
	for i := range r.x.ls {
		if h := r.x.ls[i].head; h != 0 {
			if d := t.At(h - 1).Due; !found || d < due {
				due, found = d, true
			}
		}
	}
	return due, found
}

// Each calls fn for every ready job in the order pops from the head would
// take them if nothing were added meanwhile: priorities from high to low;
// within one, round-robin across the groups in ring order, then the groups
// held at their GROUPCONCURRENCY limit, by name. It stops when fn returns
// false.
// O(jobs visited + lanes of the priorities visited).
func (r *Order) Each(t *jobs.Slab, fn func(s uint32) bool) {
	if r.x == nil {
		for s := r.head; s != 0; s = t.At(s - 1).Next {
			if !fn(s - 1) {
				return
			}
		}
		return
	}
	x := r.x
	var cur, held []uint32
	if x.nheld > 0 {
		// Held groups rejoin their rings in the order their reservations
		// end, which nothing can tell in advance: they are listed by name,
		// so the same state always lists the same way (a rewrite's replay).
		for g := range x.gs {
			if x.gs[g].held {
				held = append(held, uint32(g))
			}
		}
		slices.SortFunc(held, func(a, b uint32) int { return strings.Compare(x.gs[a].name, x.gs[b].name) })
	}
	for p := nprio - 1; p >= 0; p-- {
		cur = cur[:0]
		for l := x.rings[p].head; l != 0; l = x.ls[l-1].rnext {
			cur = append(cur, x.ls[l-1].head)
		}
		for _, g := range held {
			if l := x.gs[g].lanes[p]; l != 0 && x.ls[l-1].head != 0 {
				cur = append(cur, x.ls[l-1].head)
			}
		}
		// One job of each lane per round, as successive pops take them.
		for len(cur) > 0 {
			k := 0
			for _, s := range cur {
				if !fn(s - 1) {
					return
				}
				if n := t.At(s - 1).Next; n != 0 {
					cur[k] = n
					k++
				}
			}
			cur = cur[:k]
		}
	}
}

// join puts the job in slot s, new to this queue and in no list, in the
// lane of its group and priority. reserved is the queue's count of reserved
// jobs (all of the default group, if the lanes are made now). O(1).
func (r *Order) join(t *jobs.Slab, s uint32, grp []byte, prio uint8, reserved int) {
	j := t.At(s)
	j.Lane = 0
	if len(grp) == 0 && prio == 0 {
		return
	}
	x := r.lanes(reserved)
	g := uint32(0)
	if len(grp) > 0 {
		var ok bool
		if g, ok = x.byName[string(grp)]; !ok {
			g = x.newGroup(string(grp))
		}
	}
	l := x.gs[g].lanes[prio]
	if l == 0 {
		l = x.newLane(g, prio) + 1
	}
	l--
	if l != 0 {
		x.ls[l].jobs++
	}
	j.Lane = l
}

// Leave takes the job in slot s, in no list, out of its lane's count: it
// leaves the queue. It frees the lane and the group when they hold nothing
// more, and drops back to the plain list when nothing but the default lane
// is left. O(1).
func (r *Order) Leave(t *jobs.Slab, s uint32) {
	j := t.At(s)
	l := j.Lane
	j.Lane = 0
	if l == 0 || r.x == nil {
		return
	}
	x := r.x
	ln := &x.ls[l]
	if ln.jobs--; ln.jobs > 0 {
		return
	}
	g := &x.gs[ln.group]
	g.lanes[ln.prio] = 0
	g.nlanes--
	gi := ln.group
	x.ls[l] = lane{}
	x.lfree = append(x.lfree, l)
	if g.nlanes == 0 && gi != 0 {
		if g.held {
			x.nheld--
		}
		delete(x.byName, g.name)
		x.gs[gi] = laneGroup{}
		x.gfree = append(x.gfree, gi)
	}
	if len(x.ls)-len(x.lfree) == 1 && x.gcap == 0 {
		r.head, r.tail = x.ls[0].head, x.ls[0].tail
		r.x = nil
	}
}

// LaneOf returns the group name and priority of the job in slot s.
func (r *Order) LaneOf(t *jobs.Slab, s uint32) (string, uint8) {
	l := t.At(s).Lane
	if l == 0 || r.x == nil {
		return "", 0
	}
	ln := &r.x.ls[l]
	return r.x.gs[ln.group].name, ln.prio
}

// Reserve counts the job in slot s as reserved in its group, holding the
// group when it reaches the group limit. O(1).
func (r *Order) Reserve(t *jobs.Slab, s uint32) {
	if r.x == nil {
		return
	}
	x := r.x
	gi := x.ls[t.At(s).Lane].group
	g := &x.gs[gi]
	g.reserved++
	if x.gcap > 0 && g.reserved >= x.gcap && !g.held {
		x.hold(gi)
	}
}

// Unreserve undoes Reserve; it says whether the job's group was held and
// may take jobs again.
func (r *Order) Unreserve(t *jobs.Slab, s uint32) bool {
	if r.x == nil {
		return false
	}
	x := r.x
	gi := x.ls[t.At(s).Lane].group
	g := &x.gs[gi]
	if g.reserved > 0 {
		g.reserved--
	}
	if g.held && g.reserved < x.gcap {
		x.release(gi)
		return true
	}
	return false
}

// setGroupCap sets the GROUPCONCURRENCY limit (0: none) and holds or
// releases every group by it. reserved is the queue's count of reserved
// jobs. O(groups).
func (r *Order) setGroupCap(n uint32, reserved int) {
	if n == 0 && r.x == nil {
		return
	}
	x := r.lanes(reserved)
	x.gcap = n
	for gi := range x.gs {
		g := &x.gs[gi]
		if g.nlanes == 0 {
			continue // a free record
		}
		switch hold := n > 0 && g.reserved >= n; {
		case hold && !g.held:
			x.hold(uint32(gi))
		case !hold && g.held:
			x.release(uint32(gi))
		}
	}
	if n == 0 && len(x.ls)-len(x.lfree) == 1 {
		r.head, r.tail = x.ls[0].head, x.ls[0].tail
		r.x = nil
	}
}

// lanes returns the queue's lanes, making them from the plain list (which
// becomes lane 0) the first time.
func (r *Order) lanes(reserved int) *lanes {
	if r.x != nil {
		return r.x
	}
	x := &lanes{
		ls: []lane{{head: r.head, tail: r.tail}},
		gs: []laneGroup{{nlanes: 1, reserved: uint32(reserved)}},
	}
	x.gs[0].lanes[0] = 1
	if r.head != 0 {
		x.ringPush(0, false)
	}
	r.head, r.tail, r.x = 0, 0, x
	return x
}

func (x *lanes) newGroup(name string) uint32 {
	if x.byName == nil {
		x.byName = make(map[string]uint32)
	}
	var g uint32
	if n := len(x.gfree); n > 0 {
		g = x.gfree[n-1]
		x.gfree = x.gfree[:n-1]
	} else {
		x.gs = append(x.gs, laneGroup{})
		g = uint32(len(x.gs) - 1)
	}
	x.gs[g] = laneGroup{name: name}
	x.byName[name] = g
	return g
}

func (x *lanes) newLane(g uint32, prio uint8) uint32 {
	var l uint32
	if n := len(x.lfree); n > 0 {
		l = x.lfree[n-1]
		x.lfree = x.lfree[:n-1]
	} else {
		x.ls = append(x.ls, lane{})
		l = uint32(len(x.ls) - 1)
	}
	x.ls[l] = lane{group: g, prio: prio}
	x.gs[g].lanes[prio] = l + 1
	x.gs[g].nlanes++
	return l
}

func (x *lanes) push(t *jobs.Slab, s uint32, atHead bool) {
	l := t.At(s).Lane
	ln := &x.ls[l]
	wasEmpty := ln.head == 0
	listPush(t, &ln.head, &ln.tail, s, atHead)
	if x.gs[ln.group].held {
		return
	}
	switch {
	case wasEmpty:
		x.ringPush(l, atHead)
	case atHead && x.rings[ln.prio].head != l+1:
		x.ringRemove(l)
		x.ringPush(l, true)
	}
}

func (x *lanes) unlink(t *jobs.Slab, s uint32) {
	l := t.At(s).Lane
	ln := &x.ls[l]
	wasHead := ln.head == s+1
	listUnlink(t, &ln.head, &ln.tail, s)
	if !ln.inRing {
		return
	}
	switch rg := &x.rings[ln.prio]; {
	case ln.head == 0:
		x.ringRemove(l)
	case wasHead && rg.head == l+1 && rg.tail != l+1:
		// The lane just had its turn: to the back of the ring.
		x.ringRemove(l)
		x.ringPush(l, false)
	}
}

func (x *lanes) first() uint32 {
	if x.mask == 0 {
		return 0
	}
	p := bits.Len16(x.mask) - 1
	return x.ls[x.rings[p].head-1].head
}

// hold takes a group's lanes out of the rings: it is at its limit.
func (x *lanes) hold(gi uint32) {
	g := &x.gs[gi]
	g.held = true
	x.nheld++
	for _, l := range g.lanes {
		if l != 0 && x.ls[l-1].inRing {
			x.ringRemove(l - 1)
		}
	}
}

// release puts a held group's lanes with ready jobs back, at the end of
// their rings.
func (x *lanes) release(gi uint32) {
	g := &x.gs[gi]
	g.held = false
	x.nheld--
	for _, l := range g.lanes {
		if l != 0 && x.ls[l-1].head != 0 {
			x.ringPush(l-1, false)
		}
	}
}

func (x *lanes) ringPush(l uint32, atHead bool) {
	ln := &x.ls[l]
	rg := &x.rings[ln.prio]
	ln.inRing = true
	if atHead {
		ln.rprev, ln.rnext = 0, rg.head
		if rg.head != 0 {
			x.ls[rg.head-1].rprev = l + 1
		} else {
			rg.tail = l + 1
		}
		rg.head = l + 1
	} else {
		ln.rnext, ln.rprev = 0, rg.tail
		if rg.tail != 0 {
			x.ls[rg.tail-1].rnext = l + 1
		} else {
			rg.head = l + 1
		}
		rg.tail = l + 1
	}
	x.mask |= 1 << ln.prio
}

func (x *lanes) ringRemove(l uint32) {
	ln := &x.ls[l]
	rg := &x.rings[ln.prio]
	if ln.rprev != 0 {
		x.ls[ln.rprev-1].rnext = ln.rnext
	} else {
		rg.head = ln.rnext
	}
	if ln.rnext != 0 {
		x.ls[ln.rnext-1].rprev = ln.rprev
	} else {
		rg.tail = ln.rprev
	}
	ln.rnext, ln.rprev, ln.inRing = 0, 0, false
	if rg.head == 0 {
		x.mask &^= 1 << ln.prio
	}
}

// Frozen returns a copy of the order as it is now, which reads (Each,
// LaneOf) the same over a copy of the slab taken at the same instant
// while r goes on changing: a cluster's capture walks it outside the
// owner's lock. O(lanes and groups), nothing a job.
func (r *Order) Frozen() Order {
	f := Order{head: r.head, tail: r.tail}
	if r.x != nil {
		x := *r.x
		x.ls = slices.Clone(x.ls)
		x.gs = slices.Clone(x.gs) // names are strings: shared, never changed
		x.lfree, x.gfree, x.byName = nil, nil, nil
		f.x = &x
	}
	return f
}
