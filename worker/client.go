package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client adds and manages jobs: the producer's side, each method one
// delayd command with typed arguments.
type Client struct {
	rdb redis.UniversalClient
}

// NewClient returns a producer on rdb (a *redis.Client, or a
// *redis.ClusterClient made with ClusterOptions).
func NewClient(rdb redis.UniversalClient) *Client { return &Client{rdb: rdb} }

// An Option is one DELAY.ADD option.
type Option func(*addOptions)

type addOptions struct {
	at    time.Time
	delay time.Duration
	args  []any // name, value pairs; a nil value: a flag alone (REPLACE)
}

// Delay makes the job due d from now (the default is due now).
func Delay(d time.Duration) Option { return func(o *addOptions) { o.delay, o.at = d, time.Time{} } }

// At makes the job due at t (DELAY.ADDAT); a time past means ready now.
func At(t time.Time) Option { return func(o *addOptions) { o.at = t } }

// ID gives the job its id (1 to 256 bytes). Adding an id the queue holds
// changes nothing (Add returns ""), so a producer may send an add again
// after a lost reply.
func ID(id string) Option { return opt("ID", id) }

// Replace makes an add of an existing id replace the job: payload, time
// and options (options not given return to their defaults).
func Replace() Option { return func(o *addOptions) { o.args = append(o.args, "REPLACE", nil) } }

// AckTimeout reserves the job on each delivery for d: without an
// acknowledgement within d it is delivered again (at-least-once). Zero:
// a delivery removes the job (at-most-once). Without this option, the
// server's default.
func AckTimeout(d time.Duration) Option { return opt("ACKTIMEOUT", d.Milliseconds()) }

// Retry delivers the job at most n+1 times (0: once); default unlimited.
func Retry(n int) Option { return opt("RETRY", n) }

// DeadLetter names the queue the job goes to when its retries are spent.
func DeadLetter(queue string) Option { return opt("DEADLETTER", queue) }

// Unique keeps the id taken for ttl after the job is done, so a late
// retry of its add is still a no-op. Needs ID.
func Unique(ttl time.Duration) Option { return opt("UNIQUE", ttl.Milliseconds()) }

// Debounce makes an add of an id still delayed replace its payload and
// push its due time out, never past the first add's time plus maxWait.
// Needs ID.
func Debounce(maxWait time.Duration) Option { return opt("DEBOUNCE", maxWait.Milliseconds()) }

// Group puts the job in a group: ready jobs are handed out round-robin
// across groups, and DELAY.LIMIT GROUPCONCURRENCY bounds each group.
func Group(g string) Option { return opt("GROUP", g) }

// Priority orders ready jobs, 0 to 9, higher first (default 0).
func Priority(p int) Option { return opt("PRIORITY", p) }

func opt(name string, v any) Option {
	return func(o *addOptions) { o.args = append(o.args, name, v) }
}

// Add adds a job to queue and returns its id: the server's, or the one
// given with ID. With ID of a job the queue holds and no Replace it
// returns "" and nil: nothing changed.
//
//	id, err := c.Add(ctx, "emails", payload, worker.Delay(time.Hour), worker.AckTimeout(time.Minute), worker.Retry(5))
func (c *Client) Add(ctx context.Context, queue string, payload []byte, opts ...Option) (string, error) {
	var o addOptions
	for _, f := range opts {
		f(&o)
	}
	args := make([]any, 0, 4+len(o.args))
	if o.at.IsZero() {
		args = append(args, "DELAY.ADD", queue, max(0, o.delay.Milliseconds()), payload)
	} else {
		args = append(args, "DELAY.ADDAT", queue, o.at.UnixMilli(), payload)
	}
	for i := 0; i < len(o.args); i += 2 {
		args = append(args, o.args[i])
		if o.args[i+1] != nil {
			args = append(args, o.args[i+1])
		}
	}
	id, err := c.rdb.Do(ctx, args...).Text()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return id, err
}

// Cancel removes jobs by id, whatever their state, and returns how many
// existed.
func (c *Client) Cancel(ctx context.Context, queue string, ids ...string) (int64, error) {
	return c.rdb.Do(ctx, idArgs("DELAY.CANCEL", queue, ids)...).Int64()
}

