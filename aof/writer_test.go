package aof

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// openWith returns a Writer on a new log at path holding payloads, synced.
func openWith(t *testing.T, fs *MemFS, path string, payloads [][]byte) *Writer {
	t.Helper()
	w, err := OpenAppend(fs, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		w.Append(p)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	return w
}

func fileSize(t *testing.T, fs FS, path string) int64 {
	t.Helper()
	fi, err := fs.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestFlushErrorRollsBack: a write that fails part way (a full disk) fails
// the batch and leaves the file as it was; the next batch is written.
func TestFlushErrorRollsBack(t *testing.T) {
	for _, after := range []int64{0, 1, 10, 27} {
		const path = "/data/log"
		fs := NewMemFS()
		before := [][]byte{[]byte("one"), []byte("two")}
		w := openWith(t, fs, path, before)
		size := w.Size()

		fs.Inject(Fault{Op: OpWrite, Path: path, After: after})
		w.Append([]byte("lost 1"))
		w.Append([]byte("lost 2"))
		err := w.Flush()
		if !errors.Is(err, ErrInjected) || errors.Is(err, ErrWriterFailed) {
			t.Fatalf("after %d: Flush = %v, want the injected error, not a failed Writer", after, err)
		}
		if w.Size() != size || fileSize(t, fs, path) != size || w.Buffered() != 0 {
			t.Fatalf("after %d: Size %d, file %d, Buffered %d; want %d, %d, 0",
				after, w.Size(), fileSize(t, fs, path), w.Buffered(), size, size)
		}

		w.Append([]byte("three"))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		fs.Crash()
		got, _, err := replayAll(fs, path)
		if err != nil {
			t.Fatal(err)
		}
		samePayloads(t, got, [][]byte{[]byte("one"), []byte("two"), []byte("three")})
	}
}

// TestFullDisk: while every write fails, every batch fails and the file does
// not change; once space is back, writing goes on.
func TestFullDisk(t *testing.T) {
	const path = "/data/log"
	fs := NewMemFS()
	w := openWith(t, fs, path, [][]byte{[]byte("one")})
	size := w.Size()
	fs.Inject(Fault{Op: OpWrite, After: 5, Sticky: true})
	for range 3 {
		w.Append([]byte("does not fit"))
		if err := w.Flush(); !errors.Is(err, ErrInjected) {
			t.Fatalf("Flush = %v, want the injected error", err)
		}
		if fileSize(t, fs, path) != size {
			t.Fatalf("file grew to %d bytes on a full disk", fileSize(t, fs, path))
		}
	}
	fs.ClearFaults()
	w.Append([]byte("two"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, err := replayAll(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	samePayloads(t, got, [][]byte{[]byte("one"), []byte("two")})
}

// TestRollbackFails: if a failed write cannot be rolled back, the Writer
// refuses all further work, and the file it leaves replays as a torn tail.
func TestRollbackFails(t *testing.T) {
	const path = "/data/log"
	fs := NewMemFS()
	w := openWith(t, fs, path, [][]byte{[]byte("one")})
	fs.Inject(Fault{Op: OpWrite, After: 6})
	fs.Inject(Fault{Op: OpTruncate})
	w.Append([]byte("half written"))
	if err := w.Flush(); !errors.Is(err, ErrInjected) || !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Flush = %v, want the injected error and ErrWriterFailed", err)
	}
	w.Append([]byte("two"))
	if err := w.Flush(); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Flush after a failed rollback = %v, want ErrWriterFailed", err)
	}
	if err := w.Sync(); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Sync after a failed rollback = %v, want ErrWriterFailed", err)
	}
	if err := w.Close(); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Close = %v, want ErrWriterFailed", err)
	}
	got, res, err := replayAll(fs, path)
	if err != nil || res.TornBytes != 6 {
		t.Fatalf("Replay = %+v, %v; want the 6 half-written bytes cut as a torn tail", res, err)
	}
	samePayloads(t, got, [][]byte{[]byte("one")})
}

// TestSyncErrorIsSticky: after a failed fsync nothing more is written.
func TestSyncErrorIsSticky(t *testing.T) {
	const path = "/data/log"
	fs := NewMemFS()
	w := openWith(t, fs, path, nil)
	fs.Inject(Fault{Op: OpSync})
	w.Append([]byte("one"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); !errors.Is(err, ErrInjected) || !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Sync = %v, want the injected error and ErrWriterFailed", err)
	}
	size := fileSize(t, fs, path)
	w.Append([]byte("two"))
	if err := w.Flush(); !errors.Is(err, ErrWriterFailed) || w.Buffered() != 0 {
		t.Fatalf("Flush after a failed Sync = %v (Buffered %d), want ErrWriterFailed and the batch dropped", err, w.Buffered())
	}
	if err := w.Sync(); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Sync after a failed Sync = %v, want ErrWriterFailed", err)
	}
	if fileSize(t, fs, path) != size {
		t.Fatal("a failed Writer wrote")
	}
}

