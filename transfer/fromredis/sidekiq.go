package fromredis

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/transfer"
)

// sidekiqFormat reads Sidekiq's layout (sidekiq/sidekiq, lib/sidekiq/api.rb
// and lib/sidekiq/scheduled.rb, wiki "Job Format"): every queue's delayed
// jobs share the sorted sets "schedule" (perform_in, perform_at) and
// "retry" (failed, waiting to run again); a member is the whole job as
// JSON ("class", "args", "jid", "queue", "retry", "retry_count",
// "error_message", ...), its score the unix time in seconds as a float.
// With redis-namespace the keys are "<ns>:schedule" and "<ns>:retry"
// (Options.Prefix).
type sidekiqFormat struct{}

// Why Sidekiq entries are skipped.
const reasonSidekiqBad = "sidekiq: member is not a job (JSON with jid and queue)"

// sidekiqMaxRetries is Sidekiq's default max_retries, what "retry": true
// means.
const sidekiqMaxRetries = 25

func (sidekiqFormat) sets(_ context.Context, _ *redis.Client, o *Options) ([][]set, error) {
	p := ""
	if o.Prefix != "" {
		p = o.Prefix + ":"
	}
	return [][]set{{{key: p + "schedule"}, {key: p + "retry"}}}, nil
}

func (sidekiqFormat) jobs(_ context.Context, _ *redis.Client, o *Options, batch []item, add func(transfer.Job), skip func(string)) error {
	for _, it := range batch {
		var sj struct {
			JID        string          `json:"jid"`
			Queue      string          `json:"queue"`
			Retry      json.RawMessage `json:"retry"`
			RetryCount *int64          `json:"retry_count"`
			Error      string          `json:"error_message"`
		}
		if json.Unmarshal([]byte(it.member), &sj) != nil || sj.JID == "" || sj.Queue == "" {
			skip(reasonSidekiqBad)
			continue
		}
		if len(o.Queues) > 0 && !slices.Contains(o.Queues, sj.Queue) {
			continue
		}
		// The member is what Sidekiq's poller pushes to queue:<name> when
		// the job is due, so a Sidekiq-shaped worker reads it unchanged.
		j := transfer.Job{
			Queue:   sj.Queue,
			ID:      sj.JID,
			Due:     ms(it.value, 1000),
			Payload: it.member,
			Error:   sj.Error,
		}
		var n int64
		switch {
		case string(sj.Retry) == "true", len(sj.Retry) == 0:
			j.Retry = sidekiqMaxRetries
		case json.Unmarshal(sj.Retry, &n) == nil:
			j.Retry = retryOf(n)
		default: // false
			j.Retry = noRetry
		}
		// retry_count is 0 after the first failure (job_retry.rb).
		if sj.RetryCount != nil {
			j.Deliveries = uint32(*sj.RetryCount + 1)
		}
		add(j)
	}
	return nil
}
