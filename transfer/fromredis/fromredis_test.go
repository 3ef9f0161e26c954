package fromredis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/delayd/delayd/transfer"
)

// TestPagerWhileTheSetChanges reads a set of long runs of equal scores (as
// asynq's whole seconds make) in small pages while, between pages, members
// already read and members not yet read are removed and new ones added on
// both sides of the place reached: as the old system and its producers
// do. Every member there from start to end must be read exactly once, in
// order, and no member twice.
func TestPagerWhileTheSetChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: startRedis(t), Protocol: 2}) // as Read makes it
	defer rdb.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const key = "z"
	var members []redis.Z
	for i := range 5000 {
		score := float64(100 + i%7) // seven runs of ~700 ties
		if i%5 == 0 {
			score = float64(rng.IntN(1000))
		}
		members = append(members, redis.Z{Score: score, Member: fmt.Sprintf("m%05d", rng.IntN(1e5)) + strconv.Itoa(i)})
	}
	if err := rdb.ZAdd(ctx, key, members...).Err(); err != nil {
		t.Fatal(err)
	}
	stayed := map[string]bool{}
	for _, m := range members {
		stayed[m.Member.(string)] = true
	}
	p := newPager(rdb, key, 13)
	seen := map[string]int{}
	var prev *entry
	for pages := 0; ; pages++ {
		page, err := p.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			seen[e.member]++
			if prev != nil && !less(*prev, e) {
				t.Fatalf("out of order: %+v then %+v", *prev, e)
			}
			prev = &e
		}
		// The old system takes a few, read and unread, and producers add
		// some before and after the place reached.
		for range 3 {
			m := members[rng.IntN(len(members))].Member.(string)
			delete(stayed, m)
			rdb.ZRem(ctx, key, m)
		}
		rdb.ZAdd(ctx, key,
			redis.Z{Score: prev.value, Member: fmt.Sprintf("new-%d-a", pages)},
			redis.Z{Score: prev.value + 1, Member: fmt.Sprintf("new-%d-b", pages)},
			redis.Z{Score: 5000, Member: fmt.Sprintf("late-%d", pages)})
	}
	for m := range stayed {
		if seen[m] != 1 {
			t.Errorf("%s, in the set throughout, read %d times", m, seen[m])
		}
	}
	for m, n := range seen {
		if n > 1 {
			t.Errorf("%s read %d times", m, n)
		}
	}
	for m := range seen {
		if len(m) > 5 && m[:5] == "late-" {
			t.Errorf("%s, added past the snapshot's end, was read: the read would never end under a steady producer", m)
		}
	}
}

