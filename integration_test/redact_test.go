package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedactPasswordsAndPayloads: SPEC's "nothing ever logs or shows a
// password or a payload". A server with requirepass, an aclfile, debug logs,
// a MONITOR and a SLOWLOG of every command runs a workload whose passwords
// and payloads are unique markers; then the whole log, INFO, CONFIG GET *,
// CLIENT LIST/INFO, what MONITOR printed, SLOWLOG, ACL LIST/GETUSER/LOG and
// /metrics must hold none of them (ACL shows passwords as SHA-256 hashes,
// as Redis does). Replies that return a payload (DELAY.POP, PEEK, ...) and
// the dashboard's job views are where payloads belong; the dashboard is
// checked for passwords only.
func TestRedactPasswordsAndPayloads(t *testing.T) {
	t.Parallel()
	const (
		rootPass  = "RQPASS-7f3a9c1e"
		alicePass = "ALICEPASS-51be20"
		bobPass   = "BOBPASS-c0de77"
		wrongPass = "WRONGPASS-9d01aa"
		httpWrong = "HTTPWRONG-33e1f0"
	)
	passwords := []string{rootPass, alicePass, bobPass, wrongPass, httpWrong}
	payloads := []string{}
	payload := func(name string) string {
		p := "PAYLOAD-" + name + "-5e7a"
		payloads = append(payloads, p)
		return p
	}
	pAdd, pAddAt, pRPush, pLPush := payload("ADD"), payload("ADDAT"), payload("RPUSH"), payload("LPUSH")
	pEvery, pCron, pMulti := payload("EVERY"), payload("CRONTZ"), payload("MULTI")
	pDrop, pDead, pBig := payload("DROPPED"), payload("DEADLETTER"), payload("BIG")
	pProto, pInline := payload("PROTO"), payload("INLINE")

	dir := t.TempDir()
	aclfile := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(aclfile, []byte("user bob on >"+bobPass+" ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	s := startServer(t, "--requirepass", rootPass, "--aclfile", aclfile,
		"--log-level", "debug", "--log-format", "json", "--http-addr", httpAddr,
		"--slowlog-log-slower-than", "0", "--slowlog-max-len", "1000", "--max-payload-bytes", "64")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	root := func(o *redis.Options) { o.Password = rootPass }
	admin := s.Client(root) // AUTH rootPass
	// Under a password the harness's readiness PING gets NOAUTH, which
	// cannot tell whether the (empty) log is still loading: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		v, err := admin.Info(ctx, "persistence").Result()
		if err == nil && strings.Contains(v, "loading:0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still loading after 10s: %q %v", v, err)
		}
	}

	// MONITOR first, so it sees the whole workload.
	mon := s.dialRaw(t)
	mon.send("AUTH", rootPass)
	if l := mon.readLine(); l != "+OK" {
		t.Fatalf("monitor's AUTH: %q", l)
	}
	mon.send("MONITOR")
	if l := mon.readLine(); l != "+OK" {
		t.Fatalf("MONITOR: %q", l)
	}
	var monMu sync.Mutex
	var monOut strings.Builder
	monDone := make(chan struct{})
	go func() {
		defer close(monDone)
		_ = mon.c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			line, err := mon.r.ReadString('\n')
			monMu.Lock()
			monOut.WriteString(line)
			monMu.Unlock()
			if err != nil {
				return
			}
		}
	}()

	// Passwords: ACL SETUSER >pass, AUTH user pass, HELLO 3 AUTH, a failed
	// AUTH, CONFIG GET requirepass.
	do(t, admin, "ACL", "SETUSER", "alice", "on", ">"+alicePass, "~*", "&*", "+@all")
	alice := s.Client3(func(o *redis.Options) { o.Username, o.Password = "alice", alicePass }) // HELLO 3 AUTH alice
	bob := s.Client(func(o *redis.Options) { o.Username, o.Password = "bob", bobPass })        // AUTH bob
	chain(t, alice, cmd("alice", "ACL", "WHOAMI"))
	chain(t, bob, cmd("bob", "ACL", "WHOAMI"))
	anon := s.Client()
	if err := anon.Do(ctx, "AUTH", "bob", wrongPass).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("AUTH with a wrong password: %v", err)
	}
	if v, err := admin.Do(ctx, "CONFIG", "GET", "requirepass").Result(); err != nil || strings.Contains(fmt.Sprint(v), rootPass) {
		t.Fatalf("CONFIG GET requirepass: %v %v", v, err)
	}

	// Payloads.
	do(t, alice, "DELAY.ADD", "jobs", 0, pAdd, "ID", "a1")
	do(t, bob, "DELAY.ADDAT", "jobs", time.Now().Add(time.Hour).UnixMilli(), pAddAt, "ID", "a2")
	do(t, admin, "RPUSH", "list", pRPush, pRPush+"-2")
	do(t, admin, "LPUSH", "list", pLPush)
	do(t, admin, "DELAY.SCHEDULE", "sched", "every", "EVERY", 3600000, pEvery, "RETRY", 1)
	do(t, admin, "DELAY.SCHEDULE", "sched", "cron", "CRON", "0 0 * * *", "TZ", "UTC", pCron)
	if _, err := admin.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "DELAY.ADD", "jobs", 600000, pMulti)
		return nil
	}); err != nil {
		t.Fatalf("MULTI DELAY.ADD: %v", err)
	}
	// Replies that return payloads do so.
	if v := fmt.Sprint(do(t, alice, "DELAY.POP", "jobs", 1)); !strings.Contains(v, pAdd) {
		t.Fatalf("DELAY.POP: %v", v)
	}
	if v := fmt.Sprint(do(t, admin, "LRANGE", "list", 0, -1)); !strings.Contains(v, pRPush) {
		t.Fatalf("LRANGE: %v", v)
	}
	// A job dropped (no retry left, no dead-letter queue) and one
	// dead-lettered: the log names the dropped job's id, not its payload.
	do(t, admin, "DELAY.ADD", "fragile", 0, pDrop, "ID", "drop-1", "ACKTIMEOUT", 50, "RETRY", 0)
	do(t, admin, "DELAY.ADD", "fragile2", 0, pDead, "ID", "dead-1", "ACKTIMEOUT", 50, "RETRY", 0, "DEADLETTER", "dead")
	do(t, admin, "DELAY.POP", "fragile", 1)
	do(t, admin, "DELAY.POP", "fragile2", 1)
	if !s.outputHas("job dropped", 5*time.Second) {
		t.Fatal("the dropped job was not logged")
	}
	for deadline := time.Now().Add(5 * time.Second); asInt(t, "LLEN dead", do(t, admin, "LLEN", "dead")) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job was not dead-lettered")
		}
	}
	// A payload over --max-payload-bytes: the error does not echo it.
	big := pBig + strings.Repeat("x", 100)
	if err := admin.Do(ctx, "DELAY.ADD", "jobs", 0, big).Err(); err == nil || strings.Contains(err.Error(), pBig) {
		t.Fatalf("too large a payload: %v", err)
	}
	// Protocol errors around payload-like bytes.
	for _, frame := range []string{
		"*4\r\n$9\r\nDELAY.ADD\r\n$4\r\njobs\r\n$1\r\n0\r\n+" + pProto + "\r\n",
		"DELAY.ADD jobs 0 \"" + pInline + "\r\n",
	} {
		rc := s.dialRaw(t)
		rc.send("AUTH", rootPass)
		rc.readLine()
		rc.write(frame)
		if l := rc.readLine(); !strings.HasPrefix(l, "-ERR Protocol error") || strings.Contains(l, "PAYLOAD") {
			t.Errorf("protocol error reply %q", l)
		}
	}

	// The HTTP side: pages with basic auth, and a wrong password.
	get := func(path, pass string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+httpAddr+path, nil)
		req.SetBasicAuth("default", pass)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := get("/metrics", httpWrong); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics with a wrong password: %d", code)
	}
	shown := map[string]string{} // where -> text that must hold no password
	for _, path := range []string{"/", "/queues", "/queue?key=jobs", "/queue?key=list", "/job?key=jobs&id=a2"} {
		code, body := get(path, rootPass)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		shown["dashboard "+path] = body
	}
	noPayload := map[string]string{} // where -> text that must hold neither
	code, metrics := get("/metrics", rootPass)
	if code != http.StatusOK || !strings.Contains(metrics, "delayd_") {
		t.Fatalf("GET /metrics: %d", code)
	}
	noPayload["/metrics"] = metrics

	// Everything that shows the server's state.
	str := func(args ...any) string { return strings.Join(flat(do(t, admin, args...)), "\n") }
	noPayload["INFO everything"] = str("INFO", "everything")
	noPayload["INFO all"] = str("INFO", "all")
	noPayload["CONFIG GET *"] = str("CONFIG", "GET", "*")
	noPayload["CLIENT LIST"] = str("CLIENT", "LIST")
	noPayload["CLIENT INFO"] = str("CLIENT", "INFO")
	noPayload["ACL LIST"] = str("ACL", "LIST")
	noPayload["ACL GETUSER alice"] = str("ACL", "GETUSER", "alice")
	noPayload["ACL GETUSER bob"] = str("ACL", "GETUSER", "bob")
	noPayload["ACL LOG"] = str("ACL", "LOG")
	slowlog := fmt.Sprint(do(t, admin, "SLOWLOG", "GET", 1000))
	noPayload["SLOWLOG GET"] = slowlog

	// ACL shows passwords as SHA-256, as Redis does.
	for user, pass := range map[string]string{"alice": alicePass, "bob": bobPass} {
		sum := sha256.Sum256([]byte(pass))
		if h := hex.EncodeToString(sum[:]); !strings.Contains(noPayload["ACL LIST"], "#"+h) ||
			!strings.Contains(noPayload["ACL GETUSER "+user], h) {
			t.Errorf("ACL LIST / GETUSER %s does not show the password's hash %s:\n%s\n%s", user, h,
				noPayload["ACL LIST"], noPayload["ACL GETUSER "+user])
		}
	}
	if !strings.Contains(noPayload["ACL LOG"], "auth") {
		t.Errorf("ACL LOG has no entry for the failed AUTH:\n%s", noPayload["ACL LOG"])
	}
	// SLOWLOG logged the workload, redacted.
	for _, want := range []string{"delay.schedule", "sched", "EVERY", "3600000", "(redacted)", "fragile"} {
		if !strings.Contains(strings.ToLower(slowlog), strings.ToLower(want)) {
			t.Errorf("SLOWLOG has no %q: %s", want, slowlog)
		}
	}

	// MONITOR (which, as Redis's, leaves out admin commands such as ACL
	// and CONFIG): wait for its line of a last command, then stop it.
	do(t, admin, "PING", "redact-done")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		monMu.Lock()
		done := strings.Contains(monOut.String(), "redact-done")
		monMu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("MONITOR did not show the last command")
		}
	}
	mon.c.Close()
	<-monDone
	monitored := monOut.String()
	noPayload["MONITOR"] = monitored
	for _, want := range []string{`"auth" "(redacted)"`, `"hello" "3" "auth" "(redacted)" "(redacted)"`,
		`"delay.add" "jobs" "0" "(redacted)" "ID" "a1"`,
		`"rpush" "list" "(redacted)" "(redacted)"`, `"CRON" "0 0 * * *" "TZ" "UTC" "(redacted)"`} {
		if !strings.Contains(strings.ToLower(monitored), strings.ToLower(want)) {
			t.Errorf("MONITOR has no %s:\n%s", want, monitored)
		}
	}

	// The log, last: the server is stopped so every line is in.
	s.Stop()
	log := s.Output()
	noPayload["the log"] = log
	if !strings.Contains(log, `"drop-1"`) {
		t.Errorf("the log does not name the dropped job (drop-1):\n%s", log)
	}

	for where, text := range noPayload {
		shown[where] = text
		for _, p := range payloads {
			if strings.Contains(text, p) {
				t.Errorf("%s shows the payload %s:\n%s", where, p, text)
			}
		}
	}
	for where, text := range shown {
		for _, p := range passwords {
			if strings.Contains(text, p) {
				t.Errorf("%s shows the password %s:\n%s", where, p, text)
			}
		}
	}
}
