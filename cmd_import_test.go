package main

import (
	"bytes"
	"context"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/redcon"

	"github.com/delayd/delayd/transfer"
	"github.com/delayd/delayd/transfer/fromredis"
)

// fakeServer answers as a single delayd node does to what an import sends:
// INFO (not a cluster), and DELAY.IMPORT, which it records.
func fakeServer(t *testing.T) (addr string, imported func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	srv := redcon.NewServer(ln.Addr().String(), func(c redcon.Conn, cmd redcon.Command) {
		switch strings.ToUpper(string(cmd.Args[0])) {
		case "HELLO":
			c.WriteError("ERR unknown command 'HELLO'") // a client falls back to RESP2
		case "INFO":
			c.WriteBulkString("# Cluster\r\ncluster_enabled:0\r\n")
		case "DELAY.IMPORT":
			var parts []string
			for _, a := range cmd.Args[1:] {
				parts = append(parts, string(a))
			}
			mu.Lock()
			got = append(got, strings.Join(parts, " "))
			mu.Unlock()
			c.WriteBulk(cmd.Args[2])
		default:
			c.WriteString("OK")
		}
	}, nil, nil)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

// delayd import --from-redis hands its flags to fromredis.Read, writes what
// Read emits through the same importer as JSON lines, and prints Read's
// report beside its own counts.
func TestImportFromRedisFlagsReachRead(t *testing.T) {
	addr, imported := fakeServer(t)
	defer func(f func(context.Context, fromredis.Options, func(transfer.Job) error) (fromredis.Report, error)) {
		readFromRedis = f
	}(readFromRedis)
	var opts fromredis.Options
	readFromRedis = func(_ context.Context, o fromredis.Options, emit func(transfer.Job) error) (fromredis.Report, error) {
		opts = o
		for _, j := range []transfer.Job{
			{Queue: "emails", ID: "a1", Due: 1700000000000, Payload: "p1", Retry: 25},
			{Queue: "emails", ID: "a2", Due: 1700000000001, PayloadBase64: "//4="},
		} {
			if err := emit(j); err != nil {
				return fromredis.Report{}, err
			}
		}
		return fromredis.Report{Read: 2, Skipped: 1, Reasons: map[string]int64{"no payload": 1}}, nil
	}
	var stderr bytes.Buffer
	code := runImport([]string{"--addr", addr, "--from-redis", "redis://u:p@10.0.0.1:6380/2", "--format", "asynq",
		"--queue", "emails", "--queue", "sms", "--prefix", "x", "--after", "1700000000000", "--raw"}, strings.NewReader(""), &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := fromredis.Options{URL: "redis://u:p@10.0.0.1:6380/2", Format: "asynq", Queues: []string{"emails", "sms"}, Prefix: "x",
		After: 1700000000000, Raw: true}
	if !reflect.DeepEqual(opts, want) {
		t.Errorf("Read got %+v, want %+v", opts, want)
	}
	if got, want := imported(), []string{"emails a1 1700000000000 p1 RETRY 25", "emails a2 1700000000001 \xff\xfe"}; !reflect.DeepEqual(got, want) {
		t.Errorf("imported %q, want %q", got, want)
	}
	for _, line := range []string{"from redis: read 2, skipped 1 (no payload: 1)", "read 2, added 2, already there 0, failed 0"} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("stderr lacks %q:\n%s", line, stderr.String())
		}
	}
}

// The flags of the two sources do not mix, and --from-redis names its
// formats.
func TestImportUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--format", "asynq"},
		{"--queue", "q"},
		{"--from-redis", "redis://x", "--format", "celery"},
		{"--from-redis", "redis://x", "--format", "zset", "--skip", "5"},
		{"--skip", "-1"},
		{"--raw"},
		{"--after", "5"},
		{"--from-redis", "redis://x", "--format", "asynq", "--score-unit", "s"},
		{"--from-redis", "redis://x", "--format", "zset", "--score-unit", "us"},
		{"--from-redis", "redis://x", "--format", "zset", "--after", "-1"},
		{"--bogus"},
	} {
		var stderr bytes.Buffer
		if code := runImport(args, strings.NewReader(""), &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2: %s", args, code, stderr.String())
		}
	}
}
