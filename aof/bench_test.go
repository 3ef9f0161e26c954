package aof

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkAppendFlush appends 100-byte records and flushes every batch
// records (one write(2) per batch, no fsync: the fsync policy is the
// engine's). The peer writes the same payloads unframed with one write(2) per
// batch: the difference is the cost of framing and CRC-32C.
//
//	go test -run '^$' -bench 'AppendFlush|Replay' -benchtime 2s ./aof/
func BenchmarkAppendFlush(b *testing.B) {
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = byte(i)
	}
	for _, batch := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("aof/batch=%d", batch), func(b *testing.B) {
			w, err := OpenAppend(OS, filepath.Join(b.TempDir(), "log"), 0)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(payload)))
			i := 0
			for b.Loop() {
				w.Append(payload)
				if i++; i%batch == 0 {
					if err := w.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			_ = w.f.Close()
		})
		b.Run(fmt.Sprintf("peer=unframed-write/batch=%d", batch), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(payload)))
			var buf []byte
			i := 0
			for b.Loop() {
				buf = append(buf, payload...)
				if i++; i%batch == 0 {
					if _, err := f.Write(buf); err != nil {
						b.Fatal(err)
					}
					buf = buf[:0]
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkAppend is the in-memory half of the above: framing and checksum.
func BenchmarkAppend(b *testing.B) {
	payload := make([]byte, 100)
	w := &Writer{}
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		w.Append(payload)
		if len(w.buf) > 1<<20 {
			w.buf = w.buf[:0]
		}
	}
}

// BenchmarkReplay replays a log of 1M 100-byte records from the real
// filesystem (page cache warm), and from MemFS (CPU only). The peer reads the
// same file with os.ReadFile: the floor for any replay.
func BenchmarkReplay(b *testing.B) {
	const records = 1_000_000
	path := filepath.Join(b.TempDir(), "log")
	w, err := OpenAppend(OS, path, 0)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 100)
	for i := range records {
		payload[0], payload[1], payload[2] = byte(i), byte(i>>8), byte(i>>16)
		w.Append(payload)
		if i%1000 == 999 {
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	mem := NewMemFS()
	mem.WriteFile(path, data)

	for _, fs := range []struct {
		name string
		fs   FS
	}{{"aof/fs=os", OS}, {"aof/fs=mem", mem}} {
		b.Run(fs.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				n := 0
				res, err := Replay(fs.fs, path, func(p []byte) error { n += len(p); return nil })
				if err != nil || res.Records != records || n != records*len(payload) {
					b.Fatalf("Replay = %+v, %v", res, err)
				}
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
	b.Run("peer=os.ReadFile", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := os.ReadFile(path); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