// TestConcurrentSync: Sync on another goroutine (a background fsync) while
// the owner appends and flushes; run with -race.
func TestConcurrentSync(t *testing.T) {
	const path = "/data/log"
	fs := NewMemFS()
	w := openWith(t, fs, path, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				if err := w.Sync(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	var want [][]byte
	for i := range 500 {
		p := []byte{byte(i), byte(i >> 8), 1}
		want = append(want, p)
		w.Append(p)
		if i%7 == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			_ = w.Size()
		}
	}
	close(stop)
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, err := replayAll(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	samePayloads(t, got, want)
}

func TestOpenAppendSize(t *testing.T) {
	const path = "/data/log"
	fs := NewMemFS()
	w := openWith(t, fs, path, [][]byte{[]byte("one")})
	size := w.Size()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []int64{0, 3, size - 1, size + 1} {
		if _, err := OpenAppend(fs, path, bad); !errors.Is(err, ErrSizeMismatch) {
			t.Errorf("OpenAppend at %d of a %d-byte log = %v, want ErrSizeMismatch", bad, size, err)
		}
	}
	// A file torn at creation that Replay emptied gets a fresh header.
	fs.WriteFile("/data/torn", []byte("DLY"))
	res, err := Replay(fs, "/data/torn", nil)
	if err != nil || res != (Result{TornBytes: 3}) {
		t.Fatalf("Replay = %+v, %v", res, err)
	}
	w, err = OpenAppend(fs, "/data/torn", res.Size)
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("x"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := replayAll(fs, "/data/torn"); err != nil || len(got) != 1 {
		t.Fatalf("Replay = %d records, %v", len(got), err)
	}
}

func TestAppendPanics(t *testing.T) {
	w := openWith(t, NewMemFS(), "/log", nil)
	for _, n := range []int{0, MaxRecordSize + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Append of %d bytes did not panic", n)
				}
			}()
			w.Append(make([]byte, n))
		}()
	}
	w.Append(make([]byte, MaxRecordSize)) // the largest record is fine
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := replayAll(w.fs, "/log"); err != nil || len(got) != 1 || len(got[0]) != MaxRecordSize {
		t.Fatalf("Replay of the largest record: %d records, %v", len(got), err)
	}
}

func TestClose(t *testing.T) {
	const path = "/data/log"
	fs := NewMemFS()
	w := openWith(t, fs, path, nil)
	w.Append([]byte("flushed and synced by Close"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"Close": w.Close(), "Flush": w.Flush(), "Sync": w.Sync()} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	fs.Crash()
	if got, _, err := replayAll(fs, path); err != nil || len(got) != 1 {
		t.Fatalf("after Close and a crash: %d records, %v", len(got), err)
	}
}

// TestOS runs the whole life of a log on the real filesystem: write, tear,
// replay, corrupt, repair, rewrite.
func TestOS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "appendonly.aof")
	l := recoveryLayout()
	writeLog(t, OS, path, l.payloads)
	data, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(data, l.data) {
		t.Fatalf("the log on disk differs from the encoding (%v)", err)
	}

	// Torn: cut into the last record.
	if err := os.Truncate(path, l.end(len(l.off)-1)-3); err != nil {
		t.Fatal(err)
	}
	got, res, err := replayAll(OS, path)
	if err != nil || res.TornBytes == 0 {
		t.Fatalf("Replay of a torn log: %+v, %v", res, err)
	}
	samePayloads(t, got, l.payloads[:len(l.off)-1])
	if fileSize(t, OS, path) != res.Size {
		t.Fatal("the torn tail was not cut")
	}

	// Corrupt: flip a bit in record 5; Replay refuses, Repair cuts.
	data, _ = os.ReadFile(path)
	data[l.off[5]+20] ^= 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := replayAll(OS, path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Replay of a corrupt log = %v", err)
	}
	cut, err := Repair(OS, path)
	if err != nil || cut != l.off[5] {
		t.Fatalf("Repair = %d, %v; want %d", cut, err, l.off[5])
	}
	broken, err := os.ReadFile(path + BrokenSuffix)
	if err != nil || !bytes.Equal(broken, data[cut:]) {
		t.Fatalf(".broken: %d bytes, %v", len(broken), err)
	}

	// Rewrite and install.
	w, tmp, err := CreateTemp(OS, path)
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("live"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := Install(OS, tmp, path); err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("tail"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, res, err = replayAll(OS, path)
	if err != nil {
		t.Fatal(err)
	}
	samePayloads(t, got, [][]byte{[]byte("live"), []byte("tail")})
	w, err = OpenAppend(OS, path, res.Size)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left behind: %v", tmp, err)
	}
}

// A flush to a real file allocates nothing: the log writes a batch for
// nearly every job when jobs come one at a time.
func TestFlushToFileAllocatesNothing(t *testing.T) {
	w, err := Create(OS, filepath.Join(t.TempDir(), "log.aof"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec := []byte("a record of a few dozen bytes, as a pop's is")
	allocs := testing.AllocsPerRun(200, func() {
		w.Append(rec)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a flush; want 0", allocs)
	}
	if want := int64(201) * int64(len(rec)); w.Size() < want {
		t.Fatalf("file holds %d bytes after 201 flushes of %d; want at least %d", w.Size(), len(rec), want)
	}
}

// SyncRaw fsyncs a real file with no allocation, fails as Sync does, and
// on another kind of file is Sync.
func TestSyncRaw(t *testing.T) {
	w, err := Create(OS, filepath.Join(t.TempDir(), "log.aof"))
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("a"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := w.SyncRaw(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations an fsync; want 0", allocs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.SyncRaw(); !errors.Is(err, ErrClosed) {
		t.Fatalf("SyncRaw of a closed Writer = %v, want ErrClosed", err)
	}

	const path = "/data/log"
	fs := NewMemFS()
	m := openWith(t, fs, path, nil)
	before := fs.SyncCount(path)
	if err := m.SyncRaw(); err != nil || fs.SyncCount(path) != before+1 {
		t.Fatalf("SyncRaw of a MemFS file: %v, %d fsyncs; want Sync's one", err, fs.SyncCount(path)-before)
	}
	fs.Inject(Fault{Op: OpSync})
	if err := m.SyncRaw(); !errors.Is(err, ErrInjected) || !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("SyncRaw = %v, want the injected error and ErrWriterFailed", err)
	}
	if err := m.Flush(); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Flush after a failed SyncRaw = %v, want ErrWriterFailed", err)
	}
}
