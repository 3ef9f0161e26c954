package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC: binary-safe payloads, --max-payload-bytes, --max-jobs, --max-clients.

func TestBinarySafePayloads(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	payloads := map[string]string{
		"every byte":   string(all),
		"crlf inside":  "line1\r\nline2\r\n$3\r\n*1\r\n",
		"empty":        "",
		"nul only":     "\x00",
		"utf-8":        "délai ⏰ 遅延",
		"resp-looking": "-ERR not an error\r\n",
	}
	for name, p := range payloads {
		id := add(t, c, "bin", 0, p)
		expectJob(t, c, "bin", id, map[string]string{"payload": p}, 0, 0)
		expect(t, c, []any{[]any{id, p}}, "DELAY.PEEK", "bin")
		expect(t, c, []any{"bin", id, p}, "DELAY.POP", "bin", "0.5")
		if t.Failed() {
			t.Fatalf("payload %q (%s) did not come back unchanged", p, name)
		}
	}
	// binary keys too
	key := "k\x00\r\n\xff"
	id := add(t, c, key, 0, "in a binary key")
	expect(t, c, []any{key, id, "in a binary key"}, "DELAY.POP", key, "0.5")

	// a delayed binary payload survives the wheel
	id = add(t, c, "bin", 50, string(all))
	expect(t, c, []any{"bin", id, string(all)}, "DELAY.POP", "bin", "2")
}

func TestMaxPayloadBytes(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--max-payload-bytes", "1024")
	c := s.Client()

	exact := strings.Repeat("x", 1024)
	id := add(t, c, "q", 0, exact)
	chain(t, c,
		cmd(errIs("ERR payload exceeds max-payload-bytes (1024)"), "DELAY.ADD", "q", 0, exact+"y"),
		cmd(errIs("ERR payload exceeds max-payload-bytes (1024)"), "DELAY.ADDAT", "q", 1, strings.Repeat("z", 5000)),
		cmd(errIs("ERR payload exceeds max-payload-bytes (1024)"), "DELAY.ADD", "q", 0, exact+"y", "ID", "x", "REPLACE"),
		cmd([]any{"q", id, exact}, "DELAY.POP", "q", "0.5"),
		cmd(nil, "DELAY.POP", "q", "0.05"), // the rejected ones were not added
	)
	expectStats(t, c, "q", 0, 0, 0)
}

func TestMaxPayloadBytesDefault(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	const maxBytes = 4194304
	exact := strings.Repeat("p", maxBytes)
	id := add(t, c, "big", 0, exact)
	got, ok := do(t, c, "DELAY.POP", "big", "1").([]any)
	if !ok || len(got) != 3 || got[1] != id || got[2] != exact {
		t.Errorf("DELAY.POP of a %d-byte payload: got %s", maxBytes, showValue(got))
	}
	expect(t, c, errIs("ERR payload exceeds max-payload-bytes (4194304)"), "DELAY.ADD", "big", 0, exact+"!")
	expect(t, c, "PONG", "PING")
}

func TestMaxJobs(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--max-jobs", "3")
	c := s.Client()

	a := add(t, c, "q1", 0, "a")
	add(t, c, "q1", 60000, "b")
	add(t, c, "q2", 60000, "c") // the limit is over all queues
	chain(t, c,
		cmd(errPrefix("OOM max-jobs reached (3)"), "DELAY.ADD", "q3", 0, "d"),
		cmd(errPrefix("OOM max-jobs reached (3)"), "DELAY.ADDAT", "q1", 1, "e"),
		cmd(0, "DELAY.CANCEL", "q3", "whatever"),
		cmd([]any{"q1", a, "a"}, "DELAY.POP", "q1", "0.5"),
	)
	// a popped job frees its place
	add(t, c, "q3", 0, "d")
	expect(t, c, errPrefix("OOM max-jobs reached (3)"), "DELAY.ADD", "q3", 0, "e")
	expect(t, c, 3, "DBSIZE") // q1 holds b, q2 holds c, q3 holds d
}

func TestMaxClients(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--max-clients", "2")

	// Two connections that are sure to be counted: retry while the
	// harness's readiness probe may still hold a place.
	var live []*rawConn
	deadline := time.Now().Add(5 * time.Second)
	for len(live) < 2 {
		rc := s.dialRaw(t)
		rc.send("PING")
		line, err := rc.tryReadLine()
		if line == "+PONG" {
			live = append(live, rc)
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection %d: PING got %q (%v)", len(live)+1, line, err)
		}
		rc.c.Close()
		time.Sleep(50 * time.Millisecond)
	}

	third := s.dialRaw(t)
	third.send("PING")
	if line := third.readLine(); line != "-ERR max number of clients reached" {
		t.Errorf("third connection: PING got %q, want %q", line, "-ERR max number of clients reached")
	}

	// the two live ones still work
	for i, rc := range live {
		rc.send("PING")
		if line := rc.readLine(); line != "+PONG" {
			t.Errorf("connection %d: PING got %q", i+1, line)
		}
	}

	// when one leaves, a new one gets in
	live[0].c.Close()
	deadline = time.Now().Add(5 * time.Second)
	for {
		rc := s.dialRaw(t)
		rc.send("PING")
		line, err := rc.tryReadLine()
		rc.c.Close()
		if line == "+PONG" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a client left, a new connection still gets %q (%v)", line, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --maxmemory counts the jobs, which live outside the Go heap (engine
// pages mapped from the OS): filling the server with payloads must reach
// the limit and get Redis's OOM error, while DEL still works.
func TestMaxMemoryCountsJobsOffHeap(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--maxmemory", "48mb")
	c := s.Client()
	ctx := context.Background()
	payload := strings.Repeat("p", 1000)
	oom, added := false, 0
	for round := 0; round < 200 && !oom; round++ { // at most 200k jobs, 200 MB of payloads
		p := c.Pipeline()
		cmds := make([]*redis.Cmd, 1000)
		for i := range cmds {
			cmds[i] = p.Do(ctx, "DELAY.ADD", "mm", 3600000, payload)
		}
		p.Exec(ctx)
		for _, r := range cmds {
			if err := r.Err(); err != nil {
				if !strings.HasPrefix(err.Error(), "OOM command not allowed when used memory > 'maxmemory'.") {
					t.Fatalf("add %d: %v", added, err)
				}
				oom = true
			} else {
				added++
			}
		}
		time.Sleep(60 * time.Millisecond) // the server samples its memory every 50 ms
	}
	if !oom {
		t.Fatalf("%d jobs of 1000 bytes (%d MB) added under --maxmemory 48mb without an OOM", added, added/1000)
	}
	if added < 10000 {
		t.Fatalf("only %d jobs before the OOM: the limit trips far below 48 MB", added)
	}
	t.Logf("OOM after %d jobs of 1000 bytes", added)
	expect(t, c, 1, "DEL", "mm") // taking jobs out still works
}
