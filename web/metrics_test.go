package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
)

// series gathers reg into "name{label="value",...}" -> value, labels in
// name order; a histogram gives name_count and name_sum.
func series(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := mf.GetName()
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.Counter.GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.Gauge.GetValue()
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"] = float64(m.Histogram.GetSampleCount())
				out[mf.GetName()+"_sum"] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

func do(t *testing.T, s *Server, args ...string) any {
	t.Helper()
	v, err := s.Do(context.Background(), args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// TestMetricsAfterAWorkload: after adds, pops, an ACK, a NACK, an expiry
// and a dead letter, /metrics passes client_golang's linter and shows what
// DELAY.STATS and INFO show, with the queues past --metrics-max-queues
// summed as _other.
func TestMetricsAfterAWorkload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t, Options{MaxQueues: 2, Version: "1.2.3"})
		for i := range 3 {
			do(t, s, "DELAY.ADD", "a", "0", "x", "ID", fmt.Sprint("a", i), "ACKTIMEOUT", "10000")
		}
		do(t, s, "DELAY.ADD", "b", "60000", "y")
		do(t, s, "DELAY.ADD", "b", "60000", "y")
		do(t, s, "DELAY.ADD", "c", "0", "z", "ACKTIMEOUT", "100", "RETRY", "0", "DEADLETTER", "dl")
		do(t, s, "DELAY.ADD", "d", "0", "w")
		time.Sleep(20 * time.Millisecond) // every pop 20 ms late
		for range 3 {
			do(t, s, "DELAY.POP", "a", "1")
		}
		do(t, s, "DELAY.POP", "c", "1")
		do(t, s, "DELAY.POP", "d", "1")
		time.Sleep(5 * time.Millisecond)
		if n := do(t, s, "DELAY.ACK", "a", "a0"); n != int64(1) {
			t.Fatalf("ACK: %v", n)
		}
		if n := do(t, s, "DELAY.NACK", "a", "a1"); n != int64(1) {
			t.Fatalf("NACK: %v", n)
		}
		time.Sleep(200 * time.Millisecond) // c's reservation expires, no retry left: to dl
		synctest.Wait()

		reg := s.registry()
		if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
			t.Fatalf("lint: %v %v", problems, err)
		}
		got := series(t, reg)
		want := map[string]float64{
			`delayd_build_info{goversion="` + runtime.Version() + `",version="1.2.3"}`: 1,
			`delayd_queues`: 3, // a, b, dl
			// a and b have 2 jobs each, dl 1: the top 2 are a and b.
			`delayd_queue_jobs{queue="a",state="ready"}`:        1,
			`delayd_queue_jobs{queue="a",state="reserved"}`:     1,
			`delayd_queue_jobs{queue="a",state="delayed"}`:      0,
			`delayd_queue_jobs{queue="b",state="delayed"}`:      2,
			`delayd_queue_jobs{queue="_other",state="ready"}`:   1,
			`delayd_queue_jobs{queue="_other",state="delayed"}`: 0,
			// a's ready job (a1, NACKed) and dl's (c) were due when added, 225 ms ago.
			`delayd_queue_latency_seconds{queue="a"}`:          0.225,
			`delayd_queue_latency_seconds{queue="b"}`:          0,
			`delayd_queue_latency_seconds{queue="_other"}`:     0.225,
			`delayd_queue_added_total{queue="a"}`:              3,
			`delayd_queue_added_total{queue="b"}`:              2,
			`delayd_queue_added_total{queue="_other"}`:         2, // c and d, gone since
			`delayd_queue_delivered_total{queue="a"}`:          3,
			`delayd_queue_delivered_total{queue="_other"}`:     2,
			`delayd_queue_acked_total{queue="a"}`:              1,
			`delayd_queue_nacked_total{queue="a"}`:             1,
			`delayd_queue_expired_total{queue="_other"}`:       1,
			`delayd_queue_dead_lettered_total{queue="_other"}`: 1,
			`delayd_queue_dead_lettered_total{queue="a"}`:      0,
			`delayd_jobs_added_total`:                          7,
			`delayd_jobs_delivered_total`:                      5,
			`delayd_jobs_redelivered_total`:                    0,
			`delayd_jobs_acked_total`:                          1,
			`delayd_jobs_nacked_total`:                         1,
			`delayd_jobs_expired_total`:                        1,
			`delayd_jobs_dead_lettered_total`:                  1,
			`delayd_jobs_dropped_total`:                        0,
			`delayd_job_lateness_seconds_count`:                5,
			`delayd_job_lateness_seconds_sum`:                  5 * 0.020,
			`delayd_job_ack_duration_seconds_count`:            1,
			`delayd_job_ack_duration_seconds_sum`:              0.005,
			`delayd_commands_total{command="delay.add"}`:       7,
			`delayd_commands_total{command="delay.pop"}`:       5,
			`delayd_blocked_clients`:                           0,
			`delayd_connected_clients`:                         0,
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
			}
		}
		// DELAY.STATS of a labelled queue is its series.
		st := do(t, s, "DELAY.STATS", "a").(Map)
		for i := 0; i < len(st); i += 2 {
			field, n := string(st[i].([]byte)), float64(st[i+1].(int64))
			key := map[string]string{"added": "added", "deliveries": "delivered", "redeliveries": "redelivered",
				"acks": "acked", "nacks": "nacked", "expired": "expired", "dead_lettered": "dead_lettered"}[field]
			name := `delayd_queue_` + key + `_total{queue="a"}`
			if field == "latency" {
				name, n = `delayd_queue_latency_seconds{queue="a"}`, n/1000
			} else if key == "" {
				name = `delayd_queue_jobs{queue="a",state="` + field + `"}`
			}
			if got[name] != n {
				t.Errorf("DELAY.STATS a %s = %v, /metrics %s = %v", field, n, name, got[name])
			}
		}
		// The queue label sums to the totals.
		for _, c := range []string{"added", "delivered", "redelivered", "acked", "nacked", "expired", "dead_lettered"} {
			sum := 0.0
			for k, v := range got {
				if strings.HasPrefix(k, "delayd_queue_"+c+"_total{") {
					sum += v
				}
			}
			if sum != got["delayd_jobs_"+c+"_total"] {
				t.Errorf("delayd_queue_%s_total sums to %v, delayd_jobs_%s_total is %v", c, sum, c, got["delayd_jobs_"+c+"_total"])
			}
		}
		if _, ok := got["delayd_log_size_bytes"]; ok {
			t.Error("log metrics with no log")
		}
		if got["go_goroutines"] == 0 || got["process_start_time_seconds"] == 0 {
			t.Error("no Go or process collector")
		}
		if n := testutil.CollectAndCount(newCollector(s), "delayd_queue_jobs"); n != 9 {
			t.Errorf("delayd_queue_jobs: %d series, want 3 queues x 3 states", n)
		}
		if problems, err := testutil.CollectAndLint(newCollector(s)); err != nil || len(problems) > 0 {
			t.Errorf("lint of the collector alone: %v %v", problems, err)
		}
	})
}

