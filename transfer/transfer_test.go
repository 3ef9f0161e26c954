package transfer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A DELAY.SCAN job becomes a line and the line the DELAY.IMPORT that
// writes the same job: a reservation as a delayed job due at its deadline,
// the server's "none" values (ack timeout 0, retry 0) as -1 on the line and
// back, a payload that is not UTF-8 in base64.
func TestScanJobToLineToImport(t *testing.T) {
	for _, tc := range []struct {
		name string
		scan []any
		line string
		cmd  string
	}{
		{"reserved",
			[]any{"id", "j1", "state", "reserved", "due", int64(100), "payload", "héllo", "deliveries", int64(2), "seq", int64(9),
				"ack_timeout", int64(30000), "retry", int64(-1), "ack_deadline", int64(5000), "group", "g", "priority", int64(3)},
			`{"queue":"q","id":"j1","state":"reserved","due":100,"payload":"héllo","deliveries":2,"ack_deadline":5000,"ack_timeout":30000,"group":"g","priority":3}`,
			"DELAY.IMPORT q j1 5000 héllo ACKTIMEOUT 30000 GROUP g PRIORITY 3 DELIVERIES 2"},
		{"none values, binary",
			[]any{"id", "j2", "state", "delayed", "due", int64(7), "payload", "\xff\x00", "deliveries", int64(0), "seq", int64(1),
				"ack_timeout", int64(0), "retry", int64(0), "deadletter", "dlq"},
			`{"queue":"q","id":"j2","state":"delayed","due":7,"payload_base64":"/wA=","ack_timeout":-1,"retry":-1,"deadletter":"dlq"}`,
			"DELAY.IMPORT q j2 7 \xff\x00 ACKTIMEOUT 0 RETRY 0 DEADLETTER dlq"},
		{"dead letter",
			[]any{"id", "j3", "state", "ready", "due", int64(8), "payload", "", "deliveries", int64(4), "seq", int64(2),
				"ack_timeout", int64(100), "retry", int64(3), "origin", "w", "origin_ack_timeout", int64(0), "origin_retry", int64(-1), "error", "boom"},
			`{"queue":"q","id":"j3","state":"ready","due":8,"deliveries":4,"ack_timeout":100,"retry":3,"origin":"w","origin_ack_timeout":-1,"error":"boom"}`,
			"DELAY.IMPORT q j3 8  ACKTIMEOUT 100 RETRY 3 DELIVERIES 4 ORIGIN w 0 -1  ERROR boom"},
	} {
		j, _, err := jobOf("q", tc.scan)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		line, _ := json.Marshal(j)
		if string(line) != tc.line {
			t.Errorf("%s: line\n got %s\nwant %s", tc.name, line, tc.line)
		}
		var back Job
		if err := json.Unmarshal(line, &back); err != nil || !reflect.DeepEqual(back, j) {
			t.Errorf("%s: the line reads back as %+v (%v)", tc.name, back, err)
		}
		args, fault := importArgs(&back)
		var words []string
		for _, a := range args {
			words = append(words, a.(string))
		}
		if got := strings.Join(words, " "); fault != "" || got != tc.cmd {
			t.Errorf("%s: command\n got %q (%s)\nwant %q", tc.name, got, fault, tc.cmd)
		}
	}
}

// What cannot be a job is said so, and never sent.
func TestImportArgsFaults(t *testing.T) {
	for _, tc := range []struct {
		j    Job
		want string
	}{
		{Job{ID: "a"}, "no queue"},
		{Job{Queue: "q"}, "no id"},
		{Job{Queue: "q", ID: "a", Payload: "x", PayloadBase64: "eA=="}, "both payload and payload_base64"},
		{Job{Queue: "q", ID: "a", PayloadBase64: "!!"}, "payload_base64 is not base64"},
		{Job{Queue: "q", ID: "a", Due: -5}, "negative due time"},
	} {
		if _, fault := importArgs(&tc.j); fault != tc.want {
			t.Errorf("%+v: %q, want %q", tc.j, fault, tc.want)
		}
	}
}

// ReadLines passes over the first skip job lines (blank lines not counted),
// counts a line that is not JSON as a fault in its place, and reads a line
// longer than its buffer whole.
func TestReadLinesSkipsAndFaults(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	in := `{"queue":"q","id":"1","due":1}` + "\n\n" + `{"queue":"q","id":"2","due":1}` + "\nnot json\n" +
		`{"queue":"q","id":"3","due":1,"payload":"` + long + `"}` + "\n" + `{"queue":"q","id":"4","due":1}`
	record := func(skip int64) []item {
		im := &Importer{quit: make(chan struct{})} // no sender: a batch this small stays in im.batch
		if err := ReadLines(bufio.NewReader(bytes.NewBufferString(in)), skip, im, nil); err != nil {
			t.Fatal(err)
		}
		return im.batch
	}
	ids := func(items []item) string {
		var s []string
		for _, it := range items {
			if it.fault != "" {
				s = append(s, "fault:"+it.fault)
			} else {
				s = append(s, it.args[2].(string)+"/"+itoaLen(it.args[4].(string)))
			}
		}
		return strings.Join(s, " ")
	}
	if g, w := ids(record(0)), "1/0 2/0 fault:not a JSON job line 3/3145728 4/0"; g != w {
		t.Errorf("skip 0: %s, want %s", g, w)
	}
	if g, w := ids(record(2)), "fault:not a JSON job line 3/3145728 4/0"; g != w {
		t.Errorf("skip 2: %s, want %s", g, w)
	}
}

func itoaLen(s string) string {
	b, _ := json.Marshal(len(s))
	return string(b)
}

// The final count line names every reason with its count.
func TestCountsLine(t *testing.T) {
	c := Counts{Read: 10, Added: 6, Existed: 2, Failed: 2, Reasons: map[string]int64{"OOM max-jobs reached (5)": 1, "no id": 1}}
	if got, want := c.String(), "read 10, added 6, already there 2, failed 2 (OOM max-jobs reached (5): 1; no id: 1)"; got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
}

// On a terminal the progress is a bar redrawn in place with jobs, jobs/s
// and ETA, ended by a newline; elsewhere a plain line each time.
func TestProgressLines(t *testing.T) {
	var tty, plain bytes.Buffer
	p := &Progress{Out: &tty, TTY: true, What: "import", TotalBytes: 1000}
	p.start = time.Now().Add(-2 * time.Second)
	p.Jobs.Store(500)
	p.Bytes.Store(250)
	p.show(false)
	if got := tty.String(); !regexp.MustCompile(`^\r\x1b\[K\[=======       +\] import: 500 jobs, 2\d\d jobs/s, ETA [56]s$`).MatchString(got) {
		t.Errorf("bar: %q", got)
	}
	tty.Reset()
	p.show(true)
	if got := tty.String(); !strings.HasSuffix(got, " jobs/s\n") || strings.Contains(got, "ETA") {
		t.Errorf("the last bar: %q", got)
	}
	q := &Progress{Out: &plain, What: "export", Total: 4000}
	q.start = time.Now().Add(-time.Second)
	q.Jobs.Store(1000)
	q.show(false)
	if got := plain.String(); !regexp.MustCompile(`^export: 1000/4000 jobs, \d+ jobs/s, ETA 3s\n$`).MatchString(got) {
		t.Errorf("plain: %q", got)
	}
}
