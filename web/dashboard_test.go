package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
)

// get fetches a path from the server's whole handler.
func get(t *testing.T, s *Server, path string, hdr ...string) (int, string) {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(body)
}

func post(t *testing.T, s *Server, path, form string, hdr ...string) (int, string) {
	t.Helper()
	r := httptest.NewRequest("POST", path, strings.NewReader(form))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(body)
}

func must(t *testing.T, s *Server, args ...string) any {
	t.Helper()
	v, err := s.Do(context.Background(), args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// dataValue is the value of <data data-k="k" value="N"> in a page.
func dataValue(t *testing.T, body, k string) string {
	t.Helper()
	m := regexp.MustCompile(`data-k="` + regexp.QuoteMeta(k) + `" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no data-k=%q in the page", k)
	}
	return m[1]
}

func TestDashboardPagesShowWhatCommandsSay(t *testing.T) {
	s := newTestServer(t, Options{})
	for i := range 3 {
		must(t, s, "DELAY.ADD", "mail", "0", fmt.Sprintf("ready %d", i))
	}
	must(t, s, "DELAY.ADD", "mail", "60000", "later", "ID", "later")
	must(t, s, "DELAY.ADD", "other", "0", "x")

	code, body := get(t, s, "/")
	if code != 200 || !strings.Contains(body, "<!doctype html>") {
		t.Fatalf("/: %d %.200s", code, body)
	}
	for k, want := range map[string]string{"jobs": "5", "ready": "4", "delayed": "1", "reserved": "0", "queues": "2", "jobs_added": "5"} {
		if got := dataValue(t, body, k); got != want {
			t.Errorf("overview %s: %s, want %s", k, got, want)
		}
	}
	if !strings.Contains(body, `id="ov-lateness" data-live class="panel">`) || !strings.Contains(body, "<meter") {
		t.Error("INFO lateness is there but the overview shows no histogram")
	}

	code, body = get(t, s, "/queues?sort=total")
	if code != 200 || dataValue(t, body, "queue_count") != "2" {
		t.Fatalf("/queues: %d %.300s", code, body)
	}
	if i, j := strings.Index(body, `data-queue="mail"`), strings.Index(body, `data-queue="other"`); i < 0 || j < 0 || i > j {
		t.Errorf("sorted by total, mail (4 jobs) comes before other (1)")
	}

	code, body = get(t, s, "/queue?key=mail")
	if code != 200 || dataValue(t, body, "ready") != "3" || dataValue(t, body, "delayed") != "1" {
		t.Fatalf("/queue?key=mail: %d %.300s", code, body)
	}
	if !strings.Contains(body, `<td class="payload">ready 0</td>`) {
		t.Errorf("the queue page does not list its ready jobs")
	}
	if !strings.Contains(body, `data-id="later"`) || !strings.Contains(body, `href="/job?id=later&amp;key=mail"`) {
		t.Errorf("the queue page does not list its delayed job")
	}
	// A reserved job is listed with its ack deadline and deliveries.
	must(t, s, "DELAY.ADD", "held", "0", "in hand", "ID", "h1", "ACKTIMEOUT", "600000")
	must(t, s, "DELAY.POP", "held", "1")
	_, body = get(t, s, "/queue?key=held")
	reserved := body[strings.Index(body, `id="q-reserved"`):]
	if !strings.Contains(reserved, `data-id="h1"`) || !strings.Contains(reserved, `<td class="n">1</td><td class="payload">in hand</td>`) {
		t.Errorf("the queue page does not list its reserved job:\n%.1500s", reserved)
	}

	// A live update is <main>'s content only.
	code, body = get(t, s, "/queue?key=mail", liveHeader, "1")
	if code != 200 || strings.Contains(body, "<html") || !strings.Contains(body, `id="q-head"`) {
		t.Fatalf("live update: %d %.200s", code, body)
	}
}

func TestDashboardPayloadsAreShownSafely(t *testing.T) {
	s := newTestServer(t, Options{})
	must(t, s, "DELAY.ADD", "q", "0", `<script>alert(1)</script>"'&`, "ID", "html")
	must(t, s, "DELAY.ADD", "q", "0", "\x00\x01\xffbin", "ID", "bin")
	must(t, s, "DELAY.ADD", "q", "0", strings.Repeat("é", 5000), "ID", "long")
	must(t, s, "DELAY.ADD", "q\xff<b>", "0", "x", "ID", "i<d")

	_, body := get(t, s, "/job?key=q&id=html")
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("an HTML payload is not escaped: %s", body)
	}
	_, body = get(t, s, "/job?key=q&id=bin")
	if !strings.Contains(body, "00000000  00 01 ff 62 69 6e") || !strings.Contains(body, "|...bin|") {
		t.Errorf("a binary payload is not a hex dump: %s", body)
	}
	_, body = get(t, s, "/job?key=q&id=long")
	if !strings.Contains(body, "Showing the first 4,096 of 10,000 bytes") || !strings.Contains(body, "full=1") {
		t.Errorf("a long payload is not cut with a way to see more")
	}
	_, body = get(t, s, "/job?key=q&id=long&full=1")
	if !strings.Contains(body, strings.Repeat("é", 5000)) {
		t.Errorf("full=1 does not show the whole payload")
	}
	code, raw := get(t, s, "/job/payload?key=q&id=bin")
	if code != 200 || raw != "\x00\x01\xffbin" {
		t.Errorf("/job/payload: %d %q", code, raw)
	}
	// A name with any byte: shown escaped, linked exactly.
	_, body = get(t, s, "/queues")
	if !strings.Contains(body, `q\xff&lt;b&gt;`) || !strings.Contains(body, "/queue?key="+url.QueryEscape("q\xff<b>")) {
		t.Errorf("a binary queue name is not shown escaped and linked exactly: %s", body)
	}
	_, body = get(t, s, "/queue?"+url.Values{"key": {"q\xff<b>"}}.Encode())
	if dataValue(t, body, "ready") != "1" {
		t.Errorf("the page of a binary-named queue does not find it")
	}
	for _, path := range []string{"/", "/queues", "/queue?key=q", "/job?key=q&id=html"} {
		r := httptest.NewRequest("GET", path, nil)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
}

func TestDashboardActionsConfirmAndRefuseCrossSite(t *testing.T) {
	s := newTestServer(t, Options{})
	must(t, s, "DELAY.ADD", "q", "0", "x", "ID", "j1")
	must(t, s, "DELAY.ADD", "q", "0", "y", "ID", "j2")
	act := "/action?" + url.Values{"op": {"cancel"}, "key": {"q"}, "id": {"j1"}, "back": {"/queue?key=q"}}.Encode()

	// Not confirmed: a page that asks, and nothing done.
	code, body := post(t, s, act, "")
	if code != 200 || !strings.Contains(body, "Cancel job j1 of queue q?") || !strings.Contains(body, `name="confirmed" value="1"`) {
		t.Fatalf("unconfirmed: %d %.300s", code, body)
	}
	if must(t, s, "DELAY.GET", "q", "j1") == nil {
		t.Fatal("an unconfirmed cancel removed the job")
	}
	// From another site: refused.
	code, _ = post(t, s, act, "confirmed=1", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
	if code != http.StatusForbidden || must(t, s, "DELAY.GET", "q", "j1") == nil {
		t.Fatalf("cross-site cancel: %d, want 403 and the job kept", code)
	}
	// From this site, confirmed: done, and the page says so.
	code, body = post(t, s, act, "confirmed=1", "Origin", "http://example.com", "Sec-Fetch-Site", "same-origin")
	if code != 200 || !strings.Contains(body, "Cancelled job j1 of queue q.") || must(t, s, "DELAY.GET", "q", "j1") != nil {
		t.Fatalf("confirmed cancel: %d %.300s", code, body)
	}
	// The script's post gets JSON; a command's error is shown, not hidden.
	act2 := "/action?" + url.Values{"op": {"cancel"}, "key": {"q"}, "id": {"j1"}}.Encode()
	code, body = post(t, s, act2, "confirmed=1", actionHeader, "1")
	var res actionResult
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || !res.OK || !strings.Contains(res.Message, "No job j1") {
		t.Fatalf("JSON cancel of a gone job: %d %s %v", code, body, err)
	}
	act3 := "/action?" + url.Values{"op": {"pause"}, "key": {strings.Repeat("k", 20000)}}.Encode()
	code, body = post(t, s, act3, "confirmed=1", actionHeader, "1")
	res = actionResult{}
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.OK || res.Error == "" {
		t.Fatalf("JSON pause of a too long key: %d %s %v (want the command's error)", code, body, err)
	}
	// Only a path on this server to go back to.
	code, body = post(t, s, "/action?op=cancel&key=q&id=j2&back=//evil.example/", "confirmed=1")
	if code != 200 || strings.Contains(body, "evil.example") {
		t.Fatalf("back to another site: %d %.300s", code, body)
	}
	// Bad requests.
	if code, _ := post(t, s, "/action?op=explode&key=q", "confirmed=1"); code != http.StatusBadRequest {
		t.Errorf("unknown action: %d, want 400", code)
	}
	if code, _ := get(t, s, act); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /action: %d, want 405", code)
	}
}

func TestDashboardDeadLetteredJobsAndPause(t *testing.T) {
	s := newTestServer(t, Options{})
	must(t, s, "DELAY.ADD", "src", "0", "x", "ID", "d1", "RETRY", "0", "ACKTIMEOUT", "60000", "DEADLETTER", "dlq")
	must(t, s, "DELAY.ADD", "src", "0", "y", "ID", "d2", "RETRY", "0", "ACKTIMEOUT", "60000", "DEADLETTER", "dlq")
	for _, id := range []string{"d1", "d2"} {
		must(t, s, "DELAY.POP", "src", "1")
		must(t, s, "DELAY.NACK", "src", id) // no delivery left: dead-lettered
	}
	_, body := get(t, s, "/queue?key=dlq")
	if !strings.Contains(body, `data-op="requeue-all"`) || strings.Count(body, `op=requeue" data-confirm`) != 2 || !strings.Contains(body, `<a href="/queue?key=src">src</a>`) {
		t.Fatalf("the dead-letter queue's page offers no requeue, or does not name the origin: %s", body)
	}
	_, body = get(t, s, "/job?key=dlq&id=d1")
	if !strings.Contains(body, `data-field="origin"`) || !strings.Contains(body, `data-op="requeue"`) {
		t.Fatalf("the dead-lettered job's page: %s", body)
	}
	code, body := post(t, s, "/action?op=requeue&key=dlq&id=d1", "confirmed=1", actionHeader, "1")
	if code != 200 || !strings.Contains(body, "Requeued job d1 of queue dlq.") {
		t.Fatalf("requeue: %d %s", code, body)
	}
	if st := fieldMap(must(t, s, "DELAY.STATS", "src")); num(st["ready"]) != 1 {
		t.Fatalf("src after requeue: %v", st)
	}
	_, body = post(t, s, "/action?op=requeue-all&key=dlq", "confirmed=1", actionHeader, "1")
	if !strings.Contains(body, "Requeued 1 job(s) of dlq.") {
		t.Fatalf("requeue all: %s", body)
	}
	_, body = get(t, s, "/queue?key=src")
	if strings.Contains(body, `data-op="requeue`) {
		t.Errorf("jobs that were not dead-lettered are offered a requeue")
	}

	_, body = post(t, s, "/action?op=pause&key=src", "confirmed=1", actionHeader, "1")
	if !strings.Contains(body, "Paused queue src.") || num(fieldMap(must(t, s, "DELAY.STATS", "src"))["paused"]) != 1 {
		t.Fatalf("pause: %s", body)
	}
	_, body = get(t, s, "/queue?key=src")
	if !strings.Contains(body, `data-k="paused"`) || !strings.Contains(body, `data-op="resume"`) {
		t.Fatalf("a paused queue's page")
	}
	_, body = get(t, s, "/queues")
	if !strings.Contains(body, `<span class="badge warn" data-k="paused">paused</span>`) {
		t.Fatalf("the queue list does not mark the paused queue")
	}
	_, body = post(t, s, "/action?op=resume&key=src", "confirmed=1", actionHeader, "1")
	if !strings.Contains(body, "Resumed queue src.") || num(fieldMap(must(t, s, "DELAY.STATS", "src"))["paused"]) != 0 {
		t.Fatalf("resume: %s", body)
	}
}

func TestDashboardQueueListPagesAndSorts(t *testing.T) {
	s := newTestServer(t, Options{})
	for i := range 120 {
		for range i % 7 {
			must(t, s, "DELAY.ADD", fmt.Sprintf("q%03d", i), "0", "x")
		}
		must(t, s, "DELAY.ADD", fmt.Sprintf("q%03d", i), "60000", "x")
	}
	names := func(body string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`data-queue="([^"]*)"`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	_, body := get(t, s, "/queues?page=3")
	if got := names(body); len(got) != 20 || got[0] != "q100" || got[19] != "q119" || !strings.Contains(body, "page 3 of 3") {
		t.Fatalf("page 3 by name: %v", got)
	}
	_, body = get(t, s, "/queues?sort=ready&dir=desc")
	got := names(body)
	if len(got) != queuesPerPage || got[0] != "q006" || got[1] != "q013" {
		t.Fatalf("by ready, most first: %v", got)
	}
	_, body = get(t, s, "/queues?match=q11*")
	if dataValue(t, body, "queue_count") != "10" {
		t.Fatalf("match q11*: %s queues", dataValue(t, body, "queue_count"))
	}
}

func TestDashboardAssetsAndLimits(t *testing.T) {
	s := newTestServer(t, Options{})
	_, page := get(t, s, "/")
	weight := len(page)
	for _, m := range regexp.MustCompile(`(?:src|href)="(/ui/[^"]+)"`).FindAllStringSubmatch(page, -1) {
		code, body := get(t, s, strings.ReplaceAll(m[1], "&amp;", "&"))
		if code != 200 {
			t.Errorf("%s: %d", m[1], code)
		}
		weight += len(body)
	}
	if weight > 64<<10 {
		t.Errorf("the first page and its assets weigh %d bytes; the budget is 200 kB, and it was about 20", weight)
	}
	if code, _ := get(t, s, "/ui/layout.html"); code != http.StatusNotFound {
		t.Errorf("templates are served as files: %d", code)
	}
	if code, _ := get(t, s, "/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d", code)
	}
}

func TestDashboardShowsCommandErrors(t *testing.T) {
	// A dispatcher with no engine yet answers LOADING, as while the log
	// replays: every page says so instead of showing zeros.
	s := New(Options{Dispatcher: commands.New(commands.Options{Log: zerolog.Nop()}), Password: "pw"})
	for _, path := range []string{"/", "/queues", "/queue?key=q", "/job?key=q&id=x"} {
		r := httptest.NewRequest("GET", path, nil)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("%s without the password: %d", path, w.Code)
		}
		r.SetBasicAuth("", "pw")
		w = httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Body)
		want := `<p class="error" role="alert">LOADING`
		if path == "/" {
			want = `<p class="error" role="alert">Loading: the server is replaying its log`
		}
		if w.Code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s while loading: %d, no LOADING error shown: %.300s", path, w.Code, body)
		}
	}
}

