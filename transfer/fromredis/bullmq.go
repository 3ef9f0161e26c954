package fromredis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/transfer"
)

// bullmqFormat reads BullMQ's layout (taskforcesh/bullmq, checked against
// 6.7.0, the version bench/rivals/bullmq locks; Bull 3 keeps the same
// delayed set): a queue q under prefix p ("bull") keeps its delayed jobs,
// retries with backoff included, in the sorted set p:q:delayed, member the
// job id, score the due unix ms times 4096 plus a counter that orders the
// jobs of one ms (commands/includes/getDelayedScore.lua); the job is the
// hash p:q:<id> with name, data (JSON), opts (JSON), atm (attempts made),
// rjk (a job scheduler's key) and parentKey (a flow's parent).
type bullmqFormat struct{}

// Why BullMQ jobs are skipped.
const (
	reasonBullRepeat = "bullmq: a repeatable job (a job scheduler's next run): its schedule stays in BullMQ; make it a delayd schedule"
	reasonBullChild  = "bullmq: a flow's child: its parent waits in BullMQ for it"
)

// bullmqScoreShift is getDelayedScore's 0x1000: score = due ms << 12 | n.
const bullmqScoreShift = 4096

func (bullmqFormat) sets(ctx context.Context, rdb *redis.Client, o *Options) ([][]set, error) {
	prefix := bullmqPrefix(o)
	var found []string
	if len(o.Queues) == 0 {
		// BullMQ keeps no list of its queues: a queue is the keys under
		// its name. SCAN is O(keys) in all, in steps that never block the
		// server for long.
		iter := rdb.ScanType(ctx, 0, prefix+":*:delayed", 10000, "zset").Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			found = append(found, k[len(prefix)+1:len(k)-len(":delayed")])
		}
		if err := iter.Err(); err != nil {
			return nil, fmt.Errorf("fromredis: finding BullMQ's queues: %w", err)
		}
	}
	var groups [][]set
	for _, q := range queuesOf(o.Queues, found) {
		groups = append(groups, []set{{key: prefix + ":" + q + ":delayed", queue: q}})
	}
	return groups, nil
}

func bullmqPrefix(o *Options) string {
	if o.Prefix == "" {
		return "bull"
	}
	return o.Prefix
}

func (bullmqFormat) jobs(ctx context.Context, rdb *redis.Client, o *Options, batch []item, add func(transfer.Job), skip func(string)) error {
	prefix := bullmqPrefix(o)
	cmds := make([]*redis.SliceCmd, len(batch))
	pipe := rdb.Pipeline()
	for i, it := range batch {
		cmds[i] = pipe.HMGet(ctx, prefix+":"+it.set.queue+":"+it.member, "name", "data", "opts", "atm", "rjk", "parentKey", "failedReason")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("fromredis: BullMQ's jobs: %w", err)
	}
	for i, it := range batch {
		v := cmds[i].Val()
		str := func(k int) string { s, _ := v[k].(string); return s }
		name, data, opts, atm, rjk, parent, failed := str(0), str(1), str(2), str(3), str(4), str(5), str(6)
		if v[0] == nil && v[1] == nil && v[2] == nil {
			skip(ReasonGone)
			continue
		}
		if rjk != "" || strings.HasPrefix(it.member, "repeat:") {
			skip(reasonBullRepeat)
			continue
		}
		if parent != "" {
			skip(reasonBullChild)
			continue
		}
		j := transfer.Job{
			Queue: it.set.queue,
			ID:    it.member,
			Due:   int64(math.Floor(it.value / bullmqScoreShift)),
			Error: failed,
		}
		// attempts counts every run, the first too (0 or absent: one run,
		// BullMQ's default); delayd's RETRY counts the runs after the first.
		j.Retry = retryOf(bullmqAttempts(opts) - 1)
		if n, err := strconv.ParseUint(atm, 10, 32); err == nil {
			j.Deliveries = uint32(n)
		}
		if o.Raw {
			j.Payload = data // BullMQ's data is JSON, so text
		} else {
			setPayload(&j, bullmqEnvelope(name, data))
		}
		add(j)
	}
	return nil
}

// bullmqEnvelope is the payload a worker gets in place of BullMQ's Job:
// its name, which a BullMQ processor switches on, and its data as BullMQ
// stored it (JSON).
//
//	{"name":"email:send","data":{"to":"a@b.c"}}
//
// It is written by hand, not by json.Marshal, which would compact the data
// a second time after json.Valid: a fifth of the reader's CPU at 1M jobs.
func bullmqEnvelope(name, data string) []byte {
	b := make([]byte, 0, len(name)+len(data)+20)
	b = append(b, `{"name":`...)
	b = appendJSONString(b, name)
	switch {
	case json.Valid([]byte(data)):
		b = append(b, `,"data":`...)
		b = append(b, data...)
	case data != "":
		// Not written by BullMQ's Queue.add (it stringifies); kept as a
		// JSON string rather than lost.
		b = append(b, `,"data":`...)
		b = appendJSONString(b, data)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// bullmqAttempts is opts.attempts, found without decoding the whole of
// opts (stack traces of earlier failures aside, opts is the biggest field
// read); nested objects of opts (backoff, repeat) have no such key.
func bullmqAttempts(opts string) int64 {
	i := strings.Index(opts, `"attempts":`)
	if i < 0 {
		return 0
	}
	rest := opts[i+len(`"attempts":`):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	a, err := strconv.ParseInt(rest[:n], 10, 64)
	if err != nil {
		return 0
	}
	return a
}
