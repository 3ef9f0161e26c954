package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Protected mode, --timeout, --client-output-buffer-limit, connection churn
// and the pre-authentication limits (SPEC "Security"; issue 13).

// nonLoopbackIP is an IPv4 address of this machine other than loopback, or
// "" if it has none.
func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return ""
}

// rawReply sends frame on a new connection to addr and returns the first
// line of the reply and whether the server then closed the connection.
func rawReply(t *testing.T, addr, frame string) (line string, closed bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if frame != "" {
		if _, err := c.Write([]byte(frame)); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	br := bufio.NewReader(c)
	line, err = br.ReadString('\n')
	if err != nil {
		t.Fatalf("read from %s: %v (got %q)", addr, err, line)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = br.ReadByte()
	// EOF, or a reset when the server closed with our frame unread.
	return strings.TrimRight(line, "\r\n"), err != nil && !isTimeoutErr(err)
}

func TestConnLimitsProtectedMode(t *testing.T) {
	ip := nonLoopbackIP()
	if ip == "" {
		t.Skip("this machine has no non-loopback IPv4 address")
	}
	s := startServer(t, "--bind", "0.0.0.0")
	outside := net.JoinHostPort(ip, strconv.Itoa(s.Port()))
	line, closed := rawReply(t, outside, "PING\r\n")
	if !strings.HasPrefix(line, "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface.") ||
		!strings.Contains(line, "'--protected-mode no'") || !closed {
		t.Fatalf("client from %s: got %q (closed %v), want Redis's DENIED and a close", ip, line, closed)
	}
	if line, _ := rawReply(t, s.Addr(), "PING\r\n"); line != "+PONG" {
		t.Fatalf("loopback client: %q, want +PONG", line)
	}
	expect(t, s.Client(), []any{"protected-mode", "yes"}, "CONFIG", "GET", "protected-mode")
	if v, _ := s.info("stats", "rejected_connections"); v != "1" {
		t.Errorf("rejected_connections = %q, want 1", v)
	}

	// A password, or protected mode off, lets the outside in.
	s2 := startServer(t, "--bind", "0.0.0.0", "--requirepass", "pw")
	if line, closed := rawReply(t, net.JoinHostPort(ip, strconv.Itoa(s2.Port())), "AUTH pw\r\nPING\r\n"); line != "+OK" || closed {
		t.Fatalf("with requirepass: %q (closed %v), want +OK", line, closed)
	}
	s3 := startServer(t, "--bind", "0.0.0.0", "--protected-mode", "no")
	if line, closed := rawReply(t, net.JoinHostPort(ip, strconv.Itoa(s3.Port())), "PING\r\n"); line != "+PONG" || closed {
		t.Fatalf("with --protected-mode no: %q (closed %v), want +PONG", line, closed)
	}
}

// TestConnLimitsProtectedModeHTTP: the HTTP side refuses a peer from
// another host as RESP does, with a 403 and Redis's explanation, and keeps
// the probes open; a password or --protected-mode no lets the outside in.
func TestConnLimitsProtectedModeHTTP(t *testing.T) {
	ip := nonLoopbackIP()
	if ip == "" {
		t.Skip("this machine has no non-loopback IPv4 address")
	}
	get := func(addr, path string) (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s%s: %v", addr, path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	start := func(args ...string) (outside, local string) {
		port := freePort(t)
		startServer(t, append([]string{"--bind", "0.0.0.0", "--http-addr", fmt.Sprintf("0.0.0.0:%d", port)}, args...)...)
		outside, local = net.JoinHostPort(ip, strconv.Itoa(port)), net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		// The RESP port answering does not mean the HTTP side listens yet.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			c, err := net.Dial("tcp", local)
			if err == nil {
				c.Close()
				return outside, local
			}
			if time.Now().After(deadline) {
				t.Fatalf("HTTP side on %s: %v", local, err)
			}
		}
	}
	outside, local := start()
	for _, path := range []string{"/metrics", "/"} {
		code, body := get(outside, path)
		if code != http.StatusForbidden || !strings.HasPrefix(body, "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user.") {
			t.Errorf("%s from %s: %d %q, want 403 and the DENIED explanation", path, ip, code, body)
		}
		if code, _ := get(local, path); code != http.StatusOK {
			t.Errorf("%s from loopback: %d, want 200", path, code)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(outside, path); code != http.StatusOK {
			t.Errorf("%s from %s: %d, want 200 (probes stay open)", path, ip, code)
		}
	}
	outside, _ = start("--requirepass", "pw")
	if code, _ := get(outside, "/metrics"); code != http.StatusUnauthorized {
		t.Errorf("with requirepass, no credentials from %s: %d, want 401", ip, code)
	}
	outside, _ = start("--protected-mode", "no")
	if code, _ := get(outside, "/metrics"); code != http.StatusOK {
		t.Errorf("with --protected-mode no, from %s: %d, want 200", ip, code)
	}
}

func TestConnLimitsTimeout(t *testing.T) {
	s := startServer(t, "--timeout", "1")
	expect(t, s.Client(), []any{"timeout", "1"}, "CONFIG", "GET", "timeout")

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	idle, _ := dial()
	blocked, blockedR := dial()
	monitor, monitorR := dial()
	fmt.Fprintf(blocked, "DELAY.POP q 4\r\n")
	fmt.Fprintf(monitor, "MONITOR\r\n")
	if l, _ := monitorR.ReadString('\n'); l != "+OK\r\n" {
		t.Fatalf("MONITOR: %q", l)
	}
	s.waitBlocked(t, 1)

	start := time.Now()
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle client: read %d bytes, %v; want the server to close it", n, err)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 4*time.Second {
		t.Errorf("idle client closed after %v, want about 1s", d)
	}
	// The blocked pop outlives the timeout and gets its null when it ends.
	blocked.SetReadDeadline(time.Now().Add(6 * time.Second))
	if l, err := blockedR.ReadString('\n'); err != nil || l != "*-1\r\n" {
		t.Fatalf("blocked pop past --timeout: %q, %v; want its null reply", l, err)
	}
	// The MONITOR, idle for 4 s, is still there and sees commands.
	expect(t, s.Client(), "PONG", "PING")
	monitor.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		l, err := monitorR.ReadString('\n')
		if err != nil {
			t.Fatalf("MONITOR past --timeout: %v", err)
		}
		if strings.Contains(strings.ToLower(l), `"ping"`) {
			break
		}
	}
}

