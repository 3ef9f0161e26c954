package queue

import (
	"cmp"
	"slices"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/topn"
)

// Which queues /metrics and INFO name, out of many: the owner lists its
// live queues (Named) and shows what these choose.

// Named is a live queue with its name.
type Named struct {
	Name string
	Q    *Queue
}

// Totals are many queues' jobs by state, and how many of them hold one.
type Totals struct{ Delayed, Ready, Reserved, Queues int }

// Top returns the n queues of qs with the most jobs, the largest first
// (ties by name, so the choice is the same on every scrape while nothing
// changes), and the totals of all of qs. O(Q + Q log n).
func Top(qs []Named, n int) (top []Named, t Totals) {
	better := func(a, b int) bool {
		ja, jb := qs[a].Q.Jobs(), qs[b].Q.Jobs()
		return ja > jb || ja == jb && qs[a].Name < qs[b].Name
	}
	k := topn.New(n, len(qs), better)
	for i := range qs {
		q := qs[i].Q
		t.Delayed += q.Delayed
		t.Ready += q.Ready
		t.Reserved += q.Reserved
		if q.Jobs() > 0 {
			t.Queues++
		}
		k.Offer(i)
	}
	best := k.Sorted()
	top = make([]Named, len(best))
	for i, b := range best {
		top[i] = qs[b]
	}
	return top, t
}

// MostLatent is the largest latency at now (ms) of the queues of qs with a
// ready job that are not in top: what /metrics shows of the rest.
func MostLatent(qs, top []Named, t *jobs.Slab, now int64) (most int64) {
	inTop := make(map[*Queue]bool, len(top))
	for _, q := range top {
		inTop[q.Q] = true
	}
	for _, q := range qs {
		if q.Q.Ready > 0 && !inTop[q.Q] {
			most = max(most, q.Q.Latency(t, now))
		}
	}
	return most
}

// Latent is a queue's latency, in ms, with its ready jobs.
type Latent struct {
	Name    string
	Ready   int
	Latency int64
}

// ByLatency returns the n queues of qs with the oldest ready jobs, the
// oldest first (ties by name), and the largest latency of all, at now.
// Queues with no ready job are left out. O(Q log Q) in the queues with a
// ready job, plus the lanes of queues with priorities or groups.
func ByLatency(qs []Named, t *jobs.Slab, now int64, n int) (top []Latent, most int64) {
	for _, q := range qs {
		if q.Q.Ready == 0 {
			continue
		}
		l := q.Q.Latency(t, now)
		most = max(most, l)
		if n > 0 {
			top = append(top, Latent{Name: q.Name, Ready: q.Q.Ready, Latency: l})
		}
	}
	slices.SortFunc(top, func(a, b Latent) int {
		return cmp.Or(cmp.Compare(b.Latency, a.Latency), cmp.Compare(a.Name, b.Name))
	})
	return top[:min(len(top), n)], most
}
