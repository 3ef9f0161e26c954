package queue

import (
	"fmt"
	"slices"

	"github.com/delayd/delayd/jobs"
)

// Check verifies the order's invariants against the jobs of its queue in
// any state (held: their slots): a lane counts its jobs; a lane is in its
// ring iff it has ready jobs and its group is not held, and a ring's bit
// is set while it has a lane; a group counts its reserved jobs and is held
// iff it is at the GROUPCONCURRENCY limit. O(jobs + lanes). For tests: the
// engine's tests check that every ready job is in the order once.
func (r *Order) Check(t *jobs.Slab, held []uint32) error {
	x := r.x
	if x == nil {
		for _, s := range held {
			if l := t.At(s).Lane; l != 0 {
				return fmt.Errorf("slot %d in lane %d of a plain list", s, l)
			}
		}
		return nil
	}
	reserved := make(map[uint32]uint32)
	perLane := make(map[uint32]uint32)
	for _, s := range held {
		j := t.At(s)
		perLane[j.Lane]++
		if j.State == jobs.StateReserved {
			reserved[x.ls[j.Lane].group]++
		}
	}
	for l := range x.ls {
		ln := &x.ls[l]
		if l != 0 && slices.Contains(x.lfree, uint32(l)) {
			continue
		}
		if l != 0 && ln.jobs != perLane[uint32(l)] {
			return fmt.Errorf("lane %d: count %d, jobs %d", l, ln.jobs, perLane[uint32(l)])
		}
		g := &x.gs[ln.group]
		if want := ln.head != 0 && !g.held; ln.inRing != want {
			return fmt.Errorf("lane %d: in ring %v, want %v", l, ln.inRing, want)
		}
		if x.mask&(1<<ln.prio) == 0 && ln.inRing {
			return fmt.Errorf("lane %d in ring %d, mask %b", l, ln.prio, x.mask)
		}
	}
	for gi := range x.gs {
		g := &x.gs[gi]
		if g.nlanes == 0 {
			continue
		}
		if g.reserved != reserved[uint32(gi)] {
			return fmt.Errorf("group %q: reserved count %d, reserved jobs %d", g.name, g.reserved, reserved[uint32(gi)])
		}
		if want := x.gcap > 0 && g.reserved >= x.gcap; g.held != want {
			return fmt.Errorf("group %q: held %v with %d reserved, cap %d", g.name, g.held, g.reserved, x.gcap)
		}
	}
	return nil
}
