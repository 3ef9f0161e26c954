package commands

import (
	"fmt"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayd/delayd/engine"
)

// --maxmemory: while the Go heap's live objects plus the job memory mapped
// outside it (INFO's used_memory, engine.MappedBytes) are above it, commands that add jobs are refused with Redis's OOM error;
// everything that takes jobs out (pops, acks, cancels, DEL) and every read
// still works, so a full server can be drained. Firings of DELAY.SCHEDULE
// are not refused: a schedule was accepted once, and its firings are its
// promise (docs/decisions/faults.md).

const errOOM = "OOM command not allowed when used memory > 'maxmemory'."

// denyOOM names the commands that add jobs: Redis's denyoom flag.
var denyOOM = map[string]bool{
	"delay.add": true, "delay.addat": true, "rpush": true, "lpush": true, "delay.schedule": true, "cron": true,
	"delay.import": true,
}

// memSampleEvery bounds how stale the heap figure may be. Reading it is
// cheap (runtime/metrics stops no goroutine), but not an add's cost.
const memSampleEvery = 50 * time.Millisecond

// memGauge caches the heap's live bytes for memSampleEvery.
type memGauge struct {
	at   atomic.Int64 // unix ns of the last sample
	used atomic.Uint64
	mu   sync.Mutex
}

func (g *memGauge) get() uint64 {
	now := time.Now().UnixNano()
	if now-g.at.Load() < int64(memSampleEvery) {
		return g.used.Load()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now-g.at.Load() >= int64(memSampleEvery) {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 {
			g.used.Store(s[0].Value.Uint64() + uint64(engine.MappedBytes()))
		}
		g.at.Store(now)
	}
	return g.used.Load()
}

// overMaxMemory says whether cmd must be refused for --maxmemory.
func (d *Dispatcher) overMaxMemory(cmd *Command) bool {
	return d.opts.MaxMemory > 0 && denyOOM[cmd.Name] && d.mem.get() > uint64(d.opts.MaxMemory)
}

// ParseMemory parses a memory size as Redis's config does: a number of
// bytes with an optional unit, k=1000, kb=1024, m, mb, g, gb (any case).
func ParseMemory(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || (n > 0 && mult > 1<<62/n) {
		return 0, fmt.Errorf("%q is not a memory size (bytes, or with k, kb, m, mb, g, gb)", s)
	}
	return n * mult, nil
}
