package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
)

// Recurring schedules are text on a queue's page and on /schedules: a
// template given DELAY.SCHEDULES's bulk strings as they are printed them
// as byte values ([104 111 117 ...]).
func TestDashboardSchedulesAreText(t *testing.T) {
	s := newTestServer(t, Options{})
	must(t, s, "DELAY.SCHEDULE", "reports", "nightly", "CRON", "30 2 * * *", "TZ", "Europe/Berlin", `{"report":"daily"}`, "MISFIRE", "once")
	must(t, s, "DELAY.SCHEDULE", "beat", "tick", "EVERY", "60000", "ping")

	_, body := get(t, s, "/queue?key=reports")
	sched := body[strings.Index(body, `id="q-schedules"`):]
	for _, want := range []string{`<td data-k="name">nightly</td>`, `<code>CRON 30 2 * * *</code>`, `<td data-k="zone">Europe/Berlin</td>`, `<td data-k="misfire">once</td>`} {
		if !strings.Contains(sched, want) {
			t.Errorf("the queue's schedules lack %s:\n%.1500s", want, sched)
		}
	}
	if strings.Contains(body, "[110 105") || strings.Contains(body, "[67 82 79 78") {
		t.Errorf("the queue page shows a schedule as bytes")
	}

	code, body := get(t, s, "/schedules")
	if code != 200 || dataValue(t, body, "schedule_count") != "2" {
		t.Fatalf("/schedules: %d %.300s", code, body)
	}
	for _, want := range []string{`data-schedule="tick" data-queue="beat"`, `<code>EVERY 60000</code>`, `data-schedule="nightly" data-queue="reports"`, `href="/queue?key=beat"`, `data-op="unschedule"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/schedules lacks %s", want)
		}
	}
	if !strings.Contains(body, `<a href="/schedules" aria-current="page">Schedules</a>`) {
		t.Errorf("the menu does not mark Schedules")
	}

	// Unschedule, confirmed: DELAY.SCHEDULES no longer lists it.
	code, _ = post(t, s, "/action?op=unschedule&key=beat&id=tick&back=/schedules", "confirmed=1", actionHeader, "1")
	if code != 200 {
		t.Fatalf("unschedule: %d", code)
	}
	if rows := scheduleRows(must(t, s, "DELAY.SCHEDULES")); len(rows) != 1 || rows[0].Name != "nightly" {
		t.Fatalf("after unschedule DELAY.SCHEDULES lists %+v", rows)
	}
}

// Each counter of the overview is named for what its INFO field counts:
// jobs_fired is delayed jobs that came due, not schedule firings.
func TestDashboardCountersNamedForWhatTheyCount(t *testing.T) {
	s := newTestServer(t, Options{})
	must(t, s, "DELAY.ADD", "q", "0", "x")
	_, body := get(t, s, "/")
	if strings.Contains(body, "fired by schedules") {
		t.Error(`the overview still calls jobs_fired "fired by schedules"`)
	}
	for key, name := range map[string]string{
		"jobs_fired": "delayed jobs that came due", "jobs_expired": "ack timeouts",
		"jobs_requeued": "taken back from workers that left", "jobs_added": "jobs added",
	} {
		row := regexp.MustCompile(`<tr><th scope="row"[^>]*>([^<]*)(?:<small>[^<]*</small>)?</th><td class="n"><data data-k="` + key + `"`).FindStringSubmatch(body)
		if row == nil || strings.TrimSpace(row[1]) != name {
			t.Errorf("%s is shown as %q, want %q", key, row, name)
		}
	}
}

// A leader's http-addr becomes a link a browser elsewhere can follow, or
// the reason there is none.
func TestLeaderLink(t *testing.T) {
	for _, c := range []struct {
		http, resp string
		https      bool
		url, why   string
	}{
		{"127.0.0.1:6381", "127.0.0.1:6380", false, "http://127.0.0.1:6381", ""},
		{"0.0.0.0:6381", "10.0.0.1:6380", false, "http://10.0.0.1:6381", ""},
		{":6381", "10.0.0.1:6380", true, "https://10.0.0.1:6381", ""},
		{"[::]:6381", "[fd00::1]:6380", false, "http://[fd00::1]:6381", ""},
		{"10.0.0.9:8080", "10.0.0.1:6380", false, "http://10.0.0.9:8080", ""},
		{"127.0.0.1:6381", "10.0.0.1:6380", false, "", "its own machine only"},
		{"", "10.0.0.1:6380", false, "", "HTTP side is off"},
	} {
		url, why := leaderLink(c.http, c.resp, c.https)
		if url != c.url || !strings.Contains(why, c.why) || (c.why == "" && why != "") {
			t.Errorf("leaderLink(%q, %q, %v) = %q, %q; want %q, %q", c.http, c.resp, c.https, url, why, c.url, c.why)
		}
	}
}

// One job and a selection: run now (DELAY.PROMOTE), reschedule, cancel and
// requeue, each through the confirmation, and what RESP says afterwards.
func TestDashboardActionsOnOneJobAndASelection(t *testing.T) {
	s := newTestServer(t, Options{})
	for _, id := range []string{"a", "b", "c", "d", "e\x00\xff"} {
		must(t, s, "DELAY.ADD", "q", "600000", "p", "ID", id)
	}
	state := func(id string) string { return str(fieldMap(must(t, s, "DELAY.GET", "q", id))["state"]) }

	// The queue page offers the selection: a box per job, and the bulk form.
	_, body := get(t, s, "/queue?key=q")
	for _, want := range []string{`form="sel-upcoming"`, `value="e%00%FF"`, `id="sel-upcoming"`, `value="promote" data-op="promote"`, `value="reschedule"`, `&amp;op=promote" data-confirm`} {
		if !strings.Contains(body, want) {
			t.Errorf("the queue page lacks %s", want)
		}
	}

	// A selection posted without confirmation: a page that asks, naming how
	// many, and posting the same ids again.
	sel := "op=promote&ids=a&ids=" + url.QueryEscape(url.QueryEscape("e\x00\xff"))
	code, body := post(t, s, "/action?key=q&back=/queue%3Fkey%3Dq", sel)
	if code != 200 || !strings.Contains(body, "Run the 2 selected jobs of queue q now?") || !strings.Contains(body, `name="ids" value="e%00%FF"`) {
		t.Fatalf("unconfirmed selection: %d %.2000s", code, body)
	}
	if state("a") != "delayed" {
		t.Fatal("an unconfirmed run-now moved the job")
	}
	code, body = post(t, s, "/action?key=q", sel+"&confirmed=1", actionHeader, "1")
	if code != 200 || !strings.Contains(body, "Made ready 2 of 2 selected jobs of queue q.") {
		t.Fatalf("run now: %d %s", code, body)
	}
	if state("a") != "ready" || state("e\x00\xff") != "ready" || state("b") != "delayed" {
		t.Fatalf("after run now: a %s, e %s, b %s", state("a"), state("e\x00\xff"), state("b"))
	}

	// Reschedule one job: its due time moves to about now + 1h.
	before := num(fieldMap(must(t, s, "DELAY.GET", "q", "b"))["due"])
	code, body = post(t, s, "/action?op=reschedule&key=q&id=b", "delay=1h&confirmed=1", actionHeader, "1")
	if code != 200 || !strings.Contains(body, "Rescheduled job b of queue q.") {
		t.Fatalf("reschedule: %d %s", code, body)
	}
	if after := num(fieldMap(must(t, s, "DELAY.GET", "q", "b"))["due"]); after-before < 2_900_000 {
		t.Fatalf("reschedule by 1h moved due from %d to %d", before, after)
	}
	// A ready job rescheduled becomes delayed; a delay that is no duration
	// is refused before anything runs.
	if code, body = post(t, s, "/action?op=reschedule&key=q", "ids=a&delay=soon&confirmed=1", actionHeader, "1"); code != 400 || !strings.Contains(body, `delay \"soon\" is not a duration`) {
		t.Fatalf("a bad delay: %d %s", code, body)
	}
	post(t, s, "/action?op=reschedule&key=q", "ids=a&delay=90000&confirmed=1", actionHeader, "1")
	if state("a") != "delayed" {
		t.Fatalf("a ready job rescheduled is %s", state("a"))
	}

	// Cancel a selection of three: DELAY.STATS counts them gone.
	code, body = post(t, s, "/action?op=cancel&key=q", "ids=a&ids=b&ids=c&confirmed=1", actionHeader, "1")
	if code != 200 || !strings.Contains(body, "Cancelled 3 of 3 selected jobs of queue q.") {
		t.Fatalf("cancel a selection: %d %s", code, body)
	}
	if st := fieldMap(must(t, s, "DELAY.STATS", "q")); num(st["delayed"])+num(st["ready"]) != 2 {
		t.Fatalf("after cancelling 3 of 5: %v", st)
	}
	if code, _ := post(t, s, "/action?op=cancel&key=q", "confirmed=1", actionHeader, "1"); code != 400 {
		t.Errorf("an empty selection: %d, want 400", code)
	}
}

