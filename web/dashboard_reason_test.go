package web

import (
	"fmt"
	"html"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
)

// What the commands learned in issue 30 (failure reasons, queue latency,
// cursors), shown by the dashboard.

// A failure reason (DELAY.NACK ... ERROR) shows on the dead-letter queue's
// list and on the job's page, escaped.
func TestDashboardShowsFailureReasons(t *testing.T) {
	s := newTestServer(t, Options{})
	must(t, s, "DELAY.ADD", "pay", "0", "x", "ID", "p1", "RETRY", "0", "ACKTIMEOUT", "60000", "DEADLETTER", "pay-dead")
	must(t, s, "DELAY.POP", "pay", "1")
	must(t, s, "DELAY.NACK", "pay", "p1", "ERROR", "card <declined> by issuer")

	_, body := get(t, s, "/queue?key=pay-dead")
	if !strings.Contains(body, `<th>last error</th>`) || !strings.Contains(body, `data-k="error" title="card &lt;declined&gt; by issuer">card &lt;declined&gt; by issuer</td>`) {
		t.Errorf("the dead-letter list does not show the reason:\n%.3000s", body[strings.Index(body, `id="q-ready"`):])
	}
	_, body = get(t, s, "/job?key=pay-dead&id=p1")
	if !strings.Contains(body, `<p class="error" data-k="reason">Dead-lettered from <a href="/queue?key=pay">pay</a>. Last failure: <span>card &lt;declined&gt; by issuer</span></p>`) {
		t.Errorf("the job page does not show the reason:\n%s", body)
	}
	// Jobs without a reason get no column.
	must(t, s, "DELAY.ADD", "plain", "0", "x")
	if _, body = get(t, s, "/queue?key=plain"); strings.Contains(body, "last error") {
		t.Errorf("a queue without failed jobs shows a last error column")
	}
}

// Queue latency (DELAY.STATS latency, INFO latency_max_ms) on the queue
// page, in the queue list (sortable) and on the overview.
func TestDashboardShowsQueueLatency(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	eng, err := engine.New(engine.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s := New(Options{Dispatcher: commands.New(commands.Options{Engine: eng, Log: zerolog.Nop()})})
	must(t, s, "DELAY.ADD", "waiting", "0", "x")
	must(t, s, "DELAY.ADD", "later", "600000", "x")
	mu.Lock()
	now = now.Add(5 * time.Second) // the ready job has waited 5s
	mu.Unlock()
	_, body := get(t, s, "/queue?key=waiting")
	if v := dataValue(t, body, "latency"); v != "5000" {
		t.Errorf("the queue page's latency: %s ms, want 5000", v)
	}
	if _, body = get(t, s, "/queue?key=later"); dataValue(t, body, "latency") != "0" {
		t.Errorf("a queue with no ready job waits %s ms, want 0", dataValue(t, body, "latency"))
	}
	_, body = get(t, s, "/queues?sort=latency")
	if !strings.Contains(body, `data-sort="latency">latency ▼</a>`) {
		t.Errorf("the queue list is not sorted by latency")
	}
	if i, j := strings.Index(body, `data-queue="waiting"`), strings.Index(body, `data-queue="later"`); i < 0 || j < 0 || i > j {
		t.Errorf("sorted by latency, the queue that waits comes first")
	}
	_, body = get(t, s, "/")
	if v := dataValue(t, body, "latency"); v != "5000" {
		t.Errorf("the overview's latency: %s ms, want 5000", v)
	}
}

// The queue page pages through all of a queue's delayed jobs (DELAY.UPCOMING
// ... AFTER due id), 25 at a time.
func TestDashboardQueuePagesThroughDelayedJobs(t *testing.T) {
	s := newTestServer(t, Options{})
	for i := range 30 {
		must(t, s, "DELAY.ADD", "q", fmt.Sprint(600_000+i*1000), "x", "ID", fmt.Sprintf("j%02d", i))
	}
	_, body := get(t, s, "/queue?key=q")
	if strings.Count(body, `<tr data-id="j`) != 25 || strings.Contains(body, `data-id="j25"`) {
		t.Fatalf("the first page does not list j00 to j24")
	}
	next := regexp.MustCompile(`<a href="([^"]+)" data-k="up-next"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatalf("no next page link:\n%s", body)
	}
	_, body = get(t, s, html.UnescapeString(next[1]))
	if n := strings.Count(body, `<tr data-id="j`); n != 5 || !strings.Contains(body, `data-id="j25"`) || !strings.Contains(body, `data-id="j29"`) {
		t.Fatalf("the second page lists %d jobs, want j25 to j29", n)
	}
	if strings.Contains(body, `data-k="up-next"`) || !strings.Contains(body, `data-k="up-first"`) {
		t.Errorf("the last page offers a next page, or no way back to the first")
	}
}

// The overview says what the horizon keeps out of memory: far jobs in the
// buckets and payloads in the log; with the horizon off it says nothing.
func TestDashboardShowsWhatIsOnDisk(t *testing.T) {
	if _, body := get(t, newTestServer(t, Options{}), "/"); strings.Contains(body, `data-k="far_jobs"`) {
		t.Fatal("an overview without a log shows jobs on disk")
	}
	eng, err := engine.New(engine.Options{AppendOnly: true, Dir: t.TempDir(), Horizon: 1000, FarBuckets: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s := New(Options{Dispatcher: commands.New(commands.Options{Engine: eng, Log: zerolog.Nop()})})
	must(t, s, "DELAY.ADD", "q", "600000", "far away", "ID", "order-1")
	// The spiller's round (100 ms) takes it out of memory.
	for deadline := time.Now().Add(10 * time.Second); eng.Info().Far.Jobs == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job never went to disk")
		}
	}
	_, body := get(t, s, "/")
	if got := dataValue(t, body, "far_jobs"); got != "1" {
		t.Fatalf("far_jobs shown as %s, want 1", got)
	}
	if !strings.Contains(body, "beyond 1.0s") {
		t.Fatal("the overview does not say the horizon")
	}
}
