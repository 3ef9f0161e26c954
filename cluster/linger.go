package cluster

// A follower that no commit waits for gets its appends a little later
// (docs/decisions/replication-linger.md).
//
// A leader commits an entry once a majority has it: in a 3-node group, the
// first of the two followers to answer. hashicorp/raft replicates to each
// follower on its own goroutine, one AppendEntries at a time, each carrying
// every entry the leader has and the follower lacks; so each follower
// answers an RPC per commit, and under a moderate load (50 clients, no
// pipelining) an RPC carries 15-20 records and costs its follower more
// than the records do. The slower follower's answers decide nothing: once
// the follower ahead has an append's entries, the append waits out
// replicaLinger before it goes, so that the next carries what came
// meanwhile, and that follower reads, logs and answers a third as many
// RPCs. Commits wait for the followers ahead, which never wait; if they do
// not have the entries within replicaHedge, the append goes at once.

import (
	"time"

	"github.com/hashicorp/raft"
)

// replicaLinger is how long an append to a follower no commit waits for is
// held: at about 1 ms an RPC under load, a third of the RPCs. It is also
// about how far behind the leader that follower's log and state machine
// run (READONLY reads there, WAIT for every replica).
const replicaLinger = 2 * time.Millisecond

// replicaHedge is how long the followers ahead may take to have what an
// append holds before it goes anyway: a leader used to commit with the
// first of its followers to answer, and a hiccup of the one ahead (a
// collection, a descheduled process) now costs a commit this much more
// at most, not replicaLinger.
const replicaHedge = 500 * time.Microsecond

// freshFor is how recently a follower must have answered to count as
// ahead: one that stops answering is waited on no longer than this before
// the others send at once again.
const freshFor = 50 * time.Millisecond

// lagging says whether follower id is one no commit needs: among the
// voters, enough others to make a majority with the leader (quorum - 1)
// answered within freshFor and match at least as far, a tie going to the
// follower that comes first after the leader in the ring of ids
// (ringBefore), so that of two followers level with each other one waits
// and one does not. A non-voter, or a follower not in voters, never waits.
func lagging(id, leader string, voters []raft.Server, match map[string]uint64, heard map[string]time.Time, now time.Time) bool {
	n, mine := 0, false
	for _, s := range voters {
		if s.Suffrage == raft.Voter {
			n++
			mine = mine || string(s.ID) == id
		}
	}
	if !mine || id == leader {
		return false
	}
	need := n / 2 // followers a commit needs: a majority of n, less the leader
	ahead := 0
	for _, s := range voters {
		f := string(s.ID)
		if s.Suffrage != raft.Voter || f == id || f == leader {
			continue
		}
		if now.Sub(heard[f]) >= freshFor {
			continue
		}
		if m, me := match[f], match[id]; m > me || (m == me && ringBefore(f, id, leader)) {
			ahead++
		}
	}
	return need > 0 && ahead >= need
}

// ringBefore says whether follower a comes before b in the ring of ids
// that starts after the leader's: with several groups whose leaders are
// spread over the nodes, each node is then the follower ahead in as many
// groups as it is the one held (with ids 1 < 2 < 3: 2 ahead in 1's group,
// 3 in 2's, 1 in 3's), where plain id order would put the lowest id ahead
// in every group it follows and leave it the busiest node.
func ringBefore(a, b, leader string) bool {
	if wa, wb := a < leader, b < leader; wa != wb {
		return wb // a after the leader, b wrapped around
	}
	return a < b
}

// covered says whether enough followers other than id (a majority with
// the leader) have the log up to last: a commit of it needs nothing of id.
func covered(id, leader string, voters []raft.Server, match map[string]uint64, last uint64) bool {
	n, have := 0, 0
	for _, s := range voters {
		if s.Suffrage != raft.Voter {
			continue
		}
		n++
		if f := string(s.ID); f != id && f != leader && match[f] >= last {
			have++
		}
	}
	return have >= n/2
}

// hold delays the append to follower id of entries up to last while id is
// lagging: until the followers ahead have them, at most hedge (past it, a
// commit may be waiting on id: it goes at once), then until linger has
// passed since the call. The next append to id carries what came
// meanwhile.
func (t *tracker) hold(id string, last uint64) {
	if t.linger <= 0 || t.voters == nil {
		return
	}
	voters := t.voters()
	start := time.Now()
	t.mu.Lock()
	if !lagging(id, t.self, voters, t.match, t.heard, start) {
		t.mu.Unlock()
		return
	}
	for !covered(id, t.self, voters, t.match, last) {
		acked := t.acked
		t.mu.Unlock()
		left := t.hedge - time.Since(start)
		if left <= 0 {
			return
		}
		if !t.sleep(left, acked) {
			return
		}
		t.mu.Lock()
	}
	t.mu.Unlock()
	t.sleep(t.linger-time.Since(start), nil)
}

// sleep waits d, or until wake is closed; false when the transport closed.
func (t *tracker) sleep(d time.Duration, wake <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-wake:
	case <-t.done:
		return false
	}
	return true
}