// A JSON payload is shown indented, its keys, order and numbers as sent;
// text that is not a JSON document, and binary, are shown as before.
func TestDashboardPayloadJSONIndented(t *testing.T) {
	for _, c := range []struct {
		in   string
		json bool
		text string
	}{
		{`{"to":"a@b.c","n":[1,2.50],"z":{}}`, true, "{\n  \"to\": \"a@b.c\",\n  \"n\": [\n    1,\n    2.50\n  ],\n  \"z\": {}\n}"},
		{` [1, {"b":1,"a":2}]`, true, "[\n  1,\n  {\n    \"b\": 1,\n    \"a\": 2\n  }\n]"},
		{`"just a string"`, false, `"just a string"`},
		{`{"cut":`, false, `{"cut":`},
		{`12345`, false, `12345`},
	} {
		v := viewPayload([]byte(c.in), payloadLimit)
		if v.JSON != c.json || v.Text != c.text {
			t.Errorf("viewPayload(%q): JSON %v, text %q; want %v, %q", c.in, v.JSON, v.Text, c.json, c.text)
		}
	}
	// Too long to show whole: as sent, cut.
	long := `{"x":"` + strings.Repeat("a", payloadLimit) + `"}`
	if v := viewPayload([]byte(long), payloadLimit); v.JSON || !v.Truncated {
		t.Errorf("a JSON payload longer than the limit: JSON %v, truncated %v", v.JSON, v.Truncated)
	}
	if v := viewPayload([]byte(long), payloadFull); !v.JSON || v.Truncated {
		t.Errorf("the same payload shown whole: JSON %v, truncated %v", v.JSON, v.Truncated)
	}

	s := newTestServer(t, Options{})
	must(t, s, "DELAY.ADD", "q", "0", `{"to":"<b>x</b>","n":1}`, "ID", "j")
	_, body := get(t, s, "/job?key=q&id=j")
	if !strings.Contains(body, "JSON, indented") || !strings.Contains(body, "{\n  &#34;to&#34;: &#34;&lt;b&gt;x&lt;/b&gt;&#34;,\n  &#34;n&#34;: 1\n}</pre>") {
		t.Errorf("the job page does not show the JSON payload indented and escaped:\n%s", body[strings.Index(body, `id="job-payload"`):])
	}
}

