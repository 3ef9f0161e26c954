package fromredis

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/transfer"
)

// Options say where to read and what.
type Options struct {
	URL    string   // redis://[user:pass@]host:port[/db], rediss:// for TLS
	Format string   // asynq, bullmq, sidekiq or zset
	Queues []string // the library's queue names (the zset format: key names); empty: every queue found
	Prefix string   // the library's key prefix where it has one (BullMQ "bull", Sidekiq's namespace); "" for its default

	// After leaves the jobs due before it (unix ms) to the old system: the
	// first pass of a cut-over (docs/operations.md). 0 reads them all.
	After int64
	// Raw makes a job's payload the library's payload alone (asynq's
	// payload bytes, BullMQ's data) instead of an envelope that also names
	// the task type. Sidekiq's and zset's payloads are the same either way.
	Raw bool
	// ScoreUnit is the zset format's unit of scores: "ms" (the default) or
	// "s" (fractions kept to the ms).
	ScoreUnit string
	// PageSize is how many entries one round trip reads (default 1000).
	PageSize int
}

// noRetry is transfer.Job's Retry for "no redelivery" (DELAY.ADD's RETRY
// 0); a Retry of 0 asks for the server's default, unlimited.
const noRetry = -1

// Report counts what Read did.
type Report struct {
	Read    int64            // jobs handed to emit
	Skipped int64            // entries that were not jobs that could be moved
	Reasons map[string]int64 // why entries were skipped, by reason
	Queues  map[string]int64 // jobs handed to emit, by delayd queue
}

// The reasons of Report.Reasons that every format may give.
const (
	ReasonGone      = "gone before it was read: the old system ran, moved or deleted it"
	ReasonBeforeCut = "due before --after: left to the old system"
	ReasonLongID    = "an id longer than delayd's 256 bytes"
)

// maxID is the longest id delayd takes (docs/decisions/ids.md).
const maxID = 256

var errOptions = errors.New("fromredis: bad options")

func (o *Options) validate() error {
	switch o.Format {
	case "asynq", "bullmq", "sidekiq":
	case "zset":
		if len(o.Queues) == 0 {
			return fmt.Errorf("%w: the zset format reads the sorted sets named, and none was", errOptions)
		}
	default:
		return fmt.Errorf("%w: format %q: want asynq, bullmq, sidekiq or zset", errOptions, o.Format)
	}
	switch o.ScoreUnit {
	case "":
		o.ScoreUnit = "ms"
	case "ms", "s":
	default:
		return fmt.Errorf("%w: score unit %q: want ms or s", errOptions, o.ScoreUnit)
	}
	if o.PageSize <= 0 {
		o.PageSize = 1000
	}
	return nil
}

// A format knows one library's layout: which sorted sets hold its delayed
// jobs and how an entry of them becomes a job.
type format interface {
	// sets returns the sorted sets to read, in groups: the sets of one
	// group are read as one stream in due order (asynq's scheduled and
	// retry sets of one queue), so a queue's jobs reach emit in due order.
	sets(ctx context.Context, rdb *redis.Client, o *Options) ([][]set, error)
	// jobs turns entries into jobs, reading what it needs of their job
	// hashes in one pipeline; add takes a job, skip an entry left.
	jobs(ctx context.Context, rdb *redis.Client, o *Options, batch []item, add func(transfer.Job), skip func(reason string)) error
}

// set is one sorted set of a library.
type set struct {
	key   string
	queue string // the library's queue it belongs to; "" where each entry names its own (Sidekiq)
}

// item is an entry with the set it came from.
type item struct {
	entry
	set *set
}

