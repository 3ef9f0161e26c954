//go:build linux && (amd64 || arm64)

package aof

import (
	"fmt"
	"path/filepath"
	"testing"
)

// SyncPolled of a log file goes through AIO and the poller
// (aiosync_linux.go), not an fsync(2) that keeps the caller's P: every
// SyncPolled of a real file is one AIO fsync, and what was flushed before
// it replays; Sync makes the ordinary call. A file AIO cannot take
// (MemFS's) is fsynced as before.
func TestSyncThroughThePoller(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	w, err := OpenAppend(OS, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := aioSync.count.Load()
	var want []string
	for i := range 3 {
		for k := range 100 {
			rec := fmt.Sprintf("record %d.%d", i, k)
			want = append(want, rec)
			w.Append([]byte(rec))
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := w.SyncPolled(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if aioSync.off {
		t.Skip("AIO refused on this kernel: Sync made the ordinary call")
	}
	if n := aioSync.count.Load() - before; n != 3 {
		t.Fatalf("%d fsyncs through AIO for 3 SyncPolled and a Sync, want 3", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	if _, err := Replay(OS, path, func(p []byte) error { got = append(got, string(p)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}

	fs := NewMemFS()
	m, err := OpenAppend(fs, "log", 0)
	if err != nil {
		t.Fatal(err)
	}
	n, syncs := aioSync.count.Load(), fs.SyncCount("log")
	m.Append([]byte("x"))
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncPolled(); err != nil {
		t.Fatal(err)
	}
	if aioSync.count.Load() != n || fs.SyncCount("log") != syncs+1 {
		t.Fatalf("a MemFS file: %d AIO fsyncs and %d of its own, want 0 and 1", aioSync.count.Load()-n, fs.SyncCount("log")-syncs)
	}
}
