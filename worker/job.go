package worker

import (
	"context"
	"errors"
	"fmt"
)

// Job is one delivery of a job to a handler.
type Job struct {
	Queue   string
	ID      string
	Payload []byte

	id any // ID as the fetch's reply boxed it: an ACK's argument with no boxing of its own
}

func (j *Job) ackArg() any {
	if j.id != nil {
		return j.id
	}
	return j.ID
}

// Handler does the work of a job. Returning nil acknowledges it; returning
// an error gives it back for a retry after the worker's backoff (or, with
// SkipRetry in its chain, acknowledges it as done). The context is
// cancelled when a graceful stop's deadline passes with the handler still
// running; the job is then given back at once, whatever the handler does.
type Handler interface {
	ProcessJob(ctx context.Context, job *Job) error
}

// HandlerFunc lets an ordinary function be a Handler.
type HandlerFunc func(ctx context.Context, job *Job) error

// ProcessJob calls f(ctx, job).
func (f HandlerFunc) ProcessJob(ctx context.Context, job *Job) error { return f(ctx, job) }

// Middleware wraps a handler, as asynq's and net/http's do: logging,
// tracing, a timeout per job. The first registered is the outermost.
type Middleware func(Handler) Handler

// SkipRetry, in a handler error's chain (fmt.Errorf("bad payload: %w",
// worker.SkipRetry)), says that a retry cannot help: the job is
// acknowledged, so it is done and never dead-lettered, and the error is
// logged. As asynq's SkipRetry.
var SkipRetry = errors.New("skip retry")

// PanicError is the error a handler's panic becomes: the job is given back
// as for any error, with the panic's value as the failure reason.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// BatchHandler does the work of every job one fetch brought, in one call
// (see Worker.HandleBatch). Returning nil acknowledges them all; a
// BatchErrors says which failed; any other error fails them all. Each
// failed job is given back with its backoff, or acknowledged if its error
// wraps SkipRetry, as a Handler's would be. The context is cancelled when
// a graceful stop's deadline passes with the batch still running; its jobs
// are then given back at once.
type BatchHandler interface {
	ProcessBatch(ctx context.Context, jobs []*Job) error
}

// BatchHandlerFunc lets an ordinary function be a BatchHandler.
type BatchHandlerFunc func(ctx context.Context, jobs []*Job) error

// ProcessBatch calls f(ctx, jobs).
func (f BatchHandlerFunc) ProcessBatch(ctx context.Context, jobs []*Job) error { return f(ctx, jobs) }

// BatchErrors is a batch handler's error when some of its jobs failed and
// others did not: one entry per job, in the order the handler got them,
// nil for a job done. One of another length fails the whole batch.
type BatchErrors []error

func (e BatchErrors) Error() string {
	n := 0
	var first error
	for _, err := range e {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if first == nil {
		return "no job failed"
	}
	return fmt.Sprintf("%d of %d jobs failed: %v", n, len(e), first)
}
