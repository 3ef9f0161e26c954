package integration

import (
	"strings"
	"testing"
	"time"
)

// SPEC: inline commands (telnet, redis-cli pipes), malformed RESP, and
// redis-cli itself.

func TestInlineCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rc := s.dialRaw(t)

	rc.write("PING\r\n")
	if line := rc.readLine(); line != "+PONG" {
		t.Errorf("inline PING: got %q, want +PONG", line)
	}
	rc.write("PING\n") // telnet users may send a bare LF
	if line := rc.readLine(); line != "+PONG" {
		t.Errorf("inline PING with LF: got %q, want +PONG", line)
	}
	rc.write("ECHO \"two words\"\r\n")
	if r := rc.read(); r.str != "two words" {
		t.Errorf("inline ECHO \"two words\": got %s", r)
	}
	rc.write("DELAY.ADD q 0 hello\r\n")
	id := rc.read()
	if id.kind != '$' || id.null || id.str == "" {
		t.Fatalf("inline DELAY.ADD q 0 hello: want a bulk id, got %s", id)
	}
	rc.write("DELAY.POP q 1\r\n")
	r := rc.read()
	if r.kind != '*' || len(r.elems) != 3 || r.elems[0].str != "q" || r.elems[1].str != id.str || r.elems[2].str != "hello" {
		t.Errorf("inline DELAY.POP q 1: got %s, want [q %s hello]", r, id.str)
	}
	// inline and RESP mixed on one connection, several in one write
	rc.write("PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\r\n")
	for _, want := range []string{"+PONG", "$2", "hi", "+PONG"} {
		if line := rc.readLine(); line != want {
			t.Errorf("pipelined inline/RESP: got %q, want %q", line, want)
		}
	}
}

func TestRedisCLIPipe(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	cliPath(t)
	out := cliIn(t, s, "DELAY.ADD q 0 a\nDELAY.ADD q 0 b\n")
	ids := strings.Fields(out)
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("redis-cli pipe of two DELAY.ADD: output %q, want two ids", out)
	}
	c := s.Client()
	chain(t, c,
		cmd([]any{"q", ids[0], "a"}, "DELAY.POP", "q", "0.5"),
		cmd([]any{"q", ids[1], "b"}, "DELAY.POP", "q", "0.5"),
	)

	// command-line mode, quoted binary payload
	id := strings.TrimSpace(cli(t, s, "DELAY.ADD", "q2", "0", "with space\nand newline"))
	if id == "" {
		t.Fatalf("redis-cli DELAY.ADD: no id printed")
	}
	expect(t, c, []any{"q2", id, "with space\nand newline"}, "DELAY.POP", "q2", "0.5")
	if out := cli(t, s, "DELAY.POP", "q2", "0.1"); strings.TrimSpace(out) != "" {
		t.Errorf("redis-cli DELAY.POP timeout: printed %q, want an empty (nil) line", out)
	}
	if out := cli(t, s, "DELAY.ADD", "q", "-1", "x"); !strings.Contains(out, "ERR value is not an integer or out of range") {
		t.Errorf("redis-cli DELAY.ADD q -1 x: printed %q", out)
	}
	if out := cli(t, s, "DELAY.STATS", "q"); !strings.Contains(out, "delayed") || !strings.Contains(out, "ready") {
		t.Errorf("redis-cli DELAY.STATS q: printed %q", out)
	}
}

// TestRedisCLIInteractive starts redis-cli the way a person does (no
// command); it asks COMMAND DOCS and friends for its hints and must not print
// an error.
func TestRedisCLIInteractive(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	cliPath(t)
	out := cliIn(t, s, "PING\nDELAY.ADD q 0 hi\nDELAY.POP q 1\n")
	if !strings.Contains(out, "PONG") {
		t.Errorf("interactive redis-cli: output %q has no PONG", out)
	}
	if !strings.Contains(out, "hi") {
		t.Errorf("interactive redis-cli: output %q has no popped payload", out)
	}
	if strings.Contains(out, "ERR") || strings.Contains(strings.ToLower(out), "error") {
		t.Errorf("interactive redis-cli printed an error: %q", out)
	}
	// redis-cli -3 (RESP3 via HELLO 3)
	out = cliIn(t, s, "PING\n", "-3")
	if !strings.Contains(out, "PONG") || strings.Contains(out, "ERR") {
		t.Errorf("redis-cli -3: output %q", out)
	}
}

func TestMalformedRESPClosesOnlyThatConnection(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	expect(t, c, "PONG", "PING") // connected before the bad client

	// a blocked waiter, too, must not notice
	waiter := popAsync(s.Client(), 10*time.Second, "q", "0")
	s.waitBlocked(t, 1)

	for _, bad := range []string{
		"*2\r\n$abc\r\n",         // bulk length not a number
		"*1\r\n$-5\r\n",          // negative bulk length
		"*x\r\n",                 // array length not a number
		"*2\r\n$4\r\nPINGxx\r\n", // bulk longer than its length, no CRLF where due
	} {
		rc := s.dialRaw(t)
		rc.write(bad)
		line, err := rc.tryReadLine()
		if !strings.HasPrefix(line, "-ERR Protocol error") {
			t.Errorf("%q: reply %q (%v), want -ERR Protocol error: ...", bad, line, err)
			continue
		}
		rc.expectClosed(2 * time.Second)
	}

	expect(t, c, "PONG", "PING")
	id := add(t, c, "q", 0, "still-served")
	popTriple(t, waitPop(t, waiter, 5*time.Second), "q", id, "still-served")
}

// TestFramesSplitAnywhere sends a RESP command and an inline command in two
// writes, split at every byte: the server waits for the rest of a frame.
func TestFramesSplitAnywhere(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const frame = "*2\r\n$4\r\nECHO\r\n$7\r\nhe\r\nllo\r\nPING\r\n"
	rc := s.dialRaw(t)
	for i := 1; i < len(frame); i++ {
		rc.write(frame[:i])
		time.Sleep(time.Millisecond) // let the first part arrive alone
		rc.write(frame[i:])
		if r := rc.read(); r.kind != '$' || r.str != "he\r\nllo" {
			t.Fatalf("split at byte %d: ECHO replied %s", i, r)
		}
		if line := rc.readLine(); line != "+PONG" {
			t.Fatalf("split at byte %d: PING replied %q", i, line)
		}
	}
}
