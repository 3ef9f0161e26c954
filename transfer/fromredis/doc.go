// Package fromredis reads the delayed jobs that Redis-based job libraries
// keep in a Redis server (asynq, BullMQ, Sidekiq, or a plain sorted set of
// payloads scored by due time) and hands each to the caller as a
// transfer.Job, with its due time and its id as the library made them, for
// `delayd import --from-redis URL --format asynq|bullmq|sidekiq|zset`.
package fromredis
