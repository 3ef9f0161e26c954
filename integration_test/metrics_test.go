package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SPEC "Observability": /metrics in the Prometheus text format, its numbers
// those INFO and DELAY.STATS show; /healthz and /readyz.

// scrape GETs path from the server's HTTP side.
func scrape(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// samples parses the text format into `name{labels}` -> value, labels as
// the server wrote them (sorted by name).
func samples(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// promtool returns promtool's path; without it the caller skips its check,
// unless DELAYD_COMPAT_REQUIRE=1 (CI, which installs it) makes that a failure.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("DELAYD_COMPAT_REQUIRE") == "1" {
			t.Fatalf("promtool not installed (apt-get install prometheus), and DELAYD_COMPAT_REQUIRE=1")
		}
		t.Logf("promtool not installed (apt-get install prometheus): not checked with it")
	}
	return p
}

// TestMetricsMatchInfoAndStats: after a scripted workload (adds, pops, an
// ACK, a NACK, an expiry, a dead letter, a blocked client), every number of
// /metrics is INFO's or DELAY.STATS's, the queues past --metrics-max-queues
// are summed as _other, and promtool finds nothing wrong with the scrape.
func TestMetricsMatchInfoAndStats(t *testing.T) {
	t.Parallel()
	httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	s := startServer(t, "--http-addr", httpAddr, "--appendonly", "yes", "--appendfsync", "always",
		"--metrics-max-queues", "3")
	c := s.Client()
	// q1..q5 with 5..1 delayed jobs.
	for q := 1; q <= 5; q++ {
		for i := 0; i < 6-q; i++ {
			do(t, c, "DELAY.ADD", fmt.Sprint("q", q), 600000, "later")
		}
	}
	// work: three reserved jobs; one acked, one nacked (ready again), one
	// left reserved.
	for i := range 3 {
		do(t, c, "DELAY.ADD", "work", 0, "job", "ID", fmt.Sprint("w", i), "ACKTIMEOUT", 60000)
	}
	for range 3 {
		do(t, c, "DELAY.POP", "work", 1)
	}
	if n := do(t, c, "DELAY.ACK", "work", "w0"); n != int64(1) {
		t.Fatalf("ACK: %v", n)
	}
	if n := do(t, c, "DELAY.NACK", "work", "w1"); n != int64(1) {
		t.Fatalf("NACK: %v", n)
	}
	for range 4 {
		do(t, c, "DELAY.ADD", "work", 600000, "later") // 6 jobs: the largest queue
	}
	// fragile: a reservation that expires with no retry left, so the job is
	// dead-lettered to dead (an expiry and a dead letter).
	do(t, c, "DELAY.ADD", "fragile", 0, "boom", "ACKTIMEOUT", 50, "RETRY", 0, "DEADLETTER", "dead")
	do(t, c, "DELAY.POP", "fragile", 1)
	deadline := time.Now().Add(5 * time.Second)
	for asInt(t, "LLEN dead", do(t, c, "LLEN", "dead")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the job was not dead-lettered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A plain job popped at once, and a client blocked on an empty queue.
	do(t, c, "DELAY.ADD", "once", 0, "x")
	do(t, c, "DELAY.POP", "once", 1)
	blocker := s.Client()
	popAsync(blocker, 30*time.Second, "DELAY.POP", "empty", 30)
	s.waitBlocked(t, 1)

	ctx := ctxT(t, 10*time.Second)
	info, err := c.Info(ctx, "all").Result()
	if err != nil {
		t.Fatal(err)
	}
	code, text := scrape(t, httpAddr, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d\n%s", code, text)
	}
	in, m := infoOf(info), samples(t, text)
	check := func(name string, want string) {
		t.Helper()
		w, err := strconv.ParseFloat(want, 64)
		if got, ok := m[name]; !ok || err != nil || got != w {
			t.Errorf("%s = %v (present %v), want %q", name, got, ok, want)
		}
	}
	for _, f := range []string{"added", "delivered", "redelivered", "acked", "nacked", "expired", "dead_lettered", "dropped", "cancelled", "fired", "requeued"} {
		check("delayd_jobs_"+f+"_total", in["jobs_"+f])
	}
	check("delayd_queues", in["queues"])
	check("delayd_connected_clients", in["connected_clients"])
	check("delayd_blocked_clients", in["blocked_clients"])
	check("delayd_log_size_bytes", in["aof_current_size"])
	if in["jobs_expired"] != "1" || in["jobs_dead_lettered"] != "1" || in["jobs_acked"] != "1" || in["jobs_nacked"] != "1" || in["blocked_clients"] != "1" {
		t.Errorf("the workload did not happen as planned: INFO %v", in)
	}
	// Jobs by state: the queue label sums to INFO's.
	for _, st := range []string{"delayed", "ready", "reserved"} {
		sum := 0.0
		for k, v := range m {
			if strings.HasPrefix(k, "delayd_queue_jobs{") && strings.HasSuffix(k, `,state="`+st+`"}`) {
				sum += v
			}
		}
		if strconv.FormatFloat(sum, 'f', -1, 64) != in[st] {
			t.Errorf("delayd_queue_jobs{state=%q} sums to %v, INFO %s:%s", st, sum, st, in[st])
		}
	}
	// The labelled queues are the three with the most jobs (ties by name),
	// each as DELAY.STATS shows it; the rest is _other.
	var labelled []string
	for k := range m {
		if q, ok := strings.CutPrefix(k, `delayd_queue_added_total{queue="`); ok {
			labelled = append(labelled, strings.TrimSuffix(q, `"}`))
		}
	}
	sort.Strings(labelled)
	if fmt.Sprint(labelled) != "[_other q1 q2 work]" {
		t.Errorf("labelled queues %v, want work (6 jobs), q1 (5), q2 (4) and _other", labelled)
	}
	names := map[string]string{"added": "added", "deliveries": "delivered", "redeliveries": "redelivered",
		"acks": "acked", "nacks": "nacked", "expired": "expired", "dead_lettered": "dead_lettered"}
	for _, q := range []string{"q1", "q2", "work"} {
		st := fields(t, "DELAY.STATS "+q, do(t, c, "DELAY.STATS", q))
		for field, v := range st {
			name := `delayd_queue_` + names[field] + `_total{queue="` + q + `"}`
			if field == "latency" {
				// Seconds in the scrape, ms in DELAY.STATS, which is read
				// after it: the same age, grown by the time between.
				got, ok := m[`delayd_queue_latency_seconds{queue="`+q+`"}`]
				ms := asInt(t, field, v)
				if lag := float64(ms) - got*1000; !ok || lag < -1 || lag > 10_000 {
					t.Errorf("delayd_queue_latency_seconds{queue=%q} = %v (present %v), DELAY.STATS latency %d ms", q, got, ok, ms)
				}
				continue
			}
			if field == "paused" {
				name = `delayd_queue_paused{queue="` + q + `"}`
			} else if names[field] == "" {
				name = `delayd_queue_jobs{queue="` + q + `",state="` + field + `"}`
			}
			check(name, strconv.FormatInt(asInt(t, field, v), 10))
		}
	}
	for f := range names {
		sum := 0.0
		for k, v := range m {
			if strings.HasPrefix(k, "delayd_queue_"+names[f]+"_total{") {
				sum += v
			}
		}
		check("delayd_jobs_"+names[f]+"_total", strconv.FormatFloat(sum, 'f', -1, 64))
	}
	// INFO lateness is the lateness histogram, in ms.
	for k, v := range in {
		le, ok := strings.CutPrefix(k, "le_")
		if !ok {
			continue
		}
		bound := "+Inf"
		if le != "inf" {
			ms, _ := strconv.ParseFloat(le, 64)
			bound = strconv.FormatFloat(ms/1000, 'g', -1, 64)
		}
		check(`delayd_job_lateness_seconds_bucket{le="`+bound+`"}`, v)
	}
	check("delayd_job_lateness_seconds_count", in["count"])
	if sum, _ := strconv.ParseFloat(in["sum_ms"], 64); m["delayd_job_lateness_seconds_sum"]*1000 < sum || m["delayd_job_lateness_seconds_sum"]*1000 >= sum+1 {
		t.Errorf("lateness sum %v s, INFO sum_ms %v", m["delayd_job_lateness_seconds_sum"], sum)
	}
	// Every first delivery: work's 3, fragile, once.
	check("delayd_job_lateness_seconds_count", "5")
	check("delayd_job_ack_duration_seconds_count", "1")
	if m["delayd_log_fsync_duration_seconds_count"] < 1 {
		t.Errorf("no fsync counted under appendfsync always")
	}
	// INFO commandstats is the command series (but INFO's own call, which
	// counts once it returned).
	for k, v := range in {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok || name == "info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		check(`delayd_commands_total{command="`+name+`"}`, calls)
	}
	check(`delayd_commands_total{command="delay.add"}`, "24")

	if p := promtool(t); p != "" {
		cmd := exec.Command(p, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
}

// TestMetricsReadyzWhileLoading: while the log replays, /healthz says ok,
// /readyz 503 "loading" and /metrics answers; once loaded, /readyz 200.
func TestMetricsReadyzWhileLoading(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLog(t, dir, loadingJobs())
	port, httpAddr := freePort(t), "127.0.0.1:"+strconv.Itoa(freePort(t))
	s := newServer(t, port, nil, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--appendonly", "yes", "--auto-rewrite-percentage", "0", "--http-addr", httpAddr,
		"--log-level", "info", "--log-format", "json")
	if err := s.Spawn(); err != nil {
		t.Fatal(err)
	}
	// The HTTP side listens before the replay starts: the first answer is
	// "loading".
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "loading\n" {
				t.Fatalf("first /readyz: %d %q, want 503 loading (is the log too small to see the load?)", resp.StatusCode, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer within 10s: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, body := scrape(t, httpAddr, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz while loading: %d %q", code, body)
	}
	if code, body := scrape(t, httpAddr, "/metrics"); code != 200 || !strings.Contains(body, "\ndelayd_connected_clients ") ||
		strings.Contains(body, "\ndelayd_queues ") {
		t.Errorf("/metrics while loading: %d, want the metrics that do not need the engine\n%s", code, body)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, body := scrape(t, httpAddr, "/readyz")
		if code == 200 && body == "ready\n" {
			break
		}
		if code != http.StatusServiceUnavailable || body != "loading\n" || time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %q, want 503 loading until ready", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, text := scrape(t, httpAddr, "/metrics")
	size := logBytes(t, dir)
	m := samples(t, text)
	if jobs := m[`delayd_queue_jobs{queue="q0",state="delayed"}`]; int(jobs) != loadingJobs()/16 || m["delayd_log_size_bytes"] != float64(size) {
		t.Errorf("/metrics after the load: q0 has %v jobs (want %d), log size %v (want %d)", jobs, loadingJobs()/16, m["delayd_log_size_bytes"], size)
	}
}
