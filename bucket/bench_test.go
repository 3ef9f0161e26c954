package bucket

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/delayd/delayd/aof"
)

// BenchmarkIndexFile files b.N ids in a presized index, as a start does
// from its runs (a DRAM miss an id), and reports the index's bytes a job.
// go test ./bucket -run XXX -bench IndexFile -benchtime 8000000x
func BenchmarkIndexFile(b *testing.B) {
	var x index
	defer x.reset()
	x.presize(b.N)
	b.ResetTimer()
	for i := range b.N {
		x.put(mix(uint64(i+1)*0x9e3779b97f4a7c15)|1, uint32(i))
	}
	b.StopTimer()
	b.ReportMetric(float64(x.bytes())/float64(b.N), "B/job")
}

// BenchmarkIndexFileMany is BenchmarkIndexFile through fileAll, a run's
// worth of ids (150k) at a time as a start files them: compare the two at a
// size whose index is far larger than the caches (-benchtime 100000000x).
func BenchmarkIndexFileMany(b *testing.B) {
	var x index
	var f filer
	defer x.reset()
	x.presize(b.N)
	const run = 150_000
	sids, locs := make([]uint64, 0, run), make([]uint32, 0, run)
	b.ResetTimer()
	for i := range b.N {
		sids, locs = append(sids, mix(uint64(i+1)*0x9e3779b97f4a7c15)|1), append(locs, uint32(i))
		if len(sids) == cap(sids) || i == b.N-1 {
			x.fileAll(&f, sids, locs)
			sids, locs = sids[:0], locs[:0]
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(x.bytes())/float64(b.N), "B/job")
}

// fileLog reads payloads from one file of the OS, as the journal does: a
// pread and a fresh slice each, or (window) a span at a time.
type fileLog struct {
	f      *os.File
	window bool
}

func (l fileLog) ReadPayload(seg uint16, off int64, n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := l.f.ReadAt(b, off)
	return b, err
}

type fileSpans struct{ fileLog }

func (l fileSpans) ReadSpan(seg uint16, off int64, dst []byte) (int, error) {
	n, err := l.f.ReadAt(dst, off)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// payloadLog writes a log file of n 256-byte payloads among other records
// (as many bytes again), closed with the benchmark, and returns their
// locators.
func payloadLog(b *testing.B, n int) (*os.File, []Loc) {
	f, err := os.Create(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	w := bufio.NewWriter(f)
	locs := make([]Loc, n)
	p, filler := bytes.Repeat([]byte{'p'}, 256), make([]byte, 256)
	at := int64(0)
	for i := range locs {
		w.Write(filler)
		w.Write(p)
		locs[i] = Loc{File: 1, Off: at + 256, N: 256}
		at += 512
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return f, locs
}

// BenchmarkSeal writes a frozen bucket of 200k jobs of 256-byte payloads,
// which lie in a log file among other records (as many bytes again), as
// a run in a file: each payload read alone (pread) or through a window of
// the log.
// go test ./bucket -run XXX -bench Seal -benchtime 5x
func BenchmarkSeal(b *testing.B) {
	const n = 200_000
	f, locs := payloadLog(b, n)
	for _, mode := range []string{"pread", "window"} {
		b.Run(mode, func(b *testing.B) {
			var log LogReader = fileLog{f: f}
			if mode == "window" {
				log = fileSpans{fileLog{f: f}}
			}
			for range b.N {
				b.StopTimer()
				s, err := Open(Options{FS: aof.OS, Path: filepath.Join(b.TempDir(), "delayd.aof"), Log: log})
				if err != nil {
					b.Fatal(err)
				}
				for i, loc := range locs {
					if err := s.Add(int64(1_000_000+i%5000), uint64(i+1), uint64(i+1), "q", nil, loc); err != nil {
						b.Fatal(err)
					}
				}
				cp := s.Checkpoint(Pos{Seg: 1})
				b.StartTimer()
				for _, fz := range cp.Frozen() {
					r, err := s.WriteFrozen(fz, nil)
					if err != nil {
						b.Fatal(err)
					}
					s.Install(fz, r)
				}
				b.StopTimer()
				s.Close()
			}
		})
	}
}

// BenchmarkLoadFromRun loads, in rounds of a 40th of its span, the 200k
// jobs of a run (256-byte payloads, dues in random add order, as a seal
// leaves a bucket whose jobs came with delays from 1 to 10 s), and reports
// the time a job: what the loader pays for a job that came back from disk.
// go test ./bucket -run XXX -bench LoadFromRun -benchtime 5x
func BenchmarkLoadFromRun(b *testing.B) {
	const n = 200_000
	f, locs := payloadLog(b, n)
	log := fileSpans{fileLog{f: f}}
	for range b.N {
		b.StopTimer()
		s, err := Open(Options{FS: aof.OS, Path: filepath.Join(b.TempDir(), "delayd.aof"), Log: log})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			due := int64(1_000_000 + mix(uint64(i))%40_000)
			if err := s.Add(due, uint64(i+1), uint64(i+1), "q", []byte("head"), locs[i]); err != nil {
				b.Fatal(err)
			}
		}
		cp := s.Checkpoint(Pos{Seg: 1})
		for _, fz := range cp.Frozen() {
			r, err := s.WriteFrozen(fz, nil)
			if err != nil {
				b.Fatal(err)
			}
			s.Install(fz, r)
		}
		b.StartTimer()
		got := 0
		for until := int64(1_000_000); got < n; until += 1000 {
			p := s.Due(until, 1<<20)
			js, err := s.ReadDue(p, nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := range js {
				if s.Take(&js[i]) {
					got++
				}
			}
			s.Settle(p)
		}
		b.StopTimer()
		s.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
}
