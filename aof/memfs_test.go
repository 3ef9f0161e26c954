package aof

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"testing"
)

func create(t *testing.T, fs FS, name, data string, sync bool) File {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func contents(fs *MemFS, name string) string {
	b, err := fs.ReadFile(name)
	if errors.Is(err, iofs.ErrNotExist) {
		return "<none>"
	}
	return string(b)
}

// TestMemFSCrash pins down what survives a crash.
func TestMemFSCrash(t *testing.T) {
	fs := NewMemFS()
	a := create(t, fs, "/d/a", "synced", true)
	if err := fs.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte(" and not")); err != nil {
		t.Fatal(err)
	}
	create(t, fs, "/d/b", "synced, but its directory is not", true)
	create(t, fs, "/e/c", "not synced, directory synced", false)
	if err := fs.SyncDir("/e"); err != nil {
		t.Fatal(err)
	}

	clone := fs.CrashClone()
	fs.Crash()
	for _, m := range []*MemFS{fs, clone} {
		for name, want := range map[string]string{"/d/a": "synced", "/d/b": "<none>", "/e/c": ""} {
			if got := contents(m, name); got != want {
				t.Errorf("after a crash %s = %q, want %q", name, got, want)
			}
		}
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a handle from before the crash wrote: %v", err)
	}
}

// TestMemFSRename: a rename is durable only once its directory is synced.
func TestMemFSRename(t *testing.T) {
	fs := NewMemFS()
	create(t, fs, "/d/log", "old", true)
	create(t, fs, "/d/tmp", "new", true)
	if err := fs.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename("/d/tmp", "/d/log"); err != nil {
		t.Fatal(err)
	}
	if got := contents(fs, "/d/log"); got != "new" {
		t.Fatalf("log = %q after rename", got)
	}
	c := fs.CrashClone()
	if got, tmp := contents(c, "/d/log"), contents(c, "/d/tmp"); got != "old" || tmp != "new" {
		t.Fatalf("crash before SyncDir: log %q, tmp %q; want the old names", got, tmp)
	}
	if err := fs.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	fs.Crash()
	if got, tmp := contents(fs, "/d/log"), contents(fs, "/d/tmp"); got != "new" || tmp != "<none>" {
		t.Fatalf("crash after SyncDir: log %q, tmp %q", got, tmp)
	}
	if err := fs.Remove("/d/log"); err != nil {
		t.Fatal(err)
	}
	fs.Crash()
	if got := contents(fs, "/d/log"); got != "new" {
		t.Fatalf("a remove without SyncDir survived a crash: %q", got)
	}
}

// TestMemFSFile checks the File methods the log uses against os.File's rules.
func TestMemFSFile(t *testing.T) {
	fs := NewMemFS()
	f := create(t, fs, "/f", "0123456789", false)
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	// Writing past the end fills the gap with zeros, not with the bytes an
	// earlier truncate cut off.
	if _, err := f.Seek(6, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("X")); err != nil {
		t.Fatal(err)
	}
	if got := contents(fs, "/f"); got != "0123\x00\x00X" {
		t.Fatalf("contents %q", got)
	}
	if err := f.Truncate(9); err != nil {
		t.Fatal(err)
	}
	if got := contents(fs, "/f"); got != "0123\x00\x00X\x00\x00" {
		t.Fatalf("contents after extending %q", got)
	}
	buf := make([]byte, 4)
	if n, err := f.ReadAt(buf, 7); n != 2 || err != io.EOF {
		t.Fatalf("ReadAt past the end = %d, %v", n, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(f); err != nil || len(b) != 9 {
		t.Fatalf("ReadAll = %d bytes, %v", len(b), err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 9 {
		t.Fatalf("Stat = %v, %v", fi, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(buf); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}

	if _, err := fs.OpenFile("/f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, iofs.ErrExist) {
		t.Fatalf("O_EXCL on an existing file = %v", err)
	}
	if _, err := fs.OpenFile("/missing", os.O_RDONLY, 0); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("open of a missing file = %v", err)
	}
	r, err := fs.OpenFile("/f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("x")); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("Write to a read-only file = %v", err)
	}
	if fi, err := fs.Stat("/"); err != nil || !fi.IsDir() {
		t.Fatalf("Stat of a directory = %v, %v", fi, err)
	}
}

// TestMemFSFaults: After counts what still succeeds; a fault fires once
// unless it is sticky; Path picks the file.
func TestMemFSFaults(t *testing.T) {
	fs := NewMemFS()
	f := create(t, fs, "/f", "", false)
	g := create(t, fs, "/g", "", false)
	fs.Inject(Fault{Op: OpWrite, Path: "/f", After: 5})
	if _, err := g.Write([]byte("0123456789")); err != nil {
		t.Fatalf("a fault on /f failed a write to /g: %v", err)
	}
	if n, err := f.Write([]byte("0123456789")); n != 5 || !errors.Is(err, ErrInjected) {
		t.Fatalf("Write = %d, %v; want a short write of 5 bytes", n, err)
	}
	if _, err := f.Write([]byte("more")); err != nil {
		t.Fatalf("a fault that fired once fired again: %v", err)
	}

	disk := errors.New("EIO")
	fs.Inject(Fault{Op: OpSync, After: 1, Err: disk, Sticky: true})
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := f.Sync(); !errors.Is(err, disk) {
			t.Fatalf("Sync = %v, want the sticky fault", err)
		}
	}
	if got := fs.SyncCount("/f"); got != 1 {
		t.Fatalf("SyncCount = %d, want 1", got)
	}
	fs.ClearFaults()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