func TestConnLimitsOutputBuffer(t *testing.T) {
	s := startServer(t, "--client-output-buffer-limit", "normal 1mb 0 0")
	c := s.Client()
	expect(t, c, []any{"client-output-buffer-limit", "normal 1048576 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"},
		"CONFIG", "GET", "client-output-buffer-limit")

	// A reply past the hard limit: the client is closed, not answered.
	big := strings.Repeat("x", 2<<20)
	line, closed := rawReplyOrEOF(t, s.Addr(), fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(big), big))
	if line != "" || !closed {
		t.Fatalf("2 MB reply under a 1 MB limit: got %q (closed %v), want the connection closed", line, closed)
	}
	if !s.outputHas("output buffer limits", 3*time.Second) {
		t.Fatal("the server did not log the client closed for its output buffer")
	}
	expect(t, c, strings.Repeat("y", 512<<10), "ECHO", strings.Repeat("y", 512<<10))

	// A MONITOR nobody reads: closed once its pushes pass the limit; the
	// client making them is unaffected.
	mon, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	fmt.Fprintf(mon, "MONITOR\r\n")
	if l, _ := bufio.NewReader(mon).ReadString('\n'); l != "+OK\r\n" {
		t.Fatalf("MONITOR: %q", l)
	}
	if list := do(t, c, "CLIENT", "LIST").(string); !strings.Contains(list, "cmd=monitor") {
		t.Fatalf("CLIENT LIST does not show the MONITOR:\n%s", list)
	}
	key := strings.Repeat("k", 1000)
	for round := 0; round < 200; round++ {
		p := c.Pipeline()
		for i := 0; i < 200; i++ {
			p.Exists(ctxT(t, 10*time.Second), key)
		}
		if _, err := p.Exec(ctxT(t, 10*time.Second)); err != nil {
			t.Fatalf("writer beside an unread MONITOR: %v", err)
		}
		if strings.Contains(s.Output(), "did not read its pushes") {
			break
		}
	}
	if !s.outputHas("did not read its pushes", 3*time.Second) {
		t.Fatal("the server did not log closing the MONITOR nobody read")
	}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		list := do(t, c, "CLIENT", "LIST").(string)
		if !strings.Contains(list, "cmd=monitor") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unread MONITOR is still connected:\n%s", list)
		}
	}
	expect(t, c, "PONG", "PING")
}