// The charts' ring: samples taken at fake times become rates per second
// and latency points, drawn as SVG polylines; the ring and the number of
// queues sampled are bounded.
func TestDashboardChartsFromTheRing(t *testing.T) {
	s := newTestServer(t, Options{})
	d := s.dash
	ctx := context.Background()
	t0 := time.Now()
	must(t, s, "DELAY.ADD", "q", "0", "first", "ACKTIMEOUT", "60000")
	d.sample(ctx, t0)
	for i := range 10 {
		must(t, s, "DELAY.ADD", "q", "0", fmt.Sprint("job ", i), "ACKTIMEOUT", "60000")
	}
	for range 4 {
		job := list(must(t, s, "DELAY.POP", "q", "1"))
		if len(job) < 2 {
			t.Fatalf("DELAY.POP: %v", job)
		}
		if n := num(must(t, s, "DELAY.ACK", "q", str(job[1]))); n != 1 {
			t.Fatalf("DELAY.ACK: %d", n)
		}
	}
	d.sample(ctx, t0.Add(chartStep))
	c := d.chartsFor("q", t0.Add(chartStep))
	last := map[string]string{}
	for _, l := range c.Rates.Lines {
		last[l.Key] = l.Last
		if l.N != 1 || !strings.Contains(l.Points, ",") {
			t.Errorf("%s: %d points %q, want 1", l.Key, l.N, l.Points)
		}
	}
	if last["adds"] != "1.0" || last["deliveries"] != "0.4" || last["acks"] != "0.4" {
		t.Errorf("rates over 10s of 10 adds, 4 pops, 4 acks: %v", last)
	}
	// The head of the ready list has been due since before t0: its age at
	// t0+10s is at least 10s.
	if l := c.Latency.Lines[0]; l.N != 2 || !strings.HasSuffix(l.Last, "s") {
		t.Errorf("latency: %d points, last %q", l.N, l.Last)
	}
	_, body := get(t, s, "/queue?key=q")
	if !regexp.MustCompile(`<polyline class="s0" data-series="adds" data-n="1" points="[0-9.]+,[0-9.]+"`).MatchString(body) {
		t.Errorf("the queue page draws no adds line:\n%.3000s", body[strings.Index(body, `id="q-charts"`):])
	}
	_, body = get(t, s, "/")
	if !strings.Contains(body, `id="ov-charts"`) || !strings.Contains(body, `data-series="deliveries" data-n="1"`) {
		t.Errorf("the overview draws no server chart")
	}

	// A ring holds an hour: more samples replace the oldest.
	for i := 2; i < chartPoints+50; i++ {
		d.sample(ctx, t0.Add(time.Duration(i)*chartStep))
	}
	now := t0.Add((chartPoints + 49) * chartStep)
	if n := len(d.charts.queues["q"].samples(now)); n != chartPoints {
		t.Errorf("%d samples kept, want %d", n, chartPoints)
	}
	// At most chartQueues queues are sampled; one a reader opens replaces
	// the one idle longest.
	for i := range chartQueues + 20 {
		must(t, s, "DELAY.ADD", fmt.Sprint("many-", i), "60000", "x")
	}
	for i := range 3 {
		d.sample(ctx, now.Add(time.Duration(i+1)*chartStep))
	}
	if n := len(d.charts.queueNamesSampled()); n != chartQueues {
		t.Errorf("%d queues sampled, want %d", n, chartQueues)
	}
	var outside string
	for i := range chartQueues + 20 {
		if n := fmt.Sprint("many-", i); !slices.Contains(d.charts.queueNamesSampled(), n) {
			outside = n
			break
		}
	}
	d.chartsFor(outside, now.Add(4*chartStep))
	if names := d.charts.queueNamesSampled(); len(names) != chartQueues || !slices.Contains(names, outside) {
		t.Errorf("an opened queue is not sampled, or the cap is broken: %d queues", len(names))
	}
}

// The sampler starts with the first dashboard page of a listening server,
// not before (a server nobody looks at runs no commands of its own), and
// stops with Close.
func TestDashboardSamplerStartsWithTheFirstPage(t *testing.T) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	disp := commands.New(commands.Options{Engine: eng, Log: zerolog.Nop()})
	s := New(Options{Addr: "127.0.0.1:0", Dispatcher: disp})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	defer s.Close(time.Second)
	base := "http://" + s.Addr().String()
	if resp, err := http.Get(base + "/metrics"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if s.dash.charts.started.Load() {
		t.Fatal("the sampler runs before anyone opened the dashboard")
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !s.dash.charts.started.Load() {
		t.Fatal("the first page did not start the sampler")
	}
	s.Close(time.Second)
	select {
	case <-s.dash.charts.done:
	default:
		t.Fatal("Close did not stop the sampler")
	}
}

// The ring's memory is what the comments and docs say: about 20 KiB a
// queue.
func TestChartRingSize(t *testing.T) {
	if n := unsafe.Sizeof(chartSeries{}); n > 21<<10 {
		t.Errorf("a queue's ring is %d bytes, the docs say about 20 KiB", n)
	}
}