func TestLatenessHistogram(t *testing.T) {
	if parseLateness(nil) != nil {
		t.Fatal("no section, no histogram")
	}
	h := parseLateness(map[string]string{"le_1": "50", "le_5": "90", "le_100": "99", "le_inf": "100", "count": "100", "sum_ms": "420"})
	if h == nil || len(h.Buckets) != 4 {
		t.Fatalf("%+v", h)
	}
	want := []bucket{{"≤ 1ms", 50, 50}, {"≤ 5ms", 40, 50}, {"≤ 100ms", 9, 50}, {"> 100ms", 1, 50}}
	for i, b := range want {
		if h.Buckets[i] != b {
			t.Errorf("bucket %d: %+v, want %+v", i, h.Buckets[i], b)
		}
	}
	if h.P50 != "≤ 1ms" || h.P99 != "≤ 100ms" {
		t.Errorf("p50 %s p99 %s", h.P50, h.P99)
	}
}

func TestRates(t *testing.T) {
	var rb rateBook
	t0 := time.Unix(1000, 0)
	if r := rb.observe("x", t0, 100); r != -1 {
		t.Fatalf("first sample: %v, want -1 (unknown)", r)
	}
	if r := rb.observe("x", t0.Add(500*time.Millisecond), 150); r != 100 {
		t.Fatalf("after 0.5s: %v, want 100/s", r)
	}
	// The base is the newest sample at least a second old.
	if r := rb.observe("x", t0.Add(2*time.Second), 400); r != (400-150)/1.5 {
		t.Fatalf("after 2s: %v, want 166.7/s", r)
	}
	if r := rb.observe("x", t0.Add(3*time.Second), 500); r != 100 {
		t.Fatalf("after 3s: %v, want 100/s", r)
	}
	if r := rb.observe("x", t0.Add(4*time.Second), 10); r != -1 {
		t.Fatalf("a counter that went back (restart): %v, want -1", r)
	}
}

func TestViewHelpers(t *testing.T) {
	for in, want := range map[string]string{"plain": "plain", "a\x00b": `a\x00b`, "\xff": `\xff`, `back\slash`: `back\\slash`, "": `""`, "é🙂": "é🙂"} {
		if got := showName(in); got != want {
			t.Errorf("showName(%q) = %q, want %q", in, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := fmtNum(n); got != want {
			t.Errorf("fmtNum(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{12: "12 B", 2048: "2.00 KiB", 5 << 20: "5.00 MiB", 300 << 20: "300 MiB"} {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %q, want %q", n, got, want)
		}
	}
	if v := viewPayload([]byte("héllo"), 2); v.Text != "h" || !v.Truncated || v.Binary {
		t.Errorf("a cut inside a rune: %+v", v)
	}
	if p := preview([]byte("a\n  b\tc")); p != "a b c" {
		t.Errorf("preview: %q", p)
	}
	if p := preview([]byte{0, 1, 2}); p != "binary, 3 bytes: 00 01 02" {
		t.Errorf("binary preview: %q", p)
	}
}