// Read reads every delayed job of the library's layout and calls emit for
// each, in due order within a queue. It stops at the first error of emit.
//
// It only reads, so it may run while the old system runs: it reads each
// set in pages up to a snapshot of its end (see pager). A job that stays
// in its set is read once; one the old system takes meanwhile is read or
// not; one it moves from set to set (asynq's scheduled to retry) may be
// read in both, under its one id, and delayd keeps the first. Run again,
// it reads the same jobs with the same ids, which delayd's ID option makes
// harmless.
func Read(ctx context.Context, opts Options, emit func(transfer.Job) error) (Report, error) {
	rep := Report{Reasons: map[string]int64{}, Queues: map[string]int64{}}
	if err := opts.validate(); err != nil {
		return rep, err
	}
	var f format
	switch opts.Format {
	case "asynq":
		f = asynqFormat{}
	case "bullmq":
		f = bullmqFormat{}
	case "sidekiq":
		f = sidekiqFormat{}
	case "zset":
		f = zsetFormat{}
	}
	ropts, err := redis.ParseURL(opts.URL)
	if err != nil {
		return rep, fmt.Errorf("%w: %v", errOptions, err)
	}
	// RESP2, where a score comes as the text Redis wrote (17 significant
	// digits, exact), which the pager gives back to Redis as a bound.
	ropts.Protocol = 2
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	groups, err := f.sets(ctx, rdb, &opts)
	if err != nil {
		return rep, err
	}
	skip := func(reason string) {
		rep.Skipped++
		rep.Reasons[reason]++
	}
	// One goroutine reads ahead, pages and job hashes, while this one
	// hands the jobs of the page before to emit: the old Redis and the
	// caller's writes to delayd wait on each other only when one of them
	// is two pages behind.
	ctx, cancel := context.WithCancel(ctx)
	pages := make(chan readPage, 2)
	defer func() {
		cancel()
		for range pages { // until the reader has stopped, before rdb.Close
		}
	}()
	go readAhead(ctx, rdb, f, &opts, groups, pages)
	for p := range pages {
		if p.err != nil {
			return rep, p.err
		}
		for _, r := range p.skips {
			skip(r)
		}
		for _, j := range p.jobs {
			if j.Due < opts.After {
				skip(ReasonBeforeCut)
				continue
			}
			if len(j.ID) > maxID {
				skip(ReasonLongID)
				continue
			}
			if err := emit(j); err != nil {
				return rep, err
			}
			rep.Read++
			rep.Queues[j.Queue]++
		}
	}
	return rep, nil
}

// readPage is what readAhead made of one page: its jobs, the reasons of
// the entries it skipped, or the error that ended the read.
type readPage struct {
	jobs  []transfer.Job
	skips []string
	err   error
}

// readAhead reads every group's sets page by page into out, and closes it
// at the end, after an error, or once ctx is done.
func readAhead(ctx context.Context, rdb *redis.Client, f format, opts *Options, groups [][]set, out chan<- readPage) {
	defer close(out)
	send := func(p readPage) bool {
		select {
		case out <- p:
			return p.err == nil
		case <-ctx.Done():
			return false
		}
	}
	batch := make([]item, 0, opts.PageSize)
	for _, g := range groups {
		s := newStream(rdb, g, opts.PageSize)
		for {
			batch = batch[:0]
			for len(batch) < opts.PageSize {
				it, ok, err := s.next(ctx)
				if err != nil {
					send(readPage{err: err})
					return
				}
				if !ok {
					break
				}
				batch = append(batch, it)
			}
			if len(batch) == 0 {
				break
			}
			p := readPage{jobs: make([]transfer.Job, 0, len(batch))}
			err := f.jobs(ctx, rdb, opts, batch,
				func(j transfer.Job) { p.jobs = append(p.jobs, j) },
				func(r string) { p.skips = append(p.skips, r) })
			if err != nil {
				p = readPage{err: err}
			}
			if !send(p) {
				return
			}
		}
	}
}

// stream reads the sets of one group as one sequence in (score, member)
// order, a page of each at a time.
type stream struct {
	sets   []set
	pagers []*pager
	bufs   [][]entry
}

func newStream(rdb *redis.Client, sets []set, size int) *stream {
	s := &stream{sets: sets, bufs: make([][]entry, len(sets))}
	for _, st := range sets {
		s.pagers = append(s.pagers, newPager(rdb, st.key, size))
	}
	return s
}

func (s *stream) next(ctx context.Context) (item, bool, error) {
	best := -1
	for i, p := range s.pagers {
		if len(s.bufs[i]) == 0 && !p.done {
			page, err := p.next(ctx)
			if err != nil {
				return item{}, false, err
			}
			s.bufs[i] = page
		}
		if len(s.bufs[i]) > 0 && (best < 0 || less(s.bufs[i][0], s.bufs[best][0])) {
			best = i
		}
	}
	if best < 0 {
		return item{}, false, nil
	}
	e := s.bufs[best][0]
	s.bufs[best] = s.bufs[best][1:]
	return item{entry: e, set: &s.sets[best]}, true, nil
}

// setPayload puts p in j as the Job contract says: as text when it is
// UTF-8, else in base64.
func setPayload(j *transfer.Job, p []byte) {
	if utf8.Valid(p) {
		j.Payload = string(p)
	} else {
		j.PayloadBase64 = base64.StdEncoding.EncodeToString(p)
	}
}

// ms turns a score in unit (ms per unit) into unix ms, rounded to the
// nearest: a float of seconds holds µs, and delayd keeps ms.
func ms(score float64, unit float64) int64 { return int64(math.Round(score * unit)) }

// queuesOf returns the names asked for, or else found, sorted so that a
// rerun reads in the same order.
func queuesOf(asked, found []string) []string {
	if len(asked) > 0 {
		return asked
	}
	slices.Sort(found)
	return slices.Compact(found)
}
