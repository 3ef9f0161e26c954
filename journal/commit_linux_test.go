//go:build linux && (amd64 || arm64)

package journal

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/delayd/delayd/aof"
)

// Under always, with one P, a commit among writers (its batch or the last
// held more than one ticket) fsyncs through AIO and parks in the poller,
// so the P reads and applies the next batch meanwhile; a lone writer's
// fsync holds the P (SyncRaw), which costs it no AIO round. With several
// Ps a batch of up to rawSyncBatch holds its P: the others read the next
// batch. A real file: MemFS's fsync is the same on both paths.
func TestAlwaysCommitAmongWritersParksInThePoller(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	dir := t.TempDir()
	probe, err := aof.OpenAppend(aof.OS, filepath.Join(dir, "probe"), 0)
	if err != nil {
		t.Fatal(err)
	}
	before := aof.PolledSyncs()
	if err := probe.SyncPolled(); err != nil {
		t.Fatal(err)
	}
	probe.Close()
	if aof.PolledSyncs() == before {
		t.Skip("AIO refused on this kernel: every fsync makes the ordinary call")
	}

	logPath := filepath.Join(dir, "delayd.aof")
	j := New(Options{FS: aof.OS, Path: logPath, Fsync: FsyncAlways}, Env{
		Failed:  func(uint64, error, bool) bool { t.Error("a write failed"); return false },
		Written: func(int64) {},
	})
	if err := j.Open(0); err != nil {
		t.Fatal(err)
	}
	var want []string
	commit := func(recs ...string) (polled uint64) {
		t.Helper()
		var last uint64
		for _, r := range recs {
			last = j.Append([]byte(r))
			want = append(want, r)
		}
		n := aof.PolledSyncs()
		if err := j.WaitDurable(last); err != nil {
			t.Fatal(err)
		}
		return aof.PolledSyncs() - n
	}
	for i, c := range []struct {
		recs   []string
		polled uint64
		why    string
	}{
		{[]string{"alone"}, 0, "a lone writer's fsync holds the P"},
		{[]string{"a", "b"}, 1, "a batch of two parks in the poller"},
		{[]string{"after"}, 1, "one record after a batch of two: the others may still be writing"},
		{[]string{"alone again"}, 0, "a second batch of one: a lone writer again"},
		{[]string{"c", "d"}, 0, "with two Ps a batch of two holds its P"},
		{[]string{"e", "f"}, 1, "back to one P: a batch of two parks"},
	} {
		switch c.recs[0] {
		case "c":
			runtime.GOMAXPROCS(2)
		case "e":
			runtime.GOMAXPROCS(1)
		}
		if got := commit(c.recs...); got != c.polled {
			t.Errorf("commit %d (%q): %d fsyncs through AIO, want %d: %s", i, c.recs, got, c.polled, c.why)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	if _, err := aof.Replay(aof.OS, logPath, func(p []byte) error { got = append(got, string(p)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("log holds %s, want %s", fmt.Sprint(got), fmt.Sprint(want))
	}
}
