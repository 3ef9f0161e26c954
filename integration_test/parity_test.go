package integration

import (
	"context"

	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Parity with redis-server: the same scenario runs against delayd and against
// a real redis-server (when it is installed; CI installs it), and the two
// transcripts of replies must be equal. Redis is the reference for what a
// list worker sees.

// target is one server a parity scenario runs against.
type target struct {
	t    testing.TB
	name string
	addr string
}

// client is a fresh RESP2 connection to the target.
func (tg *target) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: tg.addr, Protocol: 2, PoolSize: 1, MaxRetries: -1,
		ReadTimeout: 15 * time.Second, ContextTimeoutEnabled: true})
	tg.t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitBlocked waits until INFO clients reports n blocked clients.
func (tg *target) waitBlocked(n int) {
	tg.t.Helper()
	c := tg.client()
	deadline := time.Now().Add(5 * time.Second)
	for {
		text, err := c.Info(context.Background(), "clients").Result()
		if err != nil {
			tg.t.Fatalf("%s: INFO clients: %v", tg.name, err)
		}
		if v, _ := infoValue(text, "blocked_clients"); v == strconv.Itoa(n) {
			return
		}
		if time.Now().After(deadline) {
			tg.t.Fatalf("%s: blocked_clients never reached %d", tg.name, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reply renders a command's reply (or error) for a transcript.
func reply(c *redis.Client, args ...any) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.Do(ctx, args...).Result()
	if err != nil {
		return "error: " + err.Error()
	}
	return showValue(v)
}

// startRedis starts redis-server on a free port with persistence off, or
// skips the test when the binary is absent.
func startRedis(t testing.TB) *target {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed: apt-get install -y redis-server")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for !pingOnce(addr) {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer PING within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &target{t: t, name: "redis-server", addr: addr}
}

// parity runs each scenario against delayd and redis-server and compares
// the transcripts.
func parity(t *testing.T, scenarios map[string]func(tg *target) []string) {
	t.Helper()
	rs := startRedis(t)
	s := startServer(t)
	dd := &target{t: t, name: "delayd", addr: s.Addr()}
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			rs.t, dd.t = t, t
			// each scenario uses its own keys on a fresh keyspace
			rs.client().FlushAll(context.Background())
			want := scenarios[name](rs)
			if verbose {
				t.Logf("redis-server transcript:\n  %s", strings.Join(want, "\n  "))
			}
			got := scenarios[name](dd)
			if !slices.Equal(got, want) {
				t.Errorf("transcripts differ\nredis-server:\n  %s\ndelayd:\n  %s",
					strings.Join(want, "\n  "), strings.Join(got, "\n  "))
			}
		})
	}
}

// blockAsync sends a blocking command on its own connection; its reply
// arrives on the returned channel.
func blockAsync(tg *target, args ...any) <-chan string {
	ch := make(chan string, 1)
	c := tg.client()
	go func() { ch <- reply(c, args...) }()
	return ch
}

func recv(tg *target, ch <-chan string) string {
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		return "no reply within 10s"
	}
}

// TestParityPushReply: RPUSH/LPUSH reply the length right after the push,
// before blocked clients are served, and the waiters get what Redis's get.
func TestParityPushReply(t *testing.T) {
	t.Parallel()
	parity(t, map[string]func(tg *target) []string{
		"single waiter": func(tg *target) []string {
			w := blockAsync(tg, "BLPOP", "pr1", "5")
			tg.waitBlocked(1)
			c := tg.client()
			return []string{reply(c, "RPUSH", "pr1", "x"), recv(tg, w), reply(c, "LLEN", "pr1")}
		},
		"two waiters": func(tg *target) []string {
			w1 := blockAsync(tg, "BLPOP", "pr2", "5")
			tg.waitBlocked(1)
			w2 := blockAsync(tg, "BRPOP", "pr2", "5")
			tg.waitBlocked(2)
			c := tg.client()
			return []string{reply(c, "RPUSH", "pr2", "a", "b", "c"), recv(tg, w1), recv(tg, w2),
				reply(c, "LRANGE", "pr2", "0", "-1")}
		},
		"lpush several values": func(tg *target) []string {
			w := blockAsync(tg, "BLPOP", "pr3", "5")
			tg.waitBlocked(1)
			c := tg.client()
			return []string{reply(c, "LPUSH", "pr3", "a", "b", "c"), recv(tg, w),
				reply(c, "LRANGE", "pr3", "0", "-1"), reply(c, "LPUSH", "pr3", "d", "e"), reply(c, "LRANGE", "pr3", "0", "-1")}
		},
		"waiter on two keys": func(tg *target) []string {
			w := blockAsync(tg, "BLPOP", "pr4a", "pr4b", "5")
			tg.waitBlocked(1)
			c := tg.client()
			out := []string{reply(c, "RPUSH", "pr4b", "x", "y"), recv(tg, w), reply(c, "LLEN", "pr4b")}
			w = blockAsync(tg, "BRPOP", "pr4c", "pr4a", "5")
			tg.waitBlocked(1)
			return append(out, reply(c, "LPUSH", "pr4a", "p", "q"), recv(tg, w), reply(c, "LRANGE", "pr4a", "0", "-1"))
		},
	})
}
