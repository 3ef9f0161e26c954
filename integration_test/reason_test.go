package integration

import (
	"strings"
	"testing"
	"time"
)

// DELAY.NACK ... ERROR text: the reason is shown by DELAY.GET as error,
// follows the job into its dead-letter queue and back out with
// DELAY.REQUEUE, and survives a restart and a log rewrite.
func TestReasonSurvivesDeadLetterRequeueRestartAndRewrite(t *testing.T) {
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	errorOf := func(q, id string) any {
		t.Helper()
		return fields(t, "DELAY.GET "+q+" "+id, do(t, c, "DELAY.GET", q, id))["error"]
	}
	expect(t, c, "j", "DELAY.ADD", "q", 0, "p", "ID", "j", "ACKTIMEOUT", 60000, "RETRY", 1, "DEADLETTER", "dlq")
	if e := errorOf("q", "j"); e != nil {
		t.Fatalf("a new job has error %v", e)
	}
	expect(t, c, []any{"q", "j", "p"}, "DELAY.POP", "q", 1)
	expect(t, c, int64(1), "DELAY.NACK", "q", "j", "ERROR", "connection refused: db:5432")
	if e := errorOf("q", "j"); e != "connection refused: db:5432" {
		t.Fatalf("after NACK ERROR: error %v", e)
	}
	expect(t, c, []any{"q", "j", "p"}, "DELAY.POP", "q", 1)
	expect(t, c, int64(1), "DELAY.NACK", "q", "j", 0, "ERROR", "still refused")
	if e := errorOf("dlq", "j"); e != "still refused" {
		t.Fatalf("dead-lettered: error %v", e)
	}
	s.Restart()
	c = s.Client()
	if e := errorOf("dlq", "j"); e != "still refused" {
		t.Fatalf("after a restart: error %v", e)
	}
	expect(t, c, int64(1), "DELAY.REQUEUE", "dlq", "j")
	expect(t, c, anyReply{}, "BGREWRITEAOF")
	durWaitRewriteDone(t, s, 10*time.Second)
	s.Restart()
	c = s.Client()
	if e := errorOf("q", "j"); e != "still refused" {
		t.Fatalf("requeued, rewritten and restarted: error %v", e)
	}
	expect(t, c, errIs("ERR ERROR text must be 1 to 1024 bytes"), "DELAY.NACK", "q", "j", "ERROR", strings.Repeat("x", 1025))
}
