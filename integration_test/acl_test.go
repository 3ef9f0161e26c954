package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func asUser(name, pass string) func(*redis.Options) {
	return func(o *redis.Options) { o.Username, o.Password = name, pass }
}

// TestACLWorkerAndProducer: SPEC's example users. The worker runs only
// DELAY.POP/ACK/NACK/TOUCH on jobs:*, the producer only DELAY.ADD/ADDAT/
// CANCEL; anything else gets Redis 7's NOPERM, ACL LOG shows it, and ACL
// SAVE keeps the users across a restart (--aclfile).
func TestACLWorkerAndProducer(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users.acl")
	s := startServer(t, "--aclfile", file)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := s.Client()
	for _, rules := range [][]any{
		{"worker", "on", ">wpass", "~jobs:*", "+delay.pop", "+delay.ack", "+delay.nack", "+delay.touch"},
		{"producer", "on", ">ppass", "~jobs:*", "+delay.add", "+delay.addat", "+delay.cancel"},
	} {
		if err := admin.Do(ctx, append([]any{"ACL", "SETUSER"}, rules...)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(phase string) {
		t.Helper()
		producer := s.Client3(asUser("producer", "ppass")) // HELLO 3 AUTH producer ppass
		worker := s.Client(asUser("worker", "wpass"))      // AUTH worker wpass
		if err := producer.Do(ctx, "DELAY.ADD", "jobs:email", "0", "hello", "ID", "j-"+phase).Err(); err != nil {
			t.Fatalf("%s: producer's DELAY.ADD: %v", phase, err)
		}
		v, err := worker.Do(ctx, "DELAY.POP", "jobs:email", "1").Result()
		if err != nil || !strings.Contains(strings.Join(flat(v), " "), "hello") {
			t.Fatalf("%s: worker's DELAY.POP: %v %v", phase, v, err)
		}
		if err := worker.Do(ctx, "DELAY.ACK", "jobs:email", "j-"+phase).Err(); err != nil {
			t.Fatalf("%s: worker's DELAY.ACK: %v", phase, err)
		}
		for _, c := range []struct {
			cl   *redis.Client
			args []any
			want string
		}{
			{worker, []any{"DELAY.ADD", "jobs:email", "0", "x"}, "NOPERM User worker has no permissions to run the 'delay.add' command"},
			{worker, []any{"FLUSHALL"}, "NOPERM User worker has no permissions to run the 'flushall' command"},
			{worker, []any{"DELAY.POP", "other", "1"}, "NOPERM No permissions to access a key"},
			{producer, []any{"DELAY.POP", "jobs:email", "1"}, "NOPERM User producer has no permissions to run the 'delay.pop' command"},
			{producer, []any{"DELAY.ADD", "mail", "0", "x"}, "NOPERM No permissions to access a key"},
		} {
			if err := c.cl.Do(ctx, c.args...).Err(); err == nil || err.Error() != c.want {
				t.Errorf("%s: %v: %v, want %q", phase, c.args, err, c.want)
			}
		}
		if err := s.Client(asUser("worker", "nope")).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
			t.Errorf("%s: a wrong password: %v", phase, err)
		}
	}
	check("before")

	log, err := admin.Do(ctx, "ACL", "LOG").Result()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(flat(log), " ")
	for _, want := range []string{"delay.add", "flushall", "worker", "producer", "toplevel", "key", "other", "user=worker"} {
		if !strings.Contains(text, want) {
			t.Errorf("ACL LOG lacks %q: %s", want, text)
		}
	}
	if strings.Contains(text, "wpass") || strings.Contains(text, "nope") {
		t.Errorf("ACL LOG shows a password: %s", text)
	}
	if err := admin.Do(ctx, "ACL", "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil || strings.Contains(string(b), "wpass") || !strings.Contains(string(b), "user producer on #") {
		t.Fatalf("aclfile: %q %v", b, err)
	}
	s.Restart()
	users, err := s.Client().Do(ctx, "ACL", "USERS").StringSlice()
	if err != nil || strings.Join(users, ",") != "default,producer,worker" {
		t.Fatalf("users after restart: %v %v", users, err)
	}
	check("after")
}

// flat turns a reply into its strings, depth first.
func flat(v any) []string {
	switch x := v.(type) {
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, flat(e)...)
		}
		return out
	case map[any]any:
		var out []string
		for k, e := range x {
			out = append(out, flat(k)...)
			out = append(out, flat(e)...)
		}
		return out
	case string:
		return []string{x}
	case nil:
		return nil
	default:
		return []string{fmt.Sprint(x)}
	}
}

// A pop blocked as a user whose keys are then taken away gets NOPERM when a
// job comes, and the job stays; an aclfile written for Redis loads at
// start (issue 30; Redis 7.2's tests/unit/acl.tcl has the first).
func TestACLBlockedPopRechecked(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(file, []byte("user bob on -@all +@set ~set* >bob +@transaction -@string\nuser psuser on nopass +@all ~*\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--aclfile", file)
	rc := s.dialRaw(t)
	send(t, rc, `+"OK"`, "AUTH", "psuser", "x")
	rc.send("BLPOP", "list1", "0")
	admin := s.dialRaw(t)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if strings.Contains(send(t, admin, "", "CLIENT", "LIST").str, "cmd=blpop") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the BLPOP never blocked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	send(t, admin, `+"OK"`, "ACL", "SETUSER", "psuser", "resetkeys")
	send(t, admin, "1", "RPUSH", "list1", "foo")
	if r := rc.read(); r.String() != `-"NOPERM No permissions to access a key"` {
		t.Fatalf("the blocked BLPOP got %s", r)
	}
	send(t, admin, "1", "LLEN", "list1")
	send(t, admin, `+"OK"`, "AUTH", "bob", "bob")
	send(t, admin, `+"OK"`, "MULTI")
}