// Reschedule moves a delayed or ready job to d from now, keeping its id,
// payload, options and deliveries; false if it is not delayed or ready.
func (c *Client) Reschedule(ctx context.Context, queue, id string, d time.Duration) (bool, error) {
	n, err := c.rdb.Do(ctx, "DELAY.RESCHEDULE", queue, id, max(0, d.Milliseconds())).Int64()
	return n == 1, err
}

// RescheduleAt is Reschedule to an absolute time.
func (c *Client) RescheduleAt(ctx context.Context, queue, id string, t time.Time) (bool, error) {
	n, err := c.rdb.Do(ctx, "DELAY.RESCHEDULEAT", queue, id, t.UnixMilli()).Int64()
	return n == 1, err
}

// Promote makes delayed jobs ready now and returns how many moved.
func (c *Client) Promote(ctx context.Context, queue string, ids ...string) (int64, error) {
	return c.rdb.Do(ctx, idArgs("DELAY.PROMOTE", queue, ids)...).Int64()
}

func idArgs(cmd, queue string, ids []string) []any {
	args := make([]any, 0, 2+len(ids))
	args = append(args, cmd, queue)
	for _, id := range ids {
		args = append(args, id)
	}
	return args
}

// JobInfo is DELAY.GET's view of a job.
type JobInfo struct {
	ID, Queue  string
	State      string // delayed, ready or reserved
	Due        time.Time
	Payload    []byte
	Deliveries int
	// AckDeadline is set while the job is reserved.
	AckDeadline time.Time
	Group       string
	Priority    int
	// Origin is the queue a dead-lettered job came from.
	Origin string
	// Error is the job's last failure reason (a NACK's ERROR text).
	Error string
}

