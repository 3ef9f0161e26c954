package transfer

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// An import sends DELAY.IMPORT commands in batches of batchSize, each batch
// split over workers pipelines by queue name, so that one queue's jobs go
// down one connection in the order read (a queue's ready order is the
// order its jobs are imported in) while other queues' go in parallel. A
// batch is done when every command of it has its reply; the next starts
// then, so the lines of all done batches are the resume point.
const (
	batchSize = 4096
	workers   = 4
)

// Counts are what an import did, line by line (or job by job for a reader
// of another system).
type Counts struct {
	Read    int64            // jobs handed to the importer (lines after --skip)
	Added   int64            // written
	Existed int64            // the queue held that id already: nothing changed
	Failed  int64            // refused by the server, or not a job
	Reasons map[string]int64 // why, by the server's error line (or the line's fault)
}

// String is the final count line.
func (c Counts) String() string {
	s := fmt.Sprintf("read %d, added %d, already there %d, failed %d", c.Read, c.Added, c.Existed, c.Failed)
	if len(c.Reasons) > 0 {
		var rs []string
		for _, r := range slices.Sorted(maps.Keys(c.Reasons)) {
			rs = append(rs, fmt.Sprintf("%s: %d", r, c.Reasons[r]))
		}
		s += " (" + strings.Join(rs, "; ") + ")"
	}
	return s
}

// item is one job to send: its command, or why it cannot be.
type item struct {
	queue string
	args  []any
	fault string // not a job: counted failed, never sent
}

// Importer writes jobs to a server through DELAY.IMPORT, pipelined. Add
// jobs in order, then Close. Adds may come from several goroutines (a
// reader of another system may read queues in parallel); the jobs of a
// queue keep the order in which they were added.
type Importer struct {
	c    redis.UniversalClient
	prog *Progress
	seed maphash.Seed

	bmu   sync.Mutex // guards batch, and the order of batches into ch
	batch []item
	ch    chan []item
	quit  chan struct{} // closed when the sender has stopped
	err   error         // the sender's, once quit is closed
	done  atomic.Int64  // items of the batches done, from the first Add

	mu     sync.Mutex
	counts Counts
}

// NewImporter starts an importer writing to c; prog, if not nil, counts the
// jobs done.
func NewImporter(ctx context.Context, c redis.UniversalClient, prog *Progress) *Importer {
	im := &Importer{c: c, prog: prog, seed: maphash.MakeSeed(), ch: make(chan []item, 2),
		quit: make(chan struct{}), counts: Counts{Reasons: map[string]int64{}}}
	go im.send(ctx)
	return im
}

// Add queues one job; it fails only once the importer has stopped (the
// server went away, or ctx ended), with the reason.
func (im *Importer) Add(j Job) error {
	args, fault := importArgs(&j)
	return im.add(item{queue: j.Queue, args: args, fault: fault})
}

// Fault counts an input that is not a job (a line that is not one) as
// failed, in its place in the order, for the resume point.
func (im *Importer) Fault(why string) error { return im.add(item{fault: why}) }

func (im *Importer) add(it item) error {
	im.bmu.Lock()
	defer im.bmu.Unlock()
	select {
	case <-im.quit:
		return im.err
	default:
	}
	im.batch = append(im.batch, it)
	if len(im.batch) < batchSize {
		return nil
	}
	return im.flush()
}

func (im *Importer) flush() error {
	if len(im.batch) == 0 {
		return nil
	}
	select {
	case im.ch <- im.batch:
		im.batch = make([]item, 0, batchSize)
		return nil
	case <-im.quit:
		return im.err
	}
}

// Close sends what is left and waits for every reply.
func (im *Importer) Close() error {
	im.bmu.Lock()
	defer im.bmu.Unlock()
	err := im.flush()
	close(im.ch)
	<-im.quit
	return cmp.Or(err, im.err)
}

// Done is how many jobs (and faults) were handed to Add whose batch is
// done: an import that stopped goes on from there with --skip.
func (im *Importer) Done() int64 { return im.done.Load() }

// Counts returns what the import did so far.
func (im *Importer) Counts() Counts {
	im.mu.Lock()
	defer im.mu.Unlock()
	c := im.counts
	c.Reasons = maps.Clone(c.Reasons)
	return c
}

// send is the sender: one batch at a time, each split over workers.
func (im *Importer) send(ctx context.Context) {
	defer close(im.quit)
	for b := range im.ch {
		if im.err != nil {
			continue // drain: Add and Close see quit
		}
		if err := ctx.Err(); err != nil {
			im.err = err
			continue
		}
		if err := im.sendBatch(ctx, b); err != nil {
			im.err = err
			continue
		}
		im.done.Add(int64(len(b)))
		if im.prog != nil {
			im.prog.Jobs.Add(int64(len(b)))
		}
	}
}

