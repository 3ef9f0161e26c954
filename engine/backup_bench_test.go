package engine

import (
	"fmt"
	"testing"
)

// BenchmarkBackupCapture: the lock hold of a backup's capture of 1M delayed
// jobs (what writes wait for).
func BenchmarkBackupCapture(b *testing.B) {
	e, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for i := range 1_000_000 {
		if _, err := e.Add(AddArgs{Queue: []byte(fmt.Sprint("q", i%10)), Delay: 3_600_000 + int64(i), Payload: []byte(fmt.Sprint("payload-", i))}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		c, err := e.Backup(96)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(c.Held.Milliseconds()), "held-ms")
	}
}
