package aof

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"testing"
)

const segLog = "/data/delayd.aof"

// replaySegs replays every segment the manifest names, in order.
func replaySegs(t *testing.T, fs FS) [][]byte {
	t.Helper()
	ids, legacy, err := ReadManifest(fs, segLog)
	if err != nil || legacy {
		t.Fatalf("manifest: %v (legacy %v)", err, legacy)
	}
	var all [][]byte
	for _, id := range ids {
		got, _, err := replayAll(fs, SegPath(segLog, id))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
	}
	return all
}

func TestManifestRoundTrip(t *testing.T) {
	fs := NewMemFS()
	want := []uint64{3, 4, 9, 1 << 40}
	if err := WriteManifest(fs, segLog, want); err != nil {
		t.Fatal(err)
	}
	got, legacy, err := ReadManifest(fs, segLog)
	if err != nil || legacy || !slices.Equal(got, want) {
		t.Fatalf("ReadManifest = %v, %v, %v; want %v", got, legacy, err, want)
	}
	// One flipped bit anywhere in the record is refused, never read as
	// a legacy log.
	data, _ := fs.ReadFile(segLog)
	for i := HeaderSize + RecordHeaderSize + 1; i < len(data); i++ {
		bad := slices.Clone(data)
		bad[i] ^= 0x10
		fs.WriteFile(segLog, bad)
		if _, legacy, err := ReadManifest(fs, segLog); !errors.Is(err, ErrManifest) || legacy {
			t.Errorf("byte %d flipped: %v (legacy %v), want ErrManifest", i, err, legacy)
		}
	}
}

// A log of an earlier release becomes segment 1 as it is, and a crash at
// any step of that (a failed write, fsync, rename or directory fsync,
// then a power loss) leaves a directory that opens to the same records,
// once each.
func TestOpenSegmentsUpgradeCrashAtEveryStep(t *testing.T) {
	want := [][]byte{[]byte("\x01one"), []byte("\x01two"), []byte("\x02three")}
	for _, op := range []Op{OpWrite, OpSync, OpRename, OpSyncDir, OpOpen, OpRemove} {
		for after := int64(0); after < 6; after++ {
			t.Run(fmt.Sprintf("op%d-after%d", op, after), func(t *testing.T) {
				fs := NewMemFS()
				writeLog(t, fs, segLog, want)
				if err := fs.SyncDir("/data"); err != nil {
					t.Fatal(err)
				}
				fs.Inject(Fault{Op: op, After: after})
				_, _ = OpenSegments(fs, segLog)
				fs.Crash()
				ids, err := OpenSegments(fs, segLog)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, []uint64{1}) {
					t.Fatalf("ids %v, want [1]", ids)
				}
				samePayloads(t, replaySegs(t, fs), want)
			})
		}
	}
}

// A new directory starts as an empty segment 1, crash-safe too.
func TestOpenSegmentsFreshCrashAtEveryStep(t *testing.T) {
	for _, op := range []Op{OpWrite, OpSync, OpRename, OpSyncDir, OpOpen} {
		for after := int64(0); after < 6; after++ {
			fs := NewMemFS()
			fs.Inject(Fault{Op: op, After: after})
			_, _ = OpenSegments(fs, segLog)
			fs.Crash()
			ids, err := OpenSegments(fs, segLog)
			if err != nil || !slices.Equal(ids, []uint64{1}) {
				t.Fatalf("op %d after %d: ids %v, %v", op, after, ids, err)
			}
			if got := replaySegs(t, fs); len(got) != 0 {
				t.Fatalf("op %d after %d: %d records in a new log", op, after, len(got))
			}
		}
	}
}

// Segments outside the manifest are what a crash left of a change: a
// roll's next segment, a compaction's dropped one. They are removed; one
// the manifest names but that is gone is refused.
func TestOpenSegmentsLeftovers(t *testing.T) {
	fs := NewMemFS()
	for id := uint64(1); id <= 6; id++ {
		writeLog(t, fs, SegPath(segLog, id), [][]byte{{byte(id)}})
	}
	fs.WriteFile(segLog+ManifestTempSuffix, []byte("half"))
	if err := WriteManifest(fs, segLog, []uint64{3, 4}); err != nil {
		t.Fatal(err)
	}
	ids, err := OpenSegments(fs, segLog)
	if err != nil || !slices.Equal(ids, []uint64{3, 4}) {
		t.Fatalf("ids %v, %v", ids, err)
	}
	for _, id := range []uint64{1, 2, 5, 6} {
		if _, err := fs.Stat(SegPath(segLog, id)); !errors.Is(err, iofs.ErrNotExist) {
			t.Errorf("segment %d left: %v", id, err)
		}
	}
	if _, err := fs.Stat(segLog + ManifestTempSuffix); err == nil {
		t.Error("manifest temp left")
	}
	fs.Remove(SegPath(segLog, 4))
	if _, err := OpenSegments(fs, segLog); !errors.Is(err, ErrManifest) {
		t.Fatalf("a missing segment: %v, want ErrManifest", err)
	}
}
