// Package worker is delayd's job library for Go: a Client that adds and
// manages jobs, and a Worker that runs handlers for them with the loop
// every delayd worker needs, written once. It owns that loop; the server
// owns the jobs.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"})
//	c := worker.NewClient(rdb)
//	c.Add(ctx, "emails", payload, worker.Delay(time.Hour), worker.AckTimeout(time.Minute), worker.Retry(5))
//
//	w := worker.New(rdb, worker.Options{Concurrency: 10})
//	w.HandleFunc("emails", send)
//	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
//	defer stop()
//	w.Run(ctx) // on SIGTERM: running jobs finish (30 s), then it returns
//
// # The loop
//
// Each queue has Concurrency slots. A fetch is one DELAY.MPOP for as many
// jobs as there are free slots, so no job waits unstarted in the worker;
// the DELAY.ACK of the jobs finished since the last fetch goes in the same
// write. A busy worker so pays one round trip for a batch of jobs and
// their acks; one that waits on an empty queue sends its acks on their own
// after a few ms (three fetch round trips, 2 to 20 ms). Fetches block for BlockTime (1 s), under the client's read
// timeout: go-redis cannot know that a command sent with Do blocks.
//
// # Batch mode
//
// HandleBatch takes a queue's jobs a fetch at a time: each fetch's jobs, up
// to BatchSize (64), go to one call of the batch handler on the goroutine that
// fetched them, and their acks go with the next fetch, sent as soon as the
// call returns. A job then costs no goroutine, slot or wake-up of its own,
// which is most of what a fast handler's job costs the worker; the price is
// that a batch waits for its slowest job. A BatchErrors return says which
// jobs failed; each is retried or acknowledged as a Handler's would be.
//
// A job still running after HeartbeatAfter (1 s) gets one DELAY.GET for its
// ack deadline, then a DELAY.TOUCH whenever a third of its ack timeout is
// left, until its handler returns. A handler's error (or panic, caught and
// logged with its stack) becomes DELAY.NACK with the Backoff's delay and
// the error's text as the job's failure reason; the job's RETRY and
// DEADLETTER, set by its producer, decide when it is dead-lettered. An
// error wrapping SkipRetry acknowledges the job instead.
//
// Failovers: UNBLOCKED, CLUSTERDOWN, TRYAGAIN, LOADING and connection
// errors end a fetch, which is sent again after 100 ms doubling to 2 s,
// logged once per outage; handlers never see them. A *redis.ClusterClient
// needs ClusterStateReloadInterval (ClusterOptions sets it).
//
// Delivery is at-least-once for jobs added with an ack timeout: a worker
// that dies mid-job leaves it reserved until its ack timeout, then it is
// delivered again. Handlers should be idempotent.
//
// docs/decisions/worker-library.md says why the loop is so.
package worker
