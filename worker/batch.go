package worker

import (
	"context"
	"errors"
	"time"
)

// batchLoop is fetchLoop for a BatchHandler: fetch up to BatchSize jobs
// (with the last batch's acks in the same write), run them in one call on
// this goroutine, fetch again. A job costs no goroutine, slot or wake-up of
// its own; the batch is one task for the heartbeat and the stop.
func (r *runner) batchLoop() {
	// The last batch's acks go alone once no fetch will carry them; the
	// stop's final flush waits for every queue's handlers.
	defer signal(r.ackWake)
	// Never cancelled, as fetchLoop's.
	ctx := context.Background()
	failures := 0
	for {
		r.mu.Lock()
		select {
		case <-r.w.stopFetch:
			r.mu.Unlock()
			return
		default:
		}
		r.fetching = true
		acks := r.acks
		r.acks = nil
		r.mu.Unlock()

		jobs, err := r.fetch(ctx, acks, r.w.opt.BatchSize)
		var t *task
		r.mu.Lock()
		r.fetching = false
		if len(jobs) > 0 {
			// Not abandoned: the stop gives back only after waitFetch.
			t = &task{jobs: jobs, taken: r.w.clk.Now()}
			r.running[t] = struct{}{}
			r.w.tasks.Add(1)
		}
		r.mu.Unlock()
		r.fetched.Broadcast()
		if t != nil {
			r.runBatch(t)
		}
		if err == nil {
			if failures > 0 {
				r.log.Info("delayd: fetching again", "failures", failures)
				failures = 0
			}
			continue
		}
		r.qm.add(fetchErrors, 1)
		if failures == 0 {
			r.log.Warn("delayd: DELAY.MPOP failed; retrying", "err", err)
		}
		failures++
		select {
		case <-time.After(min(retryFirst<<min(failures-1, 5), retryMax)):
		case <-r.w.stopFetch:
			return
		}
	}
}

// waitFetch returns once batchLoop has no fetch in flight and will send no
// other: the stop's wait for fetches, which cannot wait for the loop
// itself, as it may be running a batch past the stop's deadline.
func (r *runner) waitFetch() {
	r.mu.Lock()
	for r.fetching {
		r.fetched.Wait()
	}
	r.mu.Unlock()
}

// runBatch runs a batch's handler and settles each job; the acks wait for
// batchLoop's next fetch, which follows at once (or for the stop's flush).
func (r *runner) runBatch(t *task) {
	err := r.timed(t, func() error { return r.callBatch(t.jobs) })
	if !t.finish() {
		return // given back at the stop's deadline
	}
	defer r.w.tasks.Done()
	if err == nil {
		r.qm.add(processed, len(t.jobs))
		r.mu.Lock()
		delete(r.running, t)
		for _, job := range t.jobs {
			r.acks = append(r.acks, job.ackArg())
		}
		r.mu.Unlock()
		return
	}
	var each BatchErrors
	if errors.As(err, &each) && len(each) != len(t.jobs) {
		r.log.Error("delayd: a batch handler's BatchErrors does not match its jobs; all failed", "jobs", len(t.jobs), "errors", len(each))
		each = nil
	}
	acks := make([]any, 0, len(t.jobs))
	for i, job := range t.jobs {
		jerr := err
		if each != nil {
			jerr = each[i]
		}
		if r.end(job, jerr) {
			acks = append(acks, job.ackArg())
		}
	}
	r.mu.Lock()
	delete(r.running, t)
	r.acks = append(r.acks, acks...)
	r.mu.Unlock()
}

// callBatch runs the batch handler, a panic turned into a PanicError for
// every job of the batch.
func (r *runner) callBatch(jobs []*Job) (err error) {
	defer r.recover(jobs[0].ID, &err)
	return r.batch.ProcessBatch(r.w.handlerCtx, jobs)
}