func (im *Importer) sendBatch(ctx context.Context, b []item) error {
	var parts [workers][]item
	for _, it := range b {
		k := maphash.String(im.seed, it.queue) % workers
		parts[k] = append(parts[k], it)
	}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for k := range parts {
		if len(parts[k]) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = im.sendPart(ctx, parts[k])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sendPart pipelines one worker's share of a batch and counts the replies.
// An error that is not the server's reply to a command (the connection
// broke) stops the import: what was sent may or may not be written, which a
// rerun settles, as the import is idempotent.
func (im *Importer) sendPart(ctx context.Context, part []item) error {
	pipe := im.c.Pipeline()
	cmds := make([]*redis.Cmd, len(part))
	for i, it := range part {
		if it.fault == "" {
			cmds[i] = pipe.Do(ctx, it.args...)
		}
	}
	if pipe.Len() > 0 {
		pipe.Exec(ctx) // each command's error is its own, below
	}
	var c Counts
	c.Reasons = map[string]int64{}
	for i, it := range part {
		c.Read++
		if it.fault != "" {
			c.Failed++
			c.Reasons[it.fault]++
			continue
		}
		err := cmds[i].Err()
		var rerr redis.Error
		switch {
		case err == nil:
			c.Added++
		case errors.Is(err, redis.Nil):
			c.Existed++
		case errors.As(err, &rerr):
			c.Failed++
			c.Reasons[reasonOf(rerr.Error())]++
		default:
			return err
		}
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	im.counts.Read += c.Read
	im.counts.Added += c.Added
	im.counts.Existed += c.Existed
	im.counts.Failed += c.Failed
	for r, n := range c.Reasons {
		im.counts.Reasons[r] += n
	}
	return nil
}

// reasonOf is a server error as a reason to count under: short enough to
// group by.
func reasonOf(line string) string {
	if len(line) > 100 {
		line = line[:100] + "..."
	}
	return line
}

// importArgs is the DELAY.IMPORT of a job, or why the job cannot be one. A
// reserved job becomes a delayed one due at its ack deadline, its
// deliveries kept: its reservation belongs to a worker of the other server,
// and on this one it comes back when that reservation would have ended
// (docs/decisions/export-import.md).
func importArgs(j *Job) ([]any, string) {
	switch {
	case j.Queue == "":
		return nil, "no queue"
	case j.ID == "":
		return nil, "no id"
	case j.Payload != "" && j.PayloadBase64 != "":
		return nil, "both payload and payload_base64"
	}
	payload := j.Payload
	if j.PayloadBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(j.PayloadBase64)
		if err != nil {
			return nil, "payload_base64 is not base64"
		}
		payload = string(b)
	}
	due := j.Due
	if j.State == "reserved" && j.AckDeadline > 0 {
		due = j.AckDeadline
	}
	if due < 0 {
		return nil, "negative due time"
	}
	args := []any{"DELAY.IMPORT", j.Queue, j.ID, strconv.FormatInt(due, 10), payload}
	if j.AckTimeout != 0 {
		args = append(args, "ACKTIMEOUT", serverValue(j.AckTimeout))
	}
	if j.Retry != 0 {
		args = append(args, "RETRY", serverValue(j.Retry))
	}
	if j.DeadLetter != "" {
		args = append(args, "DEADLETTER", j.DeadLetter)
	}
	if j.Group != "" {
		args = append(args, "GROUP", j.Group)
	}
	if j.Priority != 0 {
		args = append(args, "PRIORITY", strconv.Itoa(j.Priority))
	}
	if j.Deliveries != 0 {
		args = append(args, "DELIVERIES", strconv.FormatUint(uint64(j.Deliveries), 10))
	}
	if j.Origin != "" {
		ack, retry := "-1", "-1" // the default, unlimited
		if j.OriginAckTimeout != 0 {
			ack = serverValue(j.OriginAckTimeout)
		}
		if j.OriginRetry != 0 {
			retry = serverValue(j.OriginRetry)
		}
		args = append(args, "ORIGIN", j.Origin, ack, retry, j.OriginDeadLetter)
	}
	if j.Error != "" {
		args = append(args, "ERROR", j.Error)
	}
	return args, ""
}

// serverValue is a line's ack timeout or retry count as the server takes
// it: -1 (none) is 0 there.
func serverValue(n int64) string {
	if n < 0 {
		return "0"
	}
	return strconv.FormatInt(n, 10)
}

// ReadLines reads JSON lines from r, skips the first skip of them (an
// earlier run's resume point), and hands each other to im in order; a line
// that is not a job is counted failed. It counts the bytes it read in
// prog, for the bar of a file of known size. It stops at the end of r, or
// when im stops.
func ReadLines(r io.Reader, skip int64, im *Importer, prog *Progress) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var n int64 // job lines seen: blank ones are not counted
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer (a large payload): gather it.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if prog != nil {
			prog.Bytes.Add(int64(len(line)))
		}
		if len(bytes.TrimSpace(line)) > 0 {
			if n >= skip {
				var j Job
				if json.Unmarshal(line, &j) != nil {
					err = cmp.Or(im.Fault("not a JSON job line"), err)
				} else {
					err = cmp.Or(im.Add(j), err)
				}
			}
			n++
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
