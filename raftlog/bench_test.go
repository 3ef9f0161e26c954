package raftlog

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkStoreLogs is a follower's append: a batch of 8 entries of 2 KiB
// on a real disk, unsynced (appendfsync everysec), with Raft's compaction
// every 8,192 entries keeping 10,240. docs/decisions/raft-log-store.md
// has this against raft-boltdb, pebble and raft-wal.
func BenchmarkStoreLogs(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "raft.log"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 2048)
	batch := make([]*raft.Log, 8)
	first, next := uint64(1), uint64(1)
	b.SetBytes(int64(len(batch) * len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for k := range batch {
			batch[k] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
			next++
		}
		if err := s.StoreLogs(batch); err != nil {
			b.Fatal(err)
		}
		if last := next - 1; last%8192 < 8 && last > 10240 {
			if err := s.DeleteRange(first, last-10240); err != nil {
				b.Fatal(err)
			}
			first = last - 10240 + 1
		}
	}
}
