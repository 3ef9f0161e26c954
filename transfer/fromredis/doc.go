// Package fromredis reads the delayed jobs that Redis-based job libraries
// keep in a Redis server (asynq, BullMQ, Sidekiq, or a plain sorted set of
// payloads scored by due time) and hands each to the caller as a
// transfer.Job, with its due time and its id as the library made them, for
// `delayd import --from-redis URL --format asynq|bullmq|sidekiq|zset`.
//
// Each format is one file that knows one library's layout, as read from
// the library's source (asynq.go, bullmq.go, sidekiq.go, zset.go): which
// sorted sets hold the delayed jobs, and how an entry and its job hash
// become a job. page.go reads a sorted set in (score, member) pages that
// stay right while the old system adds and removes entries; read.go ties
// them together, a page read ahead while the caller takes the last.
//
// It only reads. Ids are the library's, so a second run gives the same
// jobs again, which delayd's DELAY.ADDAT ... ID leaves as they are: the
// import is idempotent and needs no resume file.
//
// # Caveats
//
// Not read: jobs that are ready or running in the old system, dead or
// archived jobs, a Redis Cluster. Read but skipped, each with its reason
// in the Report: BullMQ repeatable jobs and flow children, entries whose
// job is gone or not a job. docs/decisions/import-from-redis.md has the
// mapping of each library's fields and the reasons.
package fromredis
