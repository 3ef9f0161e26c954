package engine

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/delayd/delayd/aof"
)

// loadingFields turns Persistence's pairs into a map.
func loadingFields(l *Loading) map[string]string {
	m := map[string]string{}
	for _, f := range l.Persistence() {
		m[f[0]] = f[1]
	}
	return m
}

// writeJobs logs n jobs of 1 KiB payloads (several MiB, so the replay
// reports progress more than once) and returns the log's size.
func writeJobs(t *testing.T, fs *aof.MemFS, n int) int64 {
	t.Helper()
	e := mustNew(t, logged(fs, FsyncNo))
	p := strings.Repeat("x", 1024)
	for i := range n {
		add(t, e, "q"+strconv.Itoa(i%4), 3_600_000, p)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(seg1)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(data))
}

// TestLoadingProgress: New reports to Options.Loading what it replayed, in
// bytes and records, and INFO's loading fields read it under Redis's names.
func TestLoadingProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		const n = 4000
		size := writeJobs(t, fs, n)

		var l Loading
		if f := loadingFields(&l); f["loading"] != "1" || f["loading_loaded_perc"] != "0.00" || f["loading_total_bytes"] != "0" {
			t.Fatalf("before New: %v", f)
		}
		o := logged(fs, FsyncNo)
		o.Loading = &l
		e := mustNew(t, o)
		defer e.Close()
		loaded, total, records := l.Progress()
		// the engine itself logs records (meta, and the adds) beside the jobs
		if loaded != size || total != size || records < n {
			t.Fatalf("Progress() = %d bytes of %d, %d records; want %d of %d, at least %d records", loaded, total, records, size, size, n)
		}
		f := loadingFields(&l)
		for k, want := range map[string]string{
			"loading": "1", "async_loading": "0", "loading_total_bytes": strconv.FormatInt(size, 10),
			"loading_loaded_bytes": strconv.FormatInt(size, 10), "loading_loaded_perc": "100.00",
			"loading_eta_seconds": "0", "loading_loaded_records": strconv.FormatInt(records, 10),
		} {
			if f[k] != want {
				t.Errorf("%s = %q, want %q (all: %v)", k, f[k], want, f)
			}
		}
		if st, _ := strconv.ParseInt(f["loading_start_time"], 10, 64); st <= 0 {
			t.Errorf("loading_start_time = %q", f["loading_start_time"])
		}
		if got := e.Info().Jobs; got != n {
			t.Fatalf("%d jobs after the load, want %d", got, n)
		}
		p := map[string]string{}
		for _, kv := range e.Persistence() {
			p[kv[0]] = kv[1]
		}
		if p["loading"] != "0" || p["async_loading"] != "0" {
			t.Fatalf("the engine's Persistence after the load: %v", p)
		}
	})
}

// TestLoadingAbort: an aborted load returns ErrLoadAborted and leaves the
// log as it was, so the next start loads every job.
func TestLoadingAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		const n = 3000
		size := writeJobs(t, fs, n)
		var l Loading
		l.Abort()
		o := logged(fs, FsyncNo)
		o.Loading = &l
		if e, err := New(o); !errors.Is(err, ErrLoadAborted) {
			if e != nil {
				e.Close()
			}
			t.Fatalf("New after Abort = %v, want ErrLoadAborted", err)
		}
		if loaded, _, _ := l.Progress(); loaded >= size {
			t.Fatalf("an aborted load went through the whole log (%d of %d bytes)", loaded, size)
		}
		if data, _ := fs.ReadFile(seg1); int64(len(data)) != size {
			t.Fatalf("the aborted load changed the log from %d to %d bytes", size, len(data))
		}
		e := mustNew(t, logged(fs, FsyncNo))
		defer e.Close()
		if got := e.Info().Jobs; got != n {
			t.Fatalf("%d jobs after an aborted load and a restart, want %d", got, n)
		}
	})
}
