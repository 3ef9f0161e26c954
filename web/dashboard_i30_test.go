package web

import (
	"regexp"
	"strings"
	"testing"
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
