package transfer

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// scanCount is the jobs one DELAY.SCAN page asks for: 1000 a round trip
// keeps a 1M-job queue to a thousand of them, and a page's time under the
// server's lock small.
const scanCount = 1000

// Export writes every job of the queues as JSON lines to out, queue by
// queue, and returns how many it wrote. Within a queue the ready jobs come
// first, in the order the queue hands them out, then the delayed and
// reserved ones: an import adds them in that order, so the ready jobs keep
// their order and a delayed job that has fallen due meanwhile joins the
// line behind them, as it would have on the first server. To write the
// ready jobs first while the scan meets them in any order, the others wait
// in a temporary file, not in memory.
func Export(ctx context.Context, c redis.UniversalClient, queues []string, out io.Writer, prog *Progress) (int64, error) {
	spool, err := os.CreateTemp("", "delayd-export-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	var n int64
	for _, q := range queues {
		k, err := exportQueue(ctx, c, q, w, spool, prog)
		n += k
		if err != nil {
			return n, fmt.Errorf("queue %q: %w", q, err)
		}
	}
	return n, w.Flush()
}

type readyJob struct {
	Job
	seq uint64
}

// exportQueue writes one queue's jobs: its ready ones from memory, sorted,
// then the rest from the spool.
func exportQueue(ctx context.Context, c redis.UniversalClient, q string, w *bufio.Writer, spool *os.File, prog *Progress) (int64, error) {
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	if err := spool.Truncate(0); err != nil {
		return 0, err
	}
	sw := bufio.NewWriterSize(spool, 1<<20)
	var ready []readyJob
	var n int64
	cursor := "0"
	for {
		v, err := c.Do(ctx, "DELAY.SCAN", q, cursor, "COUNT", scanCount).Slice()
		if err != nil {
			return n, err
		}
		if len(v) != 2 {
			return n, fmt.Errorf("DELAY.SCAN: a reply of %d elements", len(v))
		}
		cursor, _ = v[0].(string)
		page, _ := v[1].([]any)
		for _, raw := range page {
			j, seq, err := jobOf(q, raw)
			if err != nil {
				return n, err
			}
			if j.State == "ready" {
				ready = append(ready, readyJob{j, seq})
			} else if err := writeLine(sw, &j); err != nil {
				return n, err
			}
			n++
		}
		if prog != nil {
			prog.Jobs.Add(int64(len(page)))
		}
		if cursor == "0" || cursor == "" {
			break
		}
	}
	// The ready order is (due, add order) but for jobs pushed to the head
	// (LPUSH, a delivery handed back): docs/decisions/export-import.md.
	slices.SortStableFunc(ready, func(a, b readyJob) int { return cmp.Or(cmp.Compare(a.Due, b.Due), cmp.Compare(a.seq, b.seq)) })
	for i := range ready {
		if err := writeLine(w, &ready[i].Job); err != nil {
			return n, err
		}
	}
	if err := sw.Flush(); err != nil {
		return n, err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return n, err
	}
	_, err := io.Copy(w, spool)
	return n, err
}

// writeLine writes one job as a JSON line.
func writeLine(w *bufio.Writer, j *Job) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	w.Write(b)
	return w.WriteByte('\n')
}

// jobOf reads one job of a DELAY.SCAN page (a flat field-value array, or a
// map under RESP3) into a Job, with its add order.
func jobOf(queue string, raw any) (Job, uint64, error) {
	f := map[string]any{}
	switch v := raw.(type) {
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			k, _ := v[i].(string)
			f[k] = v[i+1]
		}
	case map[any]any:
		for k, x := range v {
			ks, _ := k.(string)
			f[ks] = x
		}
	default:
		return Job{}, 0, fmt.Errorf("DELAY.SCAN: a job of type %T", raw)
	}
	str := func(k string) string { s, _ := f[k].(string); return s }
	num := func(k string) int64 {
		switch x := f[k].(type) {
		case int64:
			return x
		case string:
			n, _ := strconv.ParseInt(x, 10, 64)
			return n
		}
		return 0
	}
	j := Job{Queue: queue, ID: str("id"), State: str("state"), Due: num("due"), Deliveries: uint32(num("deliveries")),
		AckDeadline: num("ack_deadline"), DeadLetter: str("deadletter"), Group: str("group"), Priority: int(num("priority")),
		Origin: str("origin"), OriginDeadLetter: str("origin_deadletter"), Error: str("error")}
	if j.ID == "" {
		return Job{}, 0, fmt.Errorf("DELAY.SCAN: a job without an id")
	}
	setPayload(&j, str("payload"))
	j.AckTimeout = noneIfZero(num("ack_timeout"))
	j.Retry = retryOf(num("retry"))
	if j.Origin != "" {
		j.OriginAckTimeout = noneIfZero(num("origin_ack_timeout"))
		j.OriginRetry = retryOf(num("origin_retry"))
	}
	return j, uint64(num("seq")), nil
}

// setPayload puts p where a line carries it: as text if it is UTF-8, else
// in base64.
func setPayload(j *Job, p string) {
	if utf8.ValidString(p) {
		j.Payload = p
	} else {
		j.PayloadBase64 = base64.StdEncoding.EncodeToString([]byte(p))
	}
}

// noneIfZero is a server's ack timeout as a line says it: 0 there (a pop
// removes the job) is -1 here, 0 being the default.
func noneIfZero(ms int64) int64 {
	if ms == 0 {
		return -1
	}
	return ms
}

// retryOf is a server's retry count as a line says it: -1 there
// (unlimited) is the default here, 0 (no redelivery) is -1.
func retryOf(n int64) int64 {
	switch n {
	case -1:
		return 0
	case 0:
		return -1
	}
	return n
}