// rawReplyOrEOF is rawReply for a connection the server may close without a
// reply: line is "" then.
func rawReplyOrEOF(t *testing.T, addr, frame string) (line string, closed bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(frame)); err != nil {
		return "", true
	}
	line, err = bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return strings.TrimRight(line, "\r\n"), !isTimeoutErr(err)
	}
	return strings.TrimRight(line, "\r\n"), false
}

func isTimeoutErr(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// proc reads the server's goroutines (from /metrics), open descriptors and
// resident memory.
type procStats struct{ goroutines, fds, rssKB int }

func (s *server) pid() int { return s.Pid() }

func readProc(t *testing.T, s *server, httpAddr string) procStats {
	t.Helper()
	var st procStats
	if httpAddr != "" {
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		resp, err := hc.Get("http://" + httpAddr + "/metrics")
		if err != nil {
			t.Fatalf("/metrics: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
				st.goroutines, _ = strconv.Atoi(v)
			}
		}
		if st.goroutines == 0 {
			t.Fatal("/metrics has no go_goroutines")
		}
	}
	pid := s.pid()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	st.fds = len(ents)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			st.rssKB, _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	return st
}

// churn opens n connections, at most par at a time, each doing one of the
// things a careless or hostile client does, and closes them.
func churn(t *testing.T, addr string, n, par int) {
	frames := []string{
		"PING\r\n",                      // a polite client (reads its reply)
		"*3\r\n$9\r\nDELAY.ADD\r\n",     // a command cut off after its first argument
		"*2\r\n$4\r\nECHO\r\n$1000\r\n", // a bulk header, then nothing
		"",                              // connect and go
		"*1\r\n$4\r\nPI",                // half a bulk
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			defer c.Close()
			f := frames[i%len(frames)]
			c.Write([]byte(f))
			if i%len(frames) == 0 {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				l, err := bufio.NewReader(c).ReadString('\n')
				if err != nil || l != "+PONG\r\n" && !strings.HasPrefix(l, "-NOAUTH") {
					mu.Lock()
					errs = append(errs, fmt.Errorf("PING: %q, %v", l, err))
					mu.Unlock()
				}
			}
		}(i)
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d connections failed; first: %v", len(errs), n, errs[0])
	}
}

// nonReaders opens clients that never read while the server writes to them:
// MONITORs flooded by a writer, and pipelines of big replies. It returns
// once the server holds them all stuck, and closes them at the end.
func nonReaders(t *testing.T, s *server) (closeAll func()) {
	var conns []net.Conn
	for i := 0; i < 10; i++ {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i%2 == 0 {
			fmt.Fprintf(c, "MONITOR\r\n")
			continue
		}
		arg := strings.Repeat("z", 256<<10)
		var b strings.Builder
		for j := 0; j < 32; j++ { // 8 MB of replies nobody reads
			fmt.Fprintf(&b, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(arg), arg)
		}
		go c.Write([]byte(b.String()))
	}
	cl := s.Client()
	key := strings.Repeat("m", 1000)
	for round := 0; round < 50; round++ { // enough MONITOR lines to pass the 8 MiB push cap
		p := cl.Pipeline()
		for i := 0; i < 200; i++ {
			p.Exists(ctxT(t, 10*time.Second), key)
		}
		if _, err := p.Exec(ctxT(t, 10*time.Second)); err != nil {
			t.Fatalf("writer beside unread MONITORs: %v", err)
		}
	}
	cl.Close()
	return func() {
		for _, c := range conns {
			c.Close()
		}
	}
}