// TestSidekiqLayout writes Sidekiq's layout as its documentation gives it
// (Ruby is not at hand to run Sidekiq): github.com/sidekiq/sidekiq wiki
// "Job Format" for the job JSON (class, args, jid, queue, retry,
// created_at, enqueued_at; retry_count and error_message once failed,
// lib/sidekiq/job_retry.rb), lib/sidekiq/client.rb (atomic_push: ZADD
// "schedule" with the float "at" as score) and job_retry.rb (ZADD "retry"
// with the float retry time).
func TestSidekiqLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	ctx := context.Background()
	addr := startRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	type sj struct {
		Class      string  `json:"class"`
		Args       []any   `json:"args"`
		JID        string  `json:"jid"`
		Queue      string  `json:"queue"`
		Retry      any     `json:"retry"`
		CreatedAt  float64 `json:"created_at"`
		RetryCount *int    `json:"retry_count,omitempty"`
		Error      string  `json:"error_message,omitempty"`
		At         float64 `json:"at"`
	}
	two := 2
	jobs := []sj{
		{Class: "HardWorker", Args: []any{"bob", 5}, JID: "b4a577edbccf1d805744efa9", Queue: "default", Retry: true, At: 1796000000.1234},
		{Class: "Mailer", Args: []any{1}, JID: "0b1e4f8d7e6a5c4b3a291807", Queue: "mail", Retry: 5, At: 1796000000.0005},
		{Class: "Once", Args: []any{}, JID: "ffffffffffffffffffffffff", Queue: "default", Retry: false, At: 1796000001},
	}
	retried := sj{Class: "HardWorker", Args: []any{"ann", 1}, JID: "aaaaaaaaaaaaaaaaaaaaaaaa", Queue: "default", Retry: true,
		RetryCount: &two, Error: "boom", At: 1795999999.999}
	for _, j := range jobs {
		b, _ := json.Marshal(j)
		rdb.ZAdd(ctx, "schedule", redis.Z{Score: j.At, Member: string(b)})
	}
	b, _ := json.Marshal(retried)
	rdb.ZAdd(ctx, "retry", redis.Z{Score: retried.At, Member: string(b)})
	rdb.ZAdd(ctx, "schedule", redis.Z{Score: 1, Member: "not json"})

	var got []transfer.Job
	rep, err := Read(ctx, Options{URL: "redis://" + addr, Format: "sidekiq"}, func(j transfer.Job) error {
		got = append(got, j)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		queue, id     string
		due           int64
		retry, deliv  int64
		errorMessage  string
		payloadFromAt float64
	}{
		{"default", "aaaaaaaaaaaaaaaaaaaaaaaa", 1795999999999, 25, 3, "boom", retried.At},
		{"mail", "0b1e4f8d7e6a5c4b3a291807", 1796000000001, 5, 0, "", jobs[1].At},
		{"default", "b4a577edbccf1d805744efa9", 1796000000123, 25, 0, "", jobs[0].At},
		{"default", "ffffffffffffffffffffffff", 1796000001000, -1, 0, "", jobs[2].At},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d jobs %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Queue != w.queue || g.ID != w.id || g.Due != w.due || g.Retry != w.retry || int64(g.Deliveries) != w.deliv || g.Error != w.errorMessage {
			t.Errorf("job %d: %+v, want %+v", i, g, w)
		}
		var back sj
		if json.Unmarshal([]byte(g.Payload), &back) != nil || back.JID != w.id || back.At != w.payloadFromAt {
			t.Errorf("job %d: payload %s is not the job as Sidekiq keeps it", i, g.Payload)
		}
	}
	if rep.Read != 4 || rep.Skipped != 1 || rep.Reasons[reasonSidekiqBad] != 1 {
		t.Errorf("report %+v", rep)
	}
	// Queues picks by the job's own queue.
	got = nil
	if _, err := Read(ctx, Options{URL: "redis://" + addr, Format: "sidekiq", Queues: []string{"mail"}}, func(j transfer.Job) error {
		got = append(got, j)
		return nil
	}); err != nil || len(got) != 1 || got[0].Queue != "mail" {
		t.Errorf("Queues mail: %+v, %v", got, err)
	}
}

