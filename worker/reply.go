package worker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// fields reads a field/value reply: a flat array under RESP2, a map under
// RESP3 (go-redis speaks RESP3 by default).
func fields(v any) (map[string]any, error) {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[fmt.Sprint(k)] = x
		}
		return m, nil
	case []any:
		if len(v)%2 != 0 {
			return nil, fmt.Errorf("delayd: a field/value reply of %d elements", len(v))
		}
		m := make(map[string]any, len(v)/2)
		for i := 0; i < len(v); i += 2 {
			m[fmt.Sprint(v[i])] = v[i+1]
		}
		return m, nil
	}
	return nil, fmt.Errorf("delayd: unexpected reply %T", v)
}

func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	}
	return fmt.Sprint(v)
}

func integer(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	n, _ := strconv.ParseInt(str(v), 10, 64)
	return n
}

// mpopJobs reads DELAY.MPOP's reply [key, [[id, payload], ...]]; a null
// reply (nothing within the block time) is no jobs.
func mpopJobs(queue string, cmd *redis.Cmd) ([]*Job, error) {
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	top, ok := v.([]any)
	if !ok || len(top) != 2 {
		return nil, fmt.Errorf("delayd: DELAY.MPOP replied %v", v)
	}
	list, _ := top[1].([]any)
	jobs := make([]*Job, 0, len(list))
	block := make([]Job, len(list)) // one allocation for the fetch's jobs
	for i, e := range list {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return jobs, fmt.Errorf("delayd: DELAY.MPOP job %v", e)
		}
		block[i] = Job{Queue: queue, ID: str(pair[0]), Payload: []byte(str(pair[1])), id: pair[0]}
		jobs = append(jobs, &block[i])
	}
	return jobs, nil
}

// transient says whether err may pass if the call is sent again: the
// connection failed, or the server (a cluster node) answers for the moment
// that it cannot serve. Any other error reply would come back the same.
func transient(err error) bool {
	if err == nil {
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return true // a dial error, a timeout, a closed connection
	}
	msg := re.Error()
	for _, p := range []string{"UNBLOCKED", "CLUSTERDOWN", "TRYAGAIN", "LOADING", "MOVED", "ASK", "READONLY", "MASTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
