package web

import (
	"strings"
	"testing"
)

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
