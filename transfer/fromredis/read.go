package fromredis

import (
	"context"
	"errors"

	"github.com/delayd/delayd/transfer"
)

// Options say where to read and what.
type Options struct {
	URL    string   // redis://[user:pass@]host:port[/db], rediss:// for TLS
	Format string   // asynq, bullmq, sidekiq or zset
	Queues []string // the library's queue names (the zset format: key names); empty: every queue found
	Prefix string   // the library's key prefix where it has one (BullMQ "bull"); "" for its default
}

// Report counts what Read did.
type Report struct {
	Read    int64            // jobs handed to emit
	Skipped int64            // entries that were not jobs that could be moved
	Reasons map[string]int64 // why entries were skipped, by reason
}

// Read reads every delayed job of the library's layout and calls emit for
// each, in due order within a queue. It stops at the first error of emit.
func Read(ctx context.Context, opts Options, emit func(transfer.Job) error) (Report, error) {
	return Report{}, errors.New("fromredis: not implemented yet")
}
