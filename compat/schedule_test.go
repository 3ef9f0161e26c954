package compat

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The "schedule" column: issue 10's commands through each library's
// generic call, checking the reply shapes a user's code reads.

// firedBy checks that id names a firing of schedule name that happened no
// later than now: `name:<fire unix ms>`.
func firedBy(id, name string) error {
	ms, ok := strings.CutPrefix(id, name+":")
	if !ok {
		return fmt.Errorf("fired job id %q, want %s:<fire unix ms>", id, name)
	}
	at, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return fmt.Errorf("fired job id %q: %v", id, err)
	}
	if now := time.Now().UnixMilli(); at > now {
		return fmt.Errorf("fired job %q handed out at %d, before its fire time", id, now)
	}
	return nil
}

func goRedisSchedule(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e, func(o *redis.Options) { o.ReadTimeout = 8 * time.Second })
	defer c.Close()
	ok := func(what string, cmd *redis.Cmd) error {
		s, err := cmd.Text()
		return first(noErr(what, err), eq(what, s, "OK"))
	}
	if err := first(
		ok("DELAY.SCHEDULE EVERY", c.Do(ctx, "DELAY.SCHEDULE", "ticks", "tick", "EVERY", "100", "hello")),
		ok("DELAY.SCHEDULE CRON", c.Do(ctx, "DELAY.SCHEDULE", "reports", "daily", "CRON", "0 9 * * *", "TZ", "Europe/Berlin", "report")),
	); err != nil {
		return err
	}
	list, err := c.Do(ctx, "DELAY.SCHEDULES", "ticks").Slice()
	if err != nil {
		return noErr("DELAY.SCHEDULES", err)
	}
	if len(list) != 1 {
		return fmt.Errorf("DELAY.SCHEDULES ticks: got %v, want one schedule", list)
	}
	m, isMap := list[0].(map[any]any) // RESP3, go-redis's default
	if !isMap || m["name"] != "tick" {
		return fmt.Errorf("DELAY.SCHEDULES ticks: got %#v, want a map with name tick", list[0])
	}
	job, err := c.Do(ctx, "DELAY.POP", "ticks", "5").StringSlice()
	if err != nil {
		return noErr("DELAY.POP of a firing", err)
	}
	if err := first(eq("fired payload", job[2], "hello"), firedBy(job[1], "tick")); err != nil {
		return err
	}
	n, err := c.Do(ctx, "DELAY.UNSCHEDULE", "ticks", "tick").Int64()
	if err := first(noErr("DELAY.UNSCHEDULE", err), eq("DELAY.UNSCHEDULE", n, int64(1))); err != nil {
		return err
	}

	id, err := c.Do(ctx, "DELAY.ADD", "orders", "60000", "o1", "ID", "order-1", "UNIQUE", "60000").Text()
	if err := first(noErr("DELAY.ADD UNIQUE", err), eq("DELAY.ADD UNIQUE", id, "order-1")); err != nil {
		return err
	}
	n, err = c.Do(ctx, "DELAY.PROMOTE", "orders", "order-1").Int64()
	if err := first(noErr("DELAY.PROMOTE", err), eq("DELAY.PROMOTE", n, int64(1))); err != nil {
		return err
	}
	job, err = c.Do(ctx, "DELAY.POP", "orders", "1").StringSlice()
	if err := first(noErr("DELAY.POP of the promoted job", err), eq("promoted id", job[1], "order-1")); err != nil {
		return err
	}
	if err := c.Do(ctx, "DELAY.ADD", "orders", "0", "o1", "ID", "order-1", "UNIQUE", "60000").Err(); err != redis.Nil {
		return fmt.Errorf("re-add of a finished UNIQUE id: got %v, want a nil reply", err)
	}
	if err := c.Do(ctx, "DELAY.ADD", "orders", "0", "o2", "ID", "order-2").Err(); err != nil {
		return noErr("DELAY.ADD", err)
	}
	n, err = c.Do(ctx, "DELAY.RESCHEDULE", "orders", "order-2", "60000").Int64()
	if err := first(noErr("DELAY.RESCHEDULE", err), eq("DELAY.RESCHEDULE", n, int64(1))); err != nil {
		return err
	}
	got, err := c.Do(ctx, "DELAY.GET", "orders", "order-2").Result()
	if gm, isMap := got.(map[any]any); err != nil || !isMap || gm["state"] != "delayed" {
		return fmt.Errorf("DELAY.GET after RESCHEDULE: got %v (%v), want state delayed", got, err)
	}

	for _, args := range [][]any{{"DELAY.ADD", "mail", "0", "low"}, {"DELAY.ADD", "mail", "0", "high", "PRIORITY", "9"}} {
		if err := c.Do(ctx, args...).Err(); err != nil {
			return noErr("DELAY.ADD PRIORITY", err)
		}
	}
	if err := ok("DELAY.LIMIT", c.Do(ctx, "DELAY.LIMIT", "mail", "CONCURRENCY", "5", "RATE", "100", "1000")); err != nil {
		return err
	}
	mp, err := c.Do(ctx, "DELAY.MPOP", "1", "1", "mail", "COUNT", "2").Slice()
	if err != nil {
		return noErr("DELAY.MPOP", err)
	}
	return mpopPayloads(mp, "mail", "high", "low")
}

