package aof

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCrashLosesOnlyUnsynced appends, flushes and syncs at random and crashes
// at every step: a crash loses exactly the records after the last Sync, and
// the log is never corrupt. Torn writes (a random prefix of the unsynced
// bytes reached the disk, or the file grew but its data did not) lose at most
// the unsynced records and are cut with a warning, never refused.
func TestCrashLosesOnlyUnsynced(t *testing.T) {
	const path = "/data/appendonly.aof"
	rng := rand.New(rand.NewPCG(3, 4))
	fs := NewMemFS()
	w, err := OpenAppend(fs, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	payloads := randPayloads(rng, 300, 1, 400)
	var appended, flushed, synced int
	var syncedSize int64 = HeaderSize

	for step := 0; step < 600 && appended < len(payloads); step++ {
		switch r := rng.IntN(10); {
		case r < 6:
			w.Append(payloads[appended])
			appended++
		case r < 8:
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			flushed = appended
		default:
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			synced, syncedSize = flushed, w.Size()
		}

		// A clean crash: exactly the synced records.
		c := fs.CrashClone()
		got, res, err := replayAll(c, path)
		if err != nil || res.TornBytes != 0 {
			t.Fatalf("step %d: Replay after a crash: %+v, %v", step, res, err)
		}
		samePayloads(t, got, payloads[:synced])

		// A torn crash: part of the unsynced bytes made it.
		now, _ := fs.ReadFile(path)
		cut := syncedSize + rng.Int64N(int64(len(now))-syncedSize+1)
		torn := slices.Clone(now[:cut])
		if rng.IntN(2) == 0 {
			torn = append(torn, make([]byte, int64(len(now))-cut)...) // the size reached the disk, the data did not
		}
		c = NewMemFS()
		c.WriteFile(path, torn)
		got, _, err = replayAll(c, path)
		if err != nil {
			t.Fatalf("step %d: Replay after a torn crash at %d of %d: %v", step, cut, len(now), err)
		}
		if len(got) < synced || len(got) > flushed {
			t.Fatalf("step %d: torn crash kept %d records, want %d..%d", step, len(got), synced, flushed)
		}
		samePayloads(t, got, payloads[:len(got)])
	}

	// Crash in place: the old Writer is dead, and the log goes on from the
	// synced records.
	fs.Crash()
	w.Append([]byte("x"))
	if err := w.Flush(); err == nil {
		t.Fatal("a Writer from before the crash still writes")
	}
	got, res, err := replayAll(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	samePayloads(t, got, payloads[:synced])
	w, err = OpenAppend(fs, path, res.Size)
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("after the crash"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fs.Crash()
	got, _, err = replayAll(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	samePayloads(t, got, append(slices.Clone(payloads[:synced]), []byte("after the crash")))
}

// TestCrashAfterCreate: a log OpenAppend created survives a crash at once,
// with its header, because the file and its directory were fsynced.
func TestCrashAfterCreate(t *testing.T) {
	const path = "/data/appendonly.aof"
	fs := NewMemFS()
	if _, err := OpenAppend(fs, path, 0); err != nil {
		t.Fatal(err)
	}
	fs.Crash()
	data, err := fs.ReadFile(path)
	if err != nil || !bytes.Equal(data, fileHeader()) {
		t.Fatalf("after a crash the new log is %x (%v), want the header", data, err)
	}
	if _, res, err := replayAll(fs, path); res != (Result{Size: HeaderSize}) || err != nil {
		t.Fatalf("Replay = %+v, %v", res, err)
	}
}

// TestInstallCrash interrupts a rewrite at each step of Install, with or
// without a crash after it: the log is then the old one or the new one, whole,
// never a mix and never corrupt.
func TestInstallCrash(t *testing.T) {
	const path = "/data/appendonly.aof"
	const tmp = path + TempSuffix
	oldLog := [][]byte{[]byte("add 1"), []byte("add 2"), []byte("pop 1"), []byte("add 3")}
	newLog := [][]byte{[]byte("live 2"), []byte("live 3")}

	cases := []struct {
		name    string
		fault   *Fault // makes Install fail at one step; nil: Install completes
		install bool   // Install is called
		wantErr error
		// what Replay(path) finds without a crash, and after one
		live, crashed [][]byte
	}{
		{name: "crash before Install", live: oldLog, crashed: oldLog},
		{name: "fsync of the new log fails", install: true, fault: &Fault{Op: OpSync, Path: tmp}, wantErr: ErrInjected, live: oldLog, crashed: oldLog},
		{name: "rename fails", install: true, fault: &Fault{Op: OpRename}, wantErr: ErrInjected, live: oldLog, crashed: oldLog},
		{name: "directory fsync fails after the rename", install: true, fault: &Fault{Op: OpSyncDir, Path: "/data"}, wantErr: ErrRenameNotDurable, live: newLog, crashed: oldLog},
		{name: "installed", install: true, live: newLog, crashed: newLog},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := NewMemFS()
			writeLog(t, fs, path, oldLog)
			w, name, err := CreateTemp(fs, path)
			if err != nil || name != tmp {
				t.Fatalf("CreateTemp = %q, %v", name, err)
			}
			for _, p := range newLog {
				w.Append(p)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if c.fault != nil {
				fs.Inject(*c.fault)
			}
			if c.install {
				err := Install(fs, tmp, path)
				if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
					t.Fatalf("Install = %v, want %v", err, c.wantErr)
				}
				if c.wantErr != nil && c.wantErr != ErrRenameNotDurable && errors.Is(err, ErrRenameNotDurable) {
					t.Fatalf("Install = %v: says renamed, but the rename did not happen", err)
				}
			}
			got, _, err := replayAll(fs, path)
			if err != nil {
				t.Fatal(err)
			}
			samePayloads(t, got, c.live)

			fs.Crash()
			got, res, err := replayAll(fs, path)
			if err != nil || res.TornBytes != 0 {
				t.Fatalf("Replay after a crash: %+v, %v", res, err)
			}
			samePayloads(t, got, c.crashed)
		})
	}
}

// TestInstallThenAppend: after Install the rewrite's Writer goes on appending
// to the log under its new name, and all of it survives a crash.
func TestInstallThenAppend(t *testing.T) {
	const path = "/data/appendonly.aof"
	fs := NewMemFS()
	writeLog(t, fs, path, [][]byte{[]byte("old")})
	w, tmp, err := CreateTemp(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("live"))
	w.Append([]byte("tail written during the rewrite"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := Install(fs, tmp, path); err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("after install"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	fs.Crash()
	got, res, err := replayAll(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	samePayloads(t, got, [][]byte{[]byte("live"), []byte("tail written during the rewrite"), []byte("after install")})
	if res.Size != w.Size() {
		t.Fatalf("replayed %d bytes, the writer wrote %d", res.Size, w.Size())
	}
	if _, err := fs.Stat(tmp); err == nil {
		t.Fatalf("%s still exists after Install", tmp)
	}
}
