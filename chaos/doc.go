// Package chaos is the fault-injection harness that proves delayd's cluster
// mode: a fault proxy for the Raft bus, a recorder of what clients saw, a
// checker of a delay queue's delivery guarantees over that record, and a
// linearizability model for a sample of queues (porcupine). It owns no part
// of the server; integration_test/chaos_test.go drives real processes with
// it (TestChaos), in the manner of Jepsen and etcd's robustness tests: run
// a workload, inject faults, record every call with its invoke and return
// time, then judge the whole history.
//
// # Faults, and what each stands for
//
// Process faults are sent by the test to the real delayd processes:
//
//   - SIGKILL of the leader, then restart on its data dir: a crashed
//     machine that reboots. Raft must elect a new leader; the old one
//     comes back as a follower and must not resurrect writes that never
//     committed. The time from the kill to the first acknowledged write is
//     the failover time the test reports.
//   - SIGKILL of a follower (and, with 5 nodes, of the leader and a
//     follower at once): lost replicas; the rest keep a quorum.
//   - SIGSTOP, then SIGCONT, of the leader: a stop-the-world pause (a GC
//     pause, a VM migration, a swapping host). The paused leader still
//     believes it leads when it wakes; it must step down, not act on its
//     old term.
//   - A follower killed, its data dir wiped, then forgotten (CLUSTER
//     FORGET) and started as a new member that joins: a replaced disk.
//     It must catch up from a snapshot and the log tail.
//
// Network faults come from Proxy, which sits between every pair of nodes'
// bus addresses (each node announces the proxy's listener for it, and
// dials from its own loopback IP, so the proxy knows who is talking):
//
//   - Drop (Isolate, Partition): no byte passes either way between two
//     nodes; the bytes in flight and the ones sent meanwhile are held, not
//     discarded, and delivered in order on heal, as TCP's retransmissions
//     would deliver them. New connections are accepted and blackholed
//     rather than refused: a partitioned peer's SYN gets no answer, so
//     Raft's transport times out as on a real network, where a refusal
//     would tell it at once, as only a crashed host does.
//   - OneWay: the bytes one node sends another stop while the reverse
//     flows (a broken route, an asymmetric firewall rule): a leader whose
//     heartbeats are lost but who still hears its followers.
//   - Delay: latency added to every chunk (a slow or distant link), as
//     latency, not a bandwidth cap.
//   - Sever: every connection between two nodes reset at once.
//
// Clients reach the nodes directly, not through the proxy: the faults are
// between replicas, and clients see them only as the cluster does
// (MOVED, CLUSTERDOWN, TRYAGAIN, timeouts).
//
// # The history
//
// Every call is recorded as an Op with its invoke and return time on one
// monotonic clock, and its Outcome: OK (the reply came: the effect
// happened once, inside [Invoke, Return]), Fail (refused before it ran:
// no effect), or Unknown (a timeout, a lost connection, TRYAGAIN: the
// effect may land at any time after Invoke, or never). A client library's
// retries would blur this (a cancel that ran, timed out, and was resent
// reports 0), so Guard lets go-redis retry only after refusals that prove
// nothing ran, and ends a call Unknown after any attempt that may have.
// Each job's payload carries its own id, due time and ack timeout
// (EncodePayload), so a delivery on its own says what was handed out and
// when it was due.
//
// # What Check proves, and why it is sound
//
// Check reports only what the recorded times prove whatever the real
// timing inside the servers was: each rule takes the bound of an
// operation's interval that is least favourable to a violation. Servers
// and test read the same clock (one machine); the only slack is the
// server's whole-millisecond time (CheckOptions.ClockTolerance, 1 ms).
//
//   - Lost: every add answered OK is delivered at least once, once the
//     run drained every queue. Excused: a job that a cancel may have
//     removed (one that returned 1, or whose outcome is Unknown), and an
//     at-most-once job (ack timeout 0) on a queue where a pop ended
//     Unknown, since that pop may have taken it unseen. An at-least-once
//     job taken by an unseen pop is not excused: its reservation expires
//     and it must come back.
//   - Early: a delivery's reply came before its due time. The payload's
//     due time is a lower bound of the server's (DELAY.ADD's due is
//     measured from when the server ran it, which is after Invoke), and
//     the server handed the job out before the reply arrived, so
//     Return < due - tolerance is proof.
//   - Double-reserved: a job handed out while an earlier delivery still
//     held it. The earlier reservation's deadline is at least Invoke
//     (whole ms, minus the tolerance) plus the ack timeout, so a later
//     delivery that returned before that bound is certainly inside it,
//     unless an ack or nack that may have taken effect between the two
//     ended it. When the two pops overlap in time either may have been
//     first, and both directions must hold. An ack timeout of 0 means the
//     first pop removed the job: any second delivery is one.
//   - Delivered after cancel / after ack: a pop sent after a cancel (or
//     ack) of the job returned 1: the job had been deleted.
//   - Phantom: a delivery of a job no add made (or only adds answered
//     Fail, which must mean no effect), or with a payload no add sent.
//   - A stopped slot move (CheckOptions.StoppedMoves) is the one place a
//     job may come back: a crash between the target group's commit of a
//     queue and the source's drop leaves a copy in each group until
//     redis-cli --cluster fix keeps one, so what the other group did to a
//     job meanwhile (an ack, a cancel, a pop) is undone. On the queues of
//     the slots the crash left open, a delivery that would break the
//     double-reserved, after-ack or after-cancel rule is excused when the
//     job can have been added again at one instant between the move's
//     start and the fix's end, after the op it seems to break: the same
//     instant for every delivery the move excuses, so a job comes back
//     once per move (Report.Comebacks) and then is judged as any job. A
//     second comeback is a violation, and nothing excuses a loss.
//
// # Linearizability
//
// CheckFIFO checks the sampled queues, where the workload keeps to delay
// 0, ACKTIMEOUT 0 and one id per add, so a queue is a FIFO and needs no
// clock in its model: add appends, pop takes the head or returns null,
// cancel removes and returns 1 or 0. Unknown calls return, for porcupine,
// after everything else: linearized at the end they change nothing anyone
// saw (never happened), or earlier as the late write. See model.go for the
// one server behaviour (a job put back when its popper has gone) that
// the sampled workload avoids provoking, and why.
//
// # Caveats
//
// A checker of histories proves violations, never their absence: a run
// with none says that this run, under these faults, found none. Check
// needs the run to end drained, or RuleLost reports jobs merely not yet
// delivered. Wall-clock steps (NTP) during a run would move the servers'
// time against the history's monotonic clock.
package chaos
