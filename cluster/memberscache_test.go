package cluster

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The members' file reads back what was written, and a missing or torn file
// is no hint (the node then waits for its log, as before the file).
func TestMembersCacheRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if got := loadMembersCache(dir); got != nil {
		t.Fatalf("no file: %v, want nil", got)
	}
	ms := map[string]member{"a": {ID: "a", Addr: "10.0.0.1:6380", BusAddr: "10.0.0.1:16380"}}
	if err := saveMembersCache(dir, ms); err != nil {
		t.Fatal(err)
	}
	if got := loadMembersCache(dir); !reflect.DeepEqual(got, ms) {
		t.Fatalf("read back %v, want %v", got, ms)
	}
	if err := os.WriteFile(filepath.Join(dir, membersCacheFile), []byte(`{"a":{"id":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := loadMembersCache(dir); got != nil {
		t.Fatalf("a torn file: %v, want nil", got)
	}
}
