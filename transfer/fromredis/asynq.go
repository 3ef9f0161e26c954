package fromredis

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/delayd/delayd/transfer"
)

// asynqFormat reads asynq's layout (hibiken/asynq internal/base/base.go,
// the same since v0.18): the set asynq:queues names the queues; each
// queue q keeps its delayed tasks in the sorted sets asynq:{q}:scheduled
// (ProcessAt, ProcessIn) and asynq:{q}:retry (failed, waiting to run
// again), member the task id, score the unix second it runs; the task
// itself is the hash asynq:{q}:t:<id>, whose field msg is a protobuf
// TaskMessage (internal/proto/asynq.proto) and field state its state.
type asynqFormat struct{}

// Why asynq tasks are skipped.
const (
	reasonAsynqMoved = "asynq: no longer scheduled or retry when read: the old system took it"
	reasonAsynqBad   = "asynq: msg is not a TaskMessage"
)

func (asynqFormat) sets(ctx context.Context, rdb *redis.Client, o *Options) ([][]set, error) {
	found, err := rdb.SMembers(ctx, "asynq:queues").Result()
	if err != nil {
		return nil, fmt.Errorf("fromredis: asynq's queues: %w", err)
	}
	var groups [][]set
	for _, q := range queuesOf(o.Queues, found) {
		p := "asynq:{" + q + "}:"
		groups = append(groups, []set{{key: p + "scheduled", queue: q}, {key: p + "retry", queue: q}})
	}
	return groups, nil
}

func (asynqFormat) jobs(ctx context.Context, rdb *redis.Client, o *Options, batch []item, add func(transfer.Job), skip func(string)) error {
	cmds := make([]*redis.SliceCmd, len(batch))
	pipe := rdb.Pipeline()
	for i, it := range batch {
		cmds[i] = pipe.HMGet(ctx, "asynq:{"+it.set.queue+"}:t:"+it.member, "msg", "state")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("fromredis: asynq's tasks: %w", err)
	}
	for i, it := range batch {
		v := cmds[i].Val()
		msg, _ := v[0].(string)
		state, _ := v[1].(string)
		if msg == "" {
			skip(ReasonGone)
			continue
		}
		if state != "scheduled" && state != "retry" {
			skip(reasonAsynqMoved)
			continue
		}
		t, err := decodeTaskMessage([]byte(msg))
		if err != nil || t.id != it.member {
			skip(reasonAsynqBad)
			continue
		}
		j := transfer.Job{
			Queue:      it.set.queue,
			ID:         t.id,
			Due:        ms(it.value, 1000),
			Retry:      retryOf(int64(t.retry)),
			Deliveries: uint32(max(t.retried, 0)),
			Error:      t.errorMsg,
		}
		if t.timeout > 0 {
			j.AckTimeout = t.timeout * 1000
		}
		if o.Raw {
			setPayload(&j, t.payload)
		} else {
			setPayload(&j, asynqEnvelope(t))
		}
		add(j)
	}
	return nil
}

// retryOf is a library's count of runs after the first as a Job's Retry,
// where 0 is the server's default (unlimited) and not "none".
func retryOf(n int64) int64 {
	if n <= 0 {
		return noRetry
	}
	return n
}

// asynqEnvelope is the payload a worker gets in place of asynq's Task: its
// type, which asynq's ServeMux routes on, and its payload, inline when it
// is JSON (as most are), else in base64.
//
//	{"type":"email:send","payload":{"to":"a@b.c"}}
//	{"type":"img:resize","payload_base64":"CgRmb28=","headers":{"k":"v"}}
func asynqEnvelope(t taskMessage) []byte {
	b := make([]byte, 0, len(t.typ)+len(t.payload)+24)
	b = append(b, `{"type":`...)
	b = appendJSONString(b, t.typ)
	switch {
	case len(t.payload) == 0:
	case json.Valid(t.payload):
		b = append(b, `,"payload":`...)
		b = append(b, t.payload...)
	default:
		b = append(b, `,"payload_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, t.payload)
		b = append(b, '"')
	}
	if len(t.headers) > 0 {
		h, _ := json.Marshal(t.headers) // strings always marshal
		b = append(b, `,"headers":`...)
		b = append(b, h...)
	}
	return append(b, '}')
}

// taskMessage is what delayd takes of asynq's TaskMessage.
type taskMessage struct {
	typ      string
	payload  []byte
	headers  map[string]string
	id       string
	queue    string
	retry    int32
	retried  int32
	errorMsg string
	timeout  int64 // seconds
}

// The field numbers of asynq.proto's TaskMessage.
const (
	tmType     = 1
	tmPayload  = 2
	tmID       = 3
	tmQueue    = 4
	tmRetry    = 5
	tmRetried  = 6
	tmErrorMsg = 7
	tmTimeout  = 8
	tmHeaders  = 15
)

var errTaskMessage = errors.New("fromredis: not an asynq TaskMessage")

// decodeTaskMessage reads a TaskMessage with protowire, field by field, so
// that delayd need not import asynq (nor its generated code) for the few
// fields it takes; the others are passed over, whatever their number, as
// protobuf says a reader must.
func decodeTaskMessage(b []byte) (taskMessage, error) {
	var t taskMessage
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return t, errTaskMessage
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType && (num == tmType || num == tmPayload || num == tmID || num == tmQueue || num == tmErrorMsg || num == tmHeaders):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return t, errTaskMessage
			}
			b = b[n:]
			switch num {
			case tmType:
				t.typ = string(v)
			case tmPayload:
				t.payload = v
			case tmID:
				t.id = string(v)
			case tmQueue:
				t.queue = string(v)
			case tmErrorMsg:
				t.errorMsg = string(v)
			case tmHeaders:
				k, val, err := decodeMapEntry(v)
				if err != nil {
					return t, err
				}
				if t.headers == nil {
					t.headers = map[string]string{}
				}
				t.headers[k] = val
			}
		case typ == protowire.VarintType && (num == tmRetry || num == tmRetried || num == tmTimeout):
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return t, errTaskMessage
			}
			b = b[n:]
			switch num {
			case tmRetry:
				t.retry = int32(v)
			case tmRetried:
				t.retried = int32(v)
			case tmTimeout:
				t.timeout = int64(v)
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return t, errTaskMessage
			}
			b = b[n:]
		}
	}
	if t.id == "" || t.typ == "" {
		return t, errTaskMessage
	}
	return t, nil
}

// decodeMapEntry reads one entry of a map<string, string>: a message of
// key (1) and value (2).
func decodeMapEntry(b []byte) (k, v string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", errTaskMessage
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != 1 && num != 2) {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return "", "", errTaskMessage
			}
			b = b[n:]
			continue
		}
		s, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return "", "", errTaskMessage
		}
		b = b[n:]
		if num == 1 {
			k = string(s)
		} else {
			v = string(s)
		}
	}
	return k, v, nil
}
