package finetimer

import (
	"runtime"
	"time"
)

// Pause is what a goroutine that holds its owner's lock in chunks (a log
// rewrite, a compaction) does between chunks, without the lock, on t (nil:
// no fine timer). Letting go of the lock is not enough: with one P
// (GOMAXPROCS 1, a server pinned to one CPU) the goroutines it wakes only
// run when the chunked goroutine blocks or is preempted, every 10 ms, and
// then most likely mid-chunk with the lock held, so a rewrite of 500k jobs
// stalled every client for 20-40 ms at a time.
//
// Nor is runtime.Gosched enough: it puts the caller behind every runnable
// goroutine, but the runtime polls the network (and the timerfd that fires
// due jobs) only when no goroutine is runnable, and a loop that only
// yields is always runnable: requests that arrived meanwhile waited for
// sysmon's poll, every 10-20 ms (a request on a socket against a loop of
// 100 µs chunks with a Gosched between them: p50 9-12 ms, p99 23-50 ms;
// with this pause 0.3 ms and 4.5 ms, as with no loop). So it sleeps
// PauseFor on a timerfd: the process goes idle, the poller hands out what
// came, and the timerfd, unlike the runtime's timer, ends the sleep on
// time. With no fine timer (tests, other systems) it only yields.
func Pause(t *Timer) {
	if t == nil {
		runtime.Gosched()
		return
	}
	t.Arm(PauseFor)
	<-t.C
}

// PauseFor is Pause's sleep: a fifth of a 100 µs chunk's work, what the
// chunked work gives up on an idle server.
const PauseFor = 20 * time.Microsecond

// Linger is what a commit leader does before it takes its batch while
// other clients write (journal.Env.Linger): a sleep of LingerFor on t,
// whose expiry the poller reports in the same poll as the connections
// whose requests came meanwhile, then a yield so that they run (and add to
// the batch) before the caller goes on. quit ends it early (the owner is
// closing: no expiry will be read).
func Linger(t *Timer, quit <-chan struct{}) {
	t.Arm(LingerFor)
	select {
	case <-t.C:
	case <-quit:
	}
	runtime.Gosched()
}

// LingerFor is Linger's sleep: short next to an fsync (0.5 to 2 ms on this
// project's machines), which the requests that join the batch would
// otherwise each wait for again. Its length matters little: what gathers
// the batch is the poll the expiry is read in (0, 20 and 50 µs gave the
// same batches).
const LingerFor = 20 * time.Microsecond
