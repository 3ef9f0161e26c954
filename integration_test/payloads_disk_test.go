package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// diskPayload is job i's payload: 200 bytes, its own.
func diskPayload(i int) string { return fmt.Sprintf("%-200s", "payload-"+strconv.Itoa(i)) }

// TestPayloadsOnDiskSurviveKill9: with a horizon of one second, jobs due
// later keep their payloads in the log only (INFO payloads_on_disk), while
// small segments roll and compact under churn (appendfsync always). A kill
// -9 at any of these moments loses no acknowledged job and no payload,
// DELAY.GET reads each one back, and every job is handed out with its
// payload when due, never early. Half the jobs have client ids, a third a
// dead-letter queue.
func TestPayloadsOnDiskSurviveKill9(t *testing.T) {
	t.Parallel()
	diskKill9(t, "no", "payloads_on_disk")
}

// TestFarBucketsSurviveKill9 is TestPayloadsOnDiskSurviveKill9 with the
// far-future buckets on: every job passes through disk (INFO far_jobs),
// the kills come during spills, seals, checkpoints (each compaction takes
// one) and loads, and a cancel by id reaches jobs in runs.
func TestFarBucketsSurviveKill9(t *testing.T) {
	t.Parallel()
	diskKill9(t, "yes", "far_jobs")
}

func diskKill9(t *testing.T, far, field string) {
	args := []string{"--appendonly", "yes", "--appendfsync", "always", "--horizon", "1000", "--far-buckets", far,
		"--aof-segment-size", "65536", "--auto-rewrite-min-size", "65536", "--auto-rewrite-percentage", "50"}
	s := startServer(t, args...)
	c := s.Client()
	ctx := context.Background()
	due := map[string]int64{} // id -> due, unix ms
	pay := map[string]string{}
	n := 0
	add := func(k int, delay time.Duration) {
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, k)
		at := time.Now().Add(delay).UnixMilli()
		for i := range k {
			args := []any{"DELAY.ADD", "q", delay.Milliseconds(), diskPayload(n + i)}
			if (n+i)%2 == 0 { // client ids' payloads go to disk, and far, too
				args = append(args, "ID", fmt.Sprint("order-", n+i))
			}
			if (n+i)%3 == 0 { // and jobs with a dead-letter queue
				args = append(args, "DEADLETTER", "dlq")
			}
			cmds[i] = pipe.Do(ctx, args...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			id := fmt.Sprint(cmd.Val())
			due[id], pay[id] = at, diskPayload(n+i)
		}
		n += k
	}
	cancelSome := func() {
		k := 0
		for id := range due {
			if k++; k%3 != 0 {
				if v, err := c.Do(ctx, "DELAY.CANCEL", "q", id).Int(); err != nil || v != 1 {
					t.Fatalf("DELAY.CANCEL %s: %v %v", id, v, err)
				}
				delete(due, id)
				delete(pay, id)
			}
		}
	}
	// churn writes a log's worth of jobs that are gone at once, so that
	// the automatic compaction runs.
	churn := func() {
		for range 20 {
			items := []any{"RPUSH", "filler"}
			for i := range 100 {
				items = append(items, diskPayload(i))
			}
			if err := c.Do(ctx, items...).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.Do(ctx, "LPOP", "filler", 100).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	onDisk := func() int {
		v, _ := s.info("memory", field)
		k, _ := strconv.Atoi(v)
		return k
	}
	check := func(when string) {
		t.Helper()
		ids := make([]string, 0, len(due))
		for id := range due {
			ids = append(ids, id)
		}
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.Do(ctx, "DELAY.GET", "q", id)
		}
		_, _ = pipe.Exec(ctx)
		for i, cmd := range cmds {
			v, err := cmd.Result()
			if err != nil {
				t.Fatalf("%s: DELAY.GET %s: %v", when, ids[i], err)
			}
			if !strings.Contains(fmt.Sprint(v), pay[ids[i]]) {
				t.Fatalf("%s: DELAY.GET %s lacks its payload: %.300v", when, ids[i], v)
			}
		}
	}
	waitDisk := func(min int, when string) {
		t.Helper()
		for stop := time.Now().Add(10 * time.Second); onDisk() < min; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(stop) {
				t.Fatalf("%s: %d payloads on disk, want at least %d", when, onDisk(), min)
			}
		}
	}
	for round := range 4 {
		add(1500, 20*time.Second)
		cancelSome()
		churn()
		waitDisk(len(due)/2, fmt.Sprint("round ", round))
		check(fmt.Sprint("round ", round, " before the kill"))
		add(300, 20*time.Second) // some still in memory, some in a batch being written
		churn()
		compactions, _ := s.info("persistence", "aof_compactions")
		segments, _ := s.info("persistence", "aof_segments")
		t.Logf("round %d: %d jobs, %d payloads on disk, %s segments, %s compactions", round, len(due), onDisk(), segments, compactions)
		s.Kill9()
		durRestartAfterKill(t, s)
		c = s.Client()
		check(fmt.Sprint("round ", round, " after kill -9"))
	}
	waitDisk(len(due)/2, "after the last restart")
	// Every job comes out with its payload, when due and not before.
	for stop := time.Now().Add(60 * time.Second); len(due) > 0; {
		v, err := c.Do(ctx, "DELAY.POP", "q", "1").Result()
		if errors.Is(err, redis.Nil) {
			if time.Now().After(stop) {
				t.Fatalf("%d jobs never came", len(due))
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		r := v.([]any)
		id, p := fmt.Sprint(r[1]), fmt.Sprint(r[2])
		if now := time.Now().UnixMilli(); now < due[id]-1 { // the server's clock rounds up; ours was read before its
			t.Fatalf("job %s handed out %d ms early", id, due[id]-now)
		}
		if p != pay[id] {
			t.Fatalf("job %s: payload %.40q, want %.40q", id, p, pay[id])
		}
		delete(due, id)
	}
}