// TestMetricsQueueLabels: a name that is not UTF-8 is escaped; a queue named
// _other, or one whose escaped name is another's, is summed in _other
// rather than break the scrape with a duplicate series.
func TestMetricsQueueLabels(t *testing.T) {
	if got := queueLabel("a\xffb\xc3"); got != `a\xffb\xc3` {
		t.Fatalf("queueLabel: %q", got)
	}
	if got := queueLabel("héllo"); got != "héllo" {
		t.Fatalf("queueLabel: %q", got)
	}
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t, Options{MaxQueues: 10})
		for q, n := range map[string]int{"_other": 5, "a\xff": 4, `a\xff`: 3, "x": 1} {
			for range n {
				do(t, s, "DELAY.ADD", q, "60000", "p")
			}
		}
		got := series(t, s.registry())
		if got[`delayd_queue_jobs{queue="a\\xff",state="delayed"}`] != 4 ||
			got[`delayd_queue_jobs{queue="_other",state="delayed"}`] != 5+3 ||
			got[`delayd_queue_jobs{queue="x",state="delayed"}`] != 1 {
			t.Fatalf("series: %v", got)
		}
	})
}

// TestMetricsHTTP: /metrics answers in the text format, behind the password
// when one is set.
func TestMetricsHTTP(t *testing.T) {
	s := newTestServer(t, Options{Password: "pw", MaxQueues: 10})
	if _, err := s.Do(context.Background(), "DELAY.ADD", "q", "0", "x"); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/metrics", nil)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("/metrics without the password: %d", w.Code)
	}
	r.SetBasicAuth("any", "pw")
	w = httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Result().Body)
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") ||
		!strings.Contains(string(body), "\ndelayd_queue_jobs{queue=\"q\",state=\"ready\"} 1\n") {
		t.Fatalf("/metrics: %d %s\n%s", w.Code, w.Header(), body)
	}
}