// mpopPayloads checks a DELAY.MPOP reply as go-redis decodes it.
func mpopPayloads(reply []any, key string, want ...string) error {
	if len(reply) != 2 || reply[0] != key {
		return fmt.Errorf("DELAY.MPOP: got %#v, want [%s, [[id, payload], ...]]", reply, key)
	}
	jobs, _ := reply[1].([]any)
	var got []string
	for _, j := range jobs {
		pair, _ := j.([]any)
		if len(pair) != 2 {
			return fmt.Errorf("DELAY.MPOP: job %#v is not [id, payload]", j)
		}
		got = append(got, fmt.Sprint(pair[1]))
	}
	return eq("DELAY.MPOP payloads", strings.Join(got, ","), strings.Join(want, ","))
}

func rueidisSchedule(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	do := func(cmd string, key string, args ...string) rueidis.RedisResult {
		return c.Do(ctx, c.B().Arbitrary(cmd).Keys(key).Args(args...).Build())
	}
	ok := func(what string, r rueidis.RedisResult) error {
		s, err := r.ToString()
		return first(noErr(what, err), eq(what, s, "OK"))
	}
	if err := first(
		ok("DELAY.SCHEDULE EVERY", do("DELAY.SCHEDULE", "ticks", "tick", "EVERY", "100", "hello")),
		ok("DELAY.SCHEDULE CRON", do("DELAY.SCHEDULE", "reports", "daily", "CRON", "0 9 * * *", "TZ", "Europe/Berlin", "report")),
	); err != nil {
		return err
	}
	list, err := do("DELAY.SCHEDULES", "ticks").ToArray()
	if err != nil || len(list) != 1 {
		return fmt.Errorf("DELAY.SCHEDULES ticks: got %v (%v), want one schedule", list, err)
	}
	sched, err := list[0].AsStrMap()
	if err != nil || sched["name"] != "tick" {
		return fmt.Errorf("DELAY.SCHEDULES ticks: got %v (%v), want name tick", sched, err)
	}
	job, err := c.Do(ctx, c.B().Arbitrary("DELAY.POP").Keys("ticks").Args("5").Blocking()).AsStrSlice()
	if err != nil {
		return noErr("DELAY.POP of a firing", err)
	}
	if err := first(eq("fired payload", job[2], "hello"), firedBy(job[1], "tick")); err != nil {
		return err
	}
	n, err := do("DELAY.UNSCHEDULE", "ticks", "tick").AsInt64()
	if err := first(noErr("DELAY.UNSCHEDULE", err), eq("DELAY.UNSCHEDULE", n, int64(1))); err != nil {
		return err
	}
	if id, err := do("DELAY.ADD", "orders", "60000", "o1", "ID", "order-1", "UNIQUE", "60000").ToString(); err != nil || id != "order-1" {
		return fmt.Errorf("DELAY.ADD UNIQUE: got %q (%v), want order-1", id, err)
	}
	if n, err := do("DELAY.PROMOTE", "orders", "order-1").AsInt64(); err != nil || n != 1 {
		return fmt.Errorf("DELAY.PROMOTE: got %d (%v), want 1", n, err)
	}
	if job, err := do("DELAY.POP", "orders", "1").AsStrSlice(); err != nil || job[1] != "order-1" {
		return fmt.Errorf("DELAY.POP of the promoted job: got %v (%v)", job, err)
	}
	if err := do("DELAY.ADD", "orders", "0", "o1", "ID", "order-1", "UNIQUE", "60000").Error(); !rueidis.IsRedisNil(err) {
		return fmt.Errorf("re-add of a finished UNIQUE id: got %v, want a nil reply", err)
	}
	if err := do("DELAY.ADD", "mail", "0", "low").Error(); err != nil {
		return noErr("DELAY.ADD", err)
	}
	if err := do("DELAY.ADD", "mail", "0", "high", "PRIORITY", "9").Error(); err != nil {
		return noErr("DELAY.ADD PRIORITY", err)
	}
	if err := ok("DELAY.LIMIT", do("DELAY.LIMIT", "mail", "CONCURRENCY", "5", "RATE", "100", "1000")); err != nil {
		return err
	}
	mp, err := c.Do(ctx, c.B().Arbitrary("DELAY.MPOP").Args("1", "1").Keys("mail").Args("COUNT", "2").Blocking()).ToArray()
	if err != nil || len(mp) != 2 {
		return fmt.Errorf("DELAY.MPOP: got %v (%v), want [key, jobs]", mp, err)
	}
	jobs, err := mp[1].ToArray()
	if err != nil {
		return noErr("DELAY.MPOP jobs", err)
	}
	var got []string
	for _, j := range jobs {
		pair, err := j.AsStrSlice()
		if err != nil || len(pair) != 2 {
			return fmt.Errorf("DELAY.MPOP: job %v is not [id, payload]", j)
		}
		got = append(got, pair[1])
	}
	return eq("DELAY.MPOP payloads", strings.Join(got, ","), "high,low")
}