func TestConnLimitsChurn(t *testing.T) {
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s := startServer(t, "--http-addr", httpAddr)
	admin := s.Client()
	expect(t, admin, "PONG", "PING")

	n := 10000
	if testing.Short() {
		n = 2000
	}
	churn(t, s.Addr(), 500, 50) // warm up: the runtime's pools and arenas
	// The warm-up's last connections end asynchronously: wait for two
	// readings alike.
	before := readProc(t, s, httpAddr)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		next := readProc(t, s, httpAddr)
		if next.goroutines == before.goroutines && next.fds == before.fds {
			break
		}
		before = next
	}

	start := time.Now()
	churn(t, s.Addr(), n, 50)
	closeNonReaders := nonReaders(t, s)
	during := readProc(t, s, httpAddr)
	closeNonReaders()
	t.Logf("%d connections in %v; before %+v, with non-readers %+v", n, time.Since(start), before, during)

	var after procStats
	deadline := time.Now().Add(10 * time.Second)
	for {
		after = readProc(t, s, httpAddr)
		settled := after.goroutines <= before.goroutines+2 && after.fds <= before.fds+1
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("after %+v", after)
	if after.goroutines > before.goroutines+2 {
		t.Errorf("goroutines: %d before, %d after the churn", before.goroutines, after.goroutines)
	}
	if after.fds > before.fds+1 {
		t.Errorf("file descriptors: %d before, %d after the churn", before.fds, after.fds)
	}
	// Memory the churn took is reused, not leaked: after a second round
	// RSS comes back near where it started (the runtime hands freed memory
	// back to the OS gradually, hence the wait).
	churn(t, s.Addr(), n, 50)
	var again procStats
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		again = readProc(t, s, httpAddr)
		settled := again.goroutines <= before.goroutines+2 && again.fds <= before.fds+1 && again.rssKB <= before.rssKB+32<<10
		if settled || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("after a second round %+v", again)
	if again.rssKB > before.rssKB+32<<10 {
		t.Errorf("RSS %d kB before, %d kB after two rounds of %d connections", before.rssKB, again.rssKB, n)
	}
	if again.goroutines > before.goroutines+2 || again.fds > before.fds+1 {
		t.Errorf("after two rounds: %+v, before %+v", again, before)
	}
	expect(t, admin, "PONG", "PING")
}

func TestConnLimitsPreAuth(t *testing.T) {
	s := startServer(t, "--requirepass", "pw")
	churn(t, s.Addr(), 200, 20) // warm up
	hostile := []struct{ frame, want string }{
		{"*1048576\r\n", "-ERR Protocol error: unauthenticated multibulk length"},
		{"*1\r\n$2147483648\r\n", "-ERR Protocol error: unauthenticated bulk length"},
	}
	before := readProc(t, s, "")
	var wg sync.WaitGroup
	got := make([]string, 40)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.Dial("tcp", s.Addr())
			if err != nil {
				got[i] = err.Error()
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			h := hostile[i%2]
			c.Write([]byte(h.frame))
			// Then the bytes it announced, as fast as the server takes them.
			go c.Write(make([]byte, 4<<20))
			l, _ := bufio.NewReader(c).ReadString('\n')
			if strings.TrimRight(l, "\r\n") != h.want {
				got[i] = fmt.Sprintf("%q after %q, want %q", l, h.frame, h.want)
			}
		}(i)
	}
	wg.Wait()
	after := readProc(t, s, "")
	for _, g := range got {
		if g != "" {
			t.Fatal(g)
		}
	}
	t.Logf("RSS %d kB before, %d kB after 40 hostile clients", before.rssKB, after.rssKB)
	if after.rssKB > before.rssKB+1024 {
		t.Errorf("RSS grew by %d kB (> 1 MB) for 40 unauthenticated clients declaring 1M-element arrays and 2 GB bulks", after.rssKB-before.rssKB)
	}
}

// Above the soft limit a client that does not take its replies within
// soft-seconds is closed; one that reads them is not.
func TestConnLimitsOutputBufferSoft(t *testing.T) {
	s := startServer(t, "--client-output-buffer-limit", "normal 0 256kb 1")
	// One 16 MB reply: more than the kernel's socket buffers take.
	arg := strings.Repeat("s", 16<<20)
	var b strings.Builder
	fmt.Fprintf(&b, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(arg), arg)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write([]byte(b.String()))
	start := time.Now()
	if !s.outputHas("output buffer limits", 5*time.Second) {
		t.Fatal("a client that never read a 16 MB reply was not closed past the soft limit")
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("closed %v after its reply, before soft-seconds (1 s) passed", d)
	}
	// A reader of the same replies gets them all.
	r := s.Client()
	if got, err := r.Echo(ctxT(t, 10*time.Second), arg).Result(); err != nil || got != arg {
		t.Fatalf("a client reading its 16 MB reply: %d bytes, %v", len(got), err)
	}
}