// TestMetricsWhileLoading: before the engine is there, /metrics shows what
// does not need it.
func TestMetricsWhileLoading(t *testing.T) {
	var l engine.Loading
	d := commands.New(commands.Options{Loading: &l, Log: zerolog.Nop()})
	s := New(Options{Dispatcher: d, MaxQueues: 10})
	got := series(t, s.registry())
	if got["delayd_connected_clients"] != 0 || got["delayd_blocked_clients"] != 0 {
		t.Fatalf("while loading: %v", got)
	}
	if _, ok := got["delayd_queues"]; ok {
		t.Fatal("engine metrics while loading")
	}
}

// TestMetricsScrape100kQueues: with 100k queues a scrape stays under 100 kB
// and 50 ms (the best of a few, so that a busy machine's one slow scrape
// does not fail it; not checked with the race detector, which slows it
// tenfold).
func TestMetricsScrape100kQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := commands.New(commands.Options{Engine: eng, Log: zerolog.Nop()})
	s := New(Options{Dispatcher: d, MaxQueues: 100, Version: "test"})
	// Every command called once, before the queues are there (FLUSHALL):
	// as many command series as there can be. A client of its own for each,
	// or MULTI would queue the rest.
	for _, cmd := range commands.Table() {
		n := cmd.Arity - 1
		if cmd.Arity < 0 {
			n = -cmd.Arity - 1
		}
		argv := [][]byte{[]byte(cmd.Name)}
		for range n {
			argv = append(argv, []byte("x")) // "x" is no timeout: nothing blocks
		}
		c := d.NewClient(&builder{proto: 2}, "x")
		d.Exec(c, argv)
		d.CloseClient(c)
	}
	if n := len(d.CommandStats()); n < len(commands.Table())*9/10 {
		t.Fatalf("only %d commands counted", n)
	}
	const queues = 100_000
	for i := range queues {
		// Queue names as long as real ones; the largest queues have most jobs.
		q := []byte(fmt.Sprintf("tenant-%06d:emails", i))
		for range 1 + i%3 {
			if _, err := eng.Add(engine.AddArgs{Queue: q, Delay: 600000, Payload: []byte("p"), Retry: -1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var size int
	best := time.Hour
	for range 5 {
		r := httptest.NewRequest("GET", "/metrics", nil)
		w := httptest.NewRecorder()
		start := time.Now()
		s.Handler().ServeHTTP(w, r)
		took := time.Since(start)
		best = min(best, took)
		size = w.Body.Len()
		if w.Code != 200 {
			t.Fatalf("scrape: %d", w.Code)
		}
	}
	start := time.Now()
	m := eng.Metrics(100)
	held := time.Since(start)
	t.Logf("100k queues: scrape %d bytes, best of 5 %v; engine.Metrics (under the engine lock) %v; %d queues labelled",
		size, best, held, len(m.Top))
	if size >= 100_000 {
		t.Errorf("scrape is %d bytes, want under 100 kB", size)
	}
	if !raceEnabled && best >= 50*time.Millisecond {
		t.Errorf("scrape took %v, want under 50 ms", best)
	}
	if len(m.Top) != 100 || m.Top[0].Name != "tenant-000002:emails" || m.Top[0].Delayed != 3 {
		t.Errorf("top: %d queues, first %+v", len(m.Top), m.Top[0])
	}
}
