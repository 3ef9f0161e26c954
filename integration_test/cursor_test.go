package integration

import (
	"strconv"
	"testing"
	"time"
)

// DELAY.UPCOMING ... AFTER due id lists a queue of a few thousand jobs
// whole, 1000 at a time, each once, while other jobs come and go.
func TestUpcomingListsAWholeQueueByPages(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	ctx := ctxT(t, 60*time.Second)
	const n = 3500
	pipe := c.Pipeline()
	for i := range n {
		pipe.Do(ctx, "DELAY.ADD", "q", 3600_000+i%700, "p", "ID", "j"+strconv.Itoa(i))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var after []any
	for page := 0; ; page++ {
		args := append([]any{"DELAY.UPCOMING", "q", 1000}, after...)
		jobs := do(t, c, args...).([]any)
		for _, j := range jobs {
			seen[j.([]any)[0].(string)]++
		}
		if len(jobs) < 1000 {
			break
		}
		last := jobs[len(jobs)-1].([]any)
		after = []any{"AFTER", last[1], last[0]}
		// Between pages: a job due sooner and one due later come, one goes.
		expect(t, c, anyReply{}, "DELAY.ADD", "q", 1000, "p", "ID", "early"+strconv.Itoa(page))
		expect(t, c, anyReply{}, "DELAY.ADD", "q", 7200_000, "p", "ID", "late"+strconv.Itoa(page))
		expect(t, c, int64(1), "DELAY.CANCEL", "q", "early"+strconv.Itoa(page))
	}
	for i := range n {
		if id := "j" + strconv.Itoa(i); seen[id] != 1 {
			t.Fatalf("%s listed %d times", id, seen[id])
		}
	}
	for page := range 3 {
		if id := "late" + strconv.Itoa(page); seen[id] != 1 {
			t.Fatalf("%s, added after the cursor, listed %d times", id, seen[id])
		}
	}
}