// TestZset reads plain sorted sets in ms and in seconds: ids made from the
// payload are the same on a second read, and After leaves the early jobs.
func TestZset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	ctx := context.Background()
	addr := startRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	rdb.ZAdd(ctx, "jobs:ms", redis.Z{Score: 1796000000123, Member: `{"a":1}`}, redis.Z{Score: 1796000000124, Member: "\xff\x00binary"})
	rdb.ZAdd(ctx, "jobs:s", redis.Z{Score: 1796000000.5, Member: "x"})
	rdb.ZAdd(ctx, "sidekiq:schedule", redis.Z{Score: 1, Member: `{"jid":"` + strings.Repeat("j", 257) + `","queue":"q"}`})
	read := func(o Options) (map[string]transfer.Job, Report) {
		got := map[string]transfer.Job{}
		rep, err := Read(ctx, o, func(j transfer.Job) error {
			if _, dup := got[j.Queue+j.ID]; dup {
				t.Errorf("%s/%s twice", j.Queue, j.ID)
			}
			got[j.Queue+j.ID] = j
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, rep
	}
	a, _ := read(Options{URL: "redis://" + addr, Format: "zset", Queues: []string{"jobs:ms"}})
	b, _ := read(Options{URL: "redis://" + addr, Format: "zset", Queues: []string{"jobs:ms"}})
	if len(a) != 2 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("two reads differ or miss: %v and %v", a, b)
	}
	j := a["jobs:ms"+zsetID(`{"a":1}`)]
	if j.Due != 1796000000123 || j.Payload != `{"a":1}` || len(j.ID) != 32 {
		t.Errorf("json member: %+v", j)
	}
	if j := a["jobs:ms"+zsetID("\xff\x00binary")]; j.Due != 1796000000124 || j.PayloadBase64 != "/wBiaW5hcnk=" {
		t.Errorf("binary member: %+v", j)
	}
	s, _ := read(Options{URL: "redis://" + addr, Format: "zset", Queues: []string{"jobs:s"}, ScoreUnit: "s"})
	if j := s["jobs:s"+zsetID("x")]; j.Due != 1796000000500 {
		t.Errorf("seconds: %+v", j)
	}
	c, rep := read(Options{URL: "redis://" + addr, Format: "zset", Queues: []string{"jobs:ms"}, After: 1796000000124})
	if len(c) != 1 || rep.Reasons[ReasonBeforeCut] != 1 {
		t.Errorf("After: %v %+v", c, rep)
	}
	if got, rep := read(Options{URL: "redis://" + addr, Format: "sidekiq", Prefix: "sidekiq"}); len(got) != 0 || rep.Reasons[ReasonLongID] != 1 {
		t.Errorf("an id of 257 bytes: %v %+v", got, rep)
	}
	stop := errors.New("the caller's own")
	n := 0
	rep, err := Read(ctx, Options{URL: "redis://" + addr, Format: "zset", Queues: []string{"jobs:ms", "jobs:s"}, PageSize: 1},
		func(transfer.Job) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 || rep.Read != 0 {
		t.Errorf("an emit error: %v after %d calls, report %+v; want it back after the first", err, n, rep)
	}
	if _, err := Read(ctx, Options{URL: "redis://" + addr, Format: "zset"}, nil); err == nil {
		t.Error("zset without keys: no error")
	}
}

// TestDecodeTaskMessage decodes a TaskMessage as protobuf writes one:
// fields in any order, unknown ones passed over, headers as map entries.
func TestDecodeTaskMessage(t *testing.T) {
	var b []byte
	str := func(num protowire.Number, s string) {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	num := func(n protowire.Number, v uint64) {
		b = protowire.AppendTag(b, n, protowire.VarintType)
		b = protowire.AppendVarint(b, v)
	}
	str(tmID, "t1")
	num(11, 1700000000) // last_failed_at: not read
	str(tmType, "email:send")
	str(tmPayload, "\x01\x02")
	var entry []byte
	entry = protowire.AppendTag(entry, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, "k")
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendString(entry, "v")
	b = protowire.AppendTag(b, tmHeaders, protowire.BytesType)
	b = protowire.AppendBytes(b, entry)
	num(tmRetry, 25)
	num(tmRetried, 3)
	num(tmTimeout, 60)
	str(tmErrorMsg, "boom")
	str(99, "a field of a later asynq")
	m, err := decodeTaskMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.id != "t1" || m.typ != "email:send" || string(m.payload) != "\x01\x02" || m.headers["k"] != "v" ||
		m.retry != 25 || m.retried != 3 || m.timeout != 60 || m.errorMsg != "boom" {
		t.Errorf("%+v", m)
	}
	if got := string(asynqEnvelope(m)); got != `{"type":"email:send","payload_base64":"AQI=","headers":{"k":"v"}}` {
		t.Errorf("envelope %s", got)
	}
	m.payload, m.headers = []byte(`{"to":"a@b.c"}`), nil
	if got := string(asynqEnvelope(m)); got != `{"type":"email:send","payload":{"to":"a@b.c"}}` {
		t.Errorf("envelope %s", got)
	}
	for _, bad := range [][]byte{b[:len(b)-3], []byte("not protobuf at all"), nil} {
		if _, err := decodeTaskMessage(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestBullMQFields(t *testing.T) {
	for opts, want := range map[string]int64{
		`{"attempts":3,"backoff":{"delay":3600000,"type":"fixed"}}`: 3,
		`{"timestamp":1796058793720,"delay":3600001,"attempts":0}`:  0,
		`{"jobId":"x"}`:   0,
		`{"attempts":12}`: 12,
		``:                0,
	} {
		if got := bullmqAttempts(opts); got != want {
			t.Errorf("attempts of %s: %d, want %d", opts, got, want)
		}
	}
	for _, c := range []struct{ name, data, want string }{
		{"email:send", `{"to":"a@b.c"}`, `{"name":"email:send","data":{"to":"a@b.c"}}`},
		{`we"ird`, `not json`, `{"name":"we\"ird","data":"not json"}`},
		{"n", "", `{"name":"n"}`},
	} {
		if got := string(bullmqEnvelope(c.name, c.data)); got != c.want {
			t.Errorf("envelope %s, want %s", got, c.want)
		}
	}
}
