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