// Get returns a job, or nil and nil when the queue has no such job.
func (c *Client) Get(ctx context.Context, queue, id string) (*JobInfo, error) {
	v, err := c.rdb.Do(ctx, "DELAY.GET", queue, id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := fields(v)
	if err != nil {
		return nil, err
	}
	j := &JobInfo{
		ID: str(f["id"]), Queue: str(f["queue"]), State: str(f["state"]),
		Due: time.UnixMilli(integer(f["due"])), Payload: []byte(str(f["payload"])),
		Deliveries: int(integer(f["deliveries"])), Group: str(f["group"]),
		Priority: int(integer(f["priority"])), Origin: str(f["origin"]), Error: str(f["error"]),
	}
	if f["ack_deadline"] != nil {
		j.AckDeadline = time.UnixMilli(integer(f["ack_deadline"]))
	}
	return j, nil
}

// QueueStats is DELAY.STATS: the queue's counts, and every field by name
// in All (counters such as acks and dead_lettered).
type QueueStats struct {
	Delayed, Ready, Reserved int64
	// Latency is how long the oldest ready job has waited since its due
	// time: the figure to scale workers on.
	Latency time.Duration
	All     map[string]int64
}

// Stats returns a queue's counts.
func (c *Client) Stats(ctx context.Context, queue string) (*QueueStats, error) {
	v, err := c.rdb.Do(ctx, "DELAY.STATS", queue).Result()
	if err != nil {
		return nil, err
	}
	f, err := fields(v)
	if err != nil {
		return nil, err
	}
	s := &QueueStats{All: make(map[string]int64, len(f))}
	for k, x := range f {
		s.All[k] = integer(x)
	}
	s.Delayed, s.Ready, s.Reserved = s.All["delayed"], s.All["ready"], s.All["reserved"]
	s.Latency = time.Duration(s.All["latency"]) * time.Millisecond
	return s, nil
}

// Schedule is when a recurring job fires (DELAY.SCHEDULE): Cron (five
// fields, or six with seconds, or @hourly and the like) in TZ, or Every.
type Schedule struct {
	Cron  string
	TZ    string // an IANA zone for Cron; default UTC
	Every time.Duration
	// Misfire: "skip" (default), "once" or "all": what happens to the
	// firings missed while the server was down.
	Misfire    string
	Start, End time.Time // zero: unbounded
}

// Schedule creates or replaces (by name) a recurring schedule of queue.
// Each firing adds a job with payload and id name:T, T the fire time in
// unix ms, so a firing repeated after a failover is the same job. opts may
// be AckTimeout, Retry and DeadLetter (the firings' jobs' options).
func (c *Client) Schedule(ctx context.Context, queue, name string, s Schedule, payload []byte, opts ...Option) error {
	args := []any{"DELAY.SCHEDULE", queue, name}
	switch {
	case s.Cron != "" && s.Every != 0:
		return errors.New("worker: a schedule has Cron or Every, not both")
	case s.Cron != "":
		args = append(args, "CRON", s.Cron)
		if s.TZ != "" {
			args = append(args, "TZ", s.TZ)
		}
	case s.Every > 0:
		args = append(args, "EVERY", s.Every.Milliseconds())
	default:
		return errors.New("worker: a schedule needs Cron or Every")
	}
	args = append(args, payload)
	var o addOptions
	for _, f := range opts {
		f(&o)
	}
	if !o.at.IsZero() || o.delay != 0 {
		return errors.New("worker: a schedule's jobs take AckTimeout, Retry and DeadLetter only")
	}
	for i := 0; i < len(o.args); i += 2 {
		switch o.args[i] {
		case "ACKTIMEOUT", "RETRY", "DEADLETTER":
		default:
			return fmt.Errorf("worker: a schedule's jobs take AckTimeout, Retry and DeadLetter only, not %v", o.args[i])
		}
	}
	args = append(args, o.args...)
	if s.Misfire != "" {
		args = append(args, "MISFIRE", s.Misfire)
	}
	if !s.Start.IsZero() {
		args = append(args, "START", s.Start.UnixMilli())
	}
	if !s.End.IsZero() {
		args = append(args, "END", s.End.UnixMilli())
	}
	return c.rdb.Do(ctx, args...).Err()
}

// Unschedule removes a schedule (the jobs it made stay); false if there
// was none.
func (c *Client) Unschedule(ctx context.Context, queue, name string) (bool, error) {
	n, err := c.rdb.Do(ctx, "DELAY.UNSCHEDULE", queue, name).Int64()
	return n == 1, err
}

// ScheduleInfo is one line of DELAY.SCHEDULES.
type ScheduleInfo struct {
	Queue, Name, Spec string
	Next, Last        time.Time // Last is zero before the first firing
	Fired             int64
	Misfire           string
}

// Schedules lists queue's schedules (every queue's with queue "").
func (c *Client) Schedules(ctx context.Context, queue string) ([]ScheduleInfo, error) {
	args := []any{"DELAY.SCHEDULES"}
	if queue != "" {
		args = append(args, queue)
	}
	v, err := c.rdb.Do(ctx, args...).Result()
	if err != nil {
		return nil, err
	}
	list, _ := v.([]any)
	out := make([]ScheduleInfo, 0, len(list))
	for _, e := range list {
		f, err := fields(e)
		if err != nil {
			return nil, err
		}
		s := ScheduleInfo{Queue: str(f["queue"]), Name: str(f["name"]), Spec: str(f["spec"]),
			Next: time.UnixMilli(integer(f["next"])), Fired: integer(f["fired"]), Misfire: str(f["misfire"])}
		if last := integer(f["last"]); last > 0 {
			s.Last = time.UnixMilli(last)
		}
		out = append(out, s)
	}
	return out, nil
}

// Limit sets a queue's flow limit (DELAY.LIMIT): jobs reserved at once
// over every worker (0: unset), and at most rate jobs handed out per
// window (rate 0: unset).
func (c *Client) Limit(ctx context.Context, queue string, concurrency, rate int, window time.Duration) error {
	args := []any{"DELAY.LIMIT", queue}
	if concurrency > 0 {
		args = append(args, "CONCURRENCY", concurrency)
	}
	if rate > 0 {
		args = append(args, "RATE", rate, strconv.FormatInt(window.Milliseconds(), 10))
	}
	if len(args) == 2 {
		args = append(args, "OFF")
	}
	return c.rdb.Do(ctx, args...).Err()
}
