package engine

import "errors"

// Errors returned by the engine. The commands package turns each into a
// RESP error line with Redis's wording; compare with errors.Is.
var (
	// Admission: the write was refused and nothing changed.
	ErrPayloadTooLarge = errors.New("payload exceeds max-payload-bytes")
	ErrMaxJobs         = errors.New("max-jobs reached")
	ErrBadID           = errors.New("id must be 1 to 256 bytes")
	ErrKeyTooLong      = errors.New("key longer than 16384 bytes")
	ErrClosed          = errors.New("engine is shut down")
	ErrReasonTooLong   = errors.New("ERROR text must be 1 to 1024 bytes") // MaxReason

	// Durability: the write could not be logged, so it was not applied.
	ErrLog = errors.New("append-only log write failed")
)
