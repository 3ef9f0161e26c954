package cluster

import (
	"context"
	"sort"
	"time"

	"github.com/rs/zerolog"
)

// Leader placement (docs/decisions/leader-placement.md): each process
// hands over the leadership of groups it leads in surplus, as TiKV's
// balance-leader and CockroachDB's lease rebalancing do, so that leaders
// (and the writes they take) spread over the processes by themselves and
// come back to a node that returns. Each process decides for the groups
// it leads; the rule only ever moves a leader from a process to one that
// leads at least two fewer, so two processes never hand a group back and
// forth.

// PlacedGroup is one group as the placement rule reads it: the process
// leading it ("" none known) and, when this process leads it, the voters
// of other processes that could take it over now (caught up, and up for
// long enough).
type PlacedGroup struct {
	Leader string
	Takers []Taker
}

// Taker is a voter that could take a group's leadership: its process and
// its id in that group.
type Taker struct {
	Proc, ID string
}

// LeaderMove is the rule: the group self should hand over now, and to
// which voter; ok is false when none should move. Counts are groups led
// per process. A group moves from self only to a process leading at least
// two fewer (so the move narrows the gap and is never undone by the
// rule); the receiver is the one leading fewest, then the lowest process
// key, the group the lowest such. With every process up, no process ends
// leading more than ceil(groups/processes). While any group has no
// leader the counts are not known, and nothing moves.
func LeaderMove(self string, groups []PlacedGroup) (group int, to Taker, ok bool) {
	led := map[string]int{}
	for _, g := range groups {
		if g.Leader == "" {
			return 0, Taker{}, false
		}
		led[g.Leader]++
	}
	mine := led[self]
	for i, g := range groups {
		if g.Leader != self {
			continue
		}
		for _, t := range g.Takers {
			if t.Proc == self || led[t.Proc] > mine-2 {
				continue
			}
			if !ok || led[t.Proc] < led[to.Proc] || (led[t.Proc] == led[to.Proc] && t.Proc < to.Proc) {
				group, to, ok = i, t, true
			}
		}
	}
	return group, to, ok
}

// Balancer runs the placement rule for this process's groups every few
// seconds (main runs one unless --cluster-balance-leaders no).
type Balancer struct {
	// Local is this process's group g (nil while not started, or when it
	// holds no replica of g), View any group g as this process sees it
	// (nil while unknown), for g below Count().
	Local func(g int) *Cluster
	View  func(g int) LeaderView
	Count func() int
	// Busy says a slot move is open: leaders stay put meanwhile, as a
	// MIGRATE under way would be cut by the hand-over.
	Busy func() bool
	// Every is how often the rule runs (default 2 s); StableFor how long a
	// voter must have been caught up without a break to be handed a group
	// (default 10 s): a node that flaps never stays up that long, and gets
	// none.
	Every, StableFor time.Duration
	Log              zerolog.Logger

	// Only Run's goroutine touches what follows.
	//
	// procs maps each member address to its process: group 0's id of the
	// process serving it (CLUSTER GROUPS, asked once per process).
	procs map[string]string
	asked map[string]bool // group 0 ids whose addresses are in procs
	// learned is the number of groups when procs was learned: a group
	// added or removed (add-node, del-node) has it learned again.
	learned int
	// since is when each voter of a group this process leads began its
	// current run of rounds seen caught up and connected.
	since map[voterKey]time.Time
}

type voterKey struct {
	group int
	id    string
}

// LeaderView is what the rule reads of a group it may hold no replica of.
type LeaderView interface {
	Leader() (Node, bool)
}

// Run runs the rule until ctx ends.
func (b *Balancer) Run(ctx context.Context) {
	if b.Every <= 0 {
		b.Every = 2 * time.Second
	}
	if b.StableFor <= 0 {
		b.StableFor = 10 * time.Second
	}
	b.procs, b.asked, b.since = map[string]string{}, map[string]bool{}, map[voterKey]time.Time{}
	t := time.NewTicker(b.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if b.Busy != nil && b.Busy() {
			continue
		}
		b.round(ctx, time.Now())
	}
}

// round makes at most one hand-over: the counts change with it, and the
// next round reads them anew.
func (b *Balancer) round(ctx context.Context, now time.Time) {
	n := b.Count()
	c0 := b.Local(0)
	if c0 == nil {
		return
	}
	self := c0.ID()
	for g := 0; g < n; g++ {
		if c := b.Local(g); c != nil {
			b.procs[c.Self().Addr] = self
		}
	}
	b.learn(ctx, c0, self)
	groups := make([]PlacedGroup, n)
	for g := range groups {
		v := b.View(g)
		if v == nil {
			return
		}
		leader, ok := v.Leader()
		if !ok {
			return
		}
		groups[g].Leader = b.procs[leader.Addr]
		if groups[g].Leader == "" {
			return // a process not asked yet: its count is not known
		}
		c := b.Local(g)
		if !leader.Self || c == nil {
			b.forget(g)
			continue
		}
		groups[g].Takers = b.takers(g, c, now)
	}
	g, to, ok := LeaderMove(self, groups)
	if !ok {
		return
	}
	c := b.Local(g)
	b.Log.Info().Int("group", g).Str("to", to.ID).Str("to_node", to.Proc).
		Msg("cluster: this node leads more groups than its share; handing one over")
	if err := c.HandOver(to.ID); err != nil {
		b.Log.Warn().Err(err).Int("group", g).Str("to", to.ID).Msg("cluster: leadership hand-over failed")
	}
	b.forget(g)
}

// learn asks each process of group 0 not asked yet where it serves each
// group. A process that does not answer is asked again next round.
func (b *Balancer) learn(ctx context.Context, c0 *Cluster, self string) {
	if n := b.Count(); n != b.learned {
		b.procs, b.asked, b.learned = map[string]string{}, map[string]bool{}, n
	}
	for _, n := range c0.Nodes() {
		if n.ID == self || b.asked[n.ID] || n.Addr == "" {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, time.Second)
		l, err := c0.AskLayout(actx, n.Addr)
		cancel()
		if err != nil {
			continue
		}
		b.procs[n.Addr] = n.ID
		for _, a := range l.Join {
			if a != "" {
				b.procs[a] = n.ID
			}
		}
		b.asked[n.ID] = true
	}
}

// takers lists group g's voters that could lead it now: heard from within
// the election timeout, no more than a batch behind, both without a break
// for StableFor.
func (b *Balancer) takers(g int, c *Cluster, now time.Time) []Taker {
	last := c.LastIndex()
	var out []Taker
	for _, n := range c.Nodes() {
		if n.Self || !n.Voter {
			continue
		}
		key := voterKey{g, n.ID}
		if !n.Connected || n.LastHeard > c.cfg.ElectionTimeout || n.Match+maxLag < last {
			delete(b.since, key) // the run of good rounds starts again
			continue
		}
		s, ok := b.since[key]
		if !ok {
			b.since[key] = now
		}
		if !ok || now.Sub(s) < b.StableFor {
			continue
		}
		if p := b.procs[n.Addr]; p != "" {
			out = append(out, Taker{Proc: p, ID: n.ID})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Proc < out[j].Proc })
	return out
}

// maxLag is how far behind the leader's log a voter may be and still be
// handed the group: about a batch in flight. Raft's transfer catches it up
// anyway; this keeps a node still replaying its backlog from being chosen.
const maxLag = 1024

// forget drops what was seen of group g's voters: it is led elsewhere now.
func (b *Balancer) forget(g int) {
	for k := range b.since {
		if k.group == g {
			delete(b.since, k)
		}
	}
}
