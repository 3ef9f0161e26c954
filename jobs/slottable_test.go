package jobs

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// tableModel drives a slotTable against a Go map, with keys stored beside
// the table as the engine stores them in its jobs.
type tableModel struct {
	t    slotTable
	keys map[uint32]uint64 // slot -> key, what the "job" says
}

func newTableModel() *tableModel {
	m := &tableModel{keys: make(map[uint32]uint64)}
	m.t.key = func(s uint32) uint64 {
		k, ok := m.keys[s]
		if !ok {
			panic("the table asked for the key of a slot it does not hold")
		}
		return k
	}
	return m
}

// hash is deliberately weak (few distinct values) in some runs, so that
// runs of equal homes and equal hashes with different keys are exercised.
func (m *tableModel) find(k uint64, hash func(uint64) uint64) (uint32, bool) {
	return m.t.find(hash(k), func(s uint32) bool { return m.keys[s] == k })
}

func TestSlotTableAgainstMap(t *testing.T) {
	hashes := map[string]func(uint64) uint64{
		"identity":   func(k uint64) uint64 { return k },
		"sequential": func(k uint64) uint64 { return k << 16 },
		"collide":    func(k uint64) uint64 { return k % 7 },
	}
	for _, grouped := range []bool{false, true} {
		for name, hash := range hashes {
			if grouped {
				name += "/grouped"
			}
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, uint64(len(name))))
				m := newTableModel()
				m.t.grouped = grouped
				m.t.key = func(s uint32) uint64 { return hash(m.keys[s]) }
				byKey := map[uint64]uint32{}
				var nextSlot uint32
				var freeSlots []uint32
				ops := 200_000
				if strings.HasPrefix(name, "collide") {
					ops = 20_000 // every run is long: quadratic
				}
				sequential := grouped && rng.IntN(2) == 0 // server ids: each key above the last
				var lastKey uint64
				for i := range ops {
					// Phases: grow, churn, shrink, so rebuilds run under every mix.
					insertBias := []int{80, 50, 20}[(i/(ops/6))%3]
					switch r := rng.IntN(100); {
					case r < insertBias:
						k := rng.Uint64N(1 << 40)
						if sequential {
							// a millisecond above a counter, some ms skipped
							lastKey = max(lastKey+1, lastKey&^0xffff+rng.Uint64N(3)<<16)
							k = lastKey
						}
						if _, dup := byKey[k]; dup {
							continue
						}
						var s uint32
						if n := len(freeSlots); n > 0 && rng.IntN(2) == 0 {
							s, freeSlots = freeSlots[n-1], freeSlots[:n-1]
						} else {
							s = nextSlot
							nextSlot++
						}
						m.keys[s] = k
						byKey[k] = s
						m.t.insert(s, hash(k))
					case r < 95 && len(byKey) > 0:
						// Delete a random present key (map order is random enough).
						for k, s := range byKey {
							if !m.t.remove(s, hash(k)) {
								t.Fatalf("op %d: remove(%d) of a present slot reported absent", i, s)
							}
							delete(byKey, k)
							delete(m.keys, s)
							freeSlots = append(freeSlots, s)
							break
						}
					default:
						k := rng.Uint64N(1 << 40)
						if _, ok := m.find(k, hash); ok != (byKey[k] != 0 || hasKey(byKey, k)) {
							t.Fatalf("op %d: find(%d) = %v, model says %v", i, k, ok, hasKey(byKey, k))
						}
					}
					if m.t.len() != len(byKey) {
						t.Fatalf("op %d: len %d, model %d", i, m.t.len(), len(byKey))
					}
					if i%997 == 0 {
						for k, s := range byKey {
							if got, ok := m.find(k, hash); !ok || got != s {
								t.Fatalf("op %d: find(%d) = %d, %v; want %d", i, k, got, ok, s)
							}
						}
					}
				}
				if m.t.remove(nextSlot+5, 12345) {
					t.Fatal("remove of an absent slot reported present")
				}
				m.t.release()
				if m.t.len() != 0 || m.t.bytes() != 0 || m.t.key == nil || m.t.grouped != grouped {
					t.Fatalf("after release: len %d, bytes %d, key kept %v, grouped kept %v", m.t.len(), m.t.bytes(), m.t.key != nil, m.t.grouped == grouped)
				}
			})
		}
	}
}

func hasKey(m map[uint64]uint32, k uint64) bool { _, ok := m[k]; return ok }

// A rebuild moves cells a few at a time: while it runs, both tables hold
// entries, and every one stays findable.
func TestSlotTableRebuildIsIncremental(t *testing.T) {
	m := newTableModel()
	sawBoth := false
	for s := range uint32(100_000) {
		m.keys[s] = uint64(s) * 3
		m.t.insert(s, uint64(s)*3)
		if m.t.old != nil && m.t.oldN > 0 && m.t.n > 0 {
			sawBoth = true
			for _, probe := range []uint32{0, s / 2, s} {
				if got, ok := m.find(uint64(probe)*3, func(k uint64) uint64 { return k }); !ok || got != probe {
					t.Fatalf("during a rebuild at %d: find(%d) = %d, %v", s, probe, got, ok)
				}
			}
		}
		if m.t.old != nil && len(m.t.old) > len(m.t.cells) {
			t.Fatal("a rebuild shrank the table")
		}
	}
	if !sawBoth {
		t.Fatal("no insert ran while a rebuild was under way")
	}
	if load := float64(m.t.len()) / float64(len(m.t.cells)+len(m.t.old)); load > 0.75 {
		t.Fatalf("load %.2f over 3/4", load)
	}
}

// Deleting everything leaves tombstones; inserting again must clear them by
// rebuilding, not grow the table without end.
func TestSlotTableTombstonesDoNotGrowIt(t *testing.T) {
	m := newTableModel()
	for round := range 50 {
		for s := range uint32(1000) {
			k := uint64(round)<<32 | uint64(s)
			m.keys[s] = k
			m.t.insert(s, k)
		}
		for s := range uint32(1000) {
			if !m.t.remove(s, m.keys[s]) {
				t.Fatalf("round %d: remove(%d) missed", round, s)
			}
			delete(m.keys, s)
		}
	}
	if size := len(m.t.cells) + len(m.t.old); size > 4096 {
		t.Fatalf("table of %d cells for at most 1000 entries", size)
	}
}

func TestSlotTableReserve(t *testing.T) {
	m := newTableModel()
	m.t.reserve(10_000)
	size := len(m.t.cells)
	for s := range uint32(10_000) {
		m.keys[s] = uint64(s)
		m.t.insert(s, uint64(s))
	}
	if len(m.t.cells) != size || m.t.old != nil {
		t.Fatalf("inserting the reserved count rebuilt: %d cells, then %d", size, len(m.t.cells))
	}
	m.t.reserve(100) // smaller: nothing to do
	if len(m.t.cells) != size {
		t.Fatal("a smaller reserve changed the table")
	}
	m.t.reserve(50_000) // with entries: moved, all still there
	for s := range uint32(10_000) {
		if got, ok := m.find(uint64(s), func(k uint64) uint64 { return k }); !ok || got != s {
			t.Fatalf("after reserve: find(%d) = %d, %v", s, got, ok)
		}
	}
	m.t.release()
}

// BenchmarkSlotTableFill files 10M server-id-like keys, as a 10M-job fill
// does, and reports the longest single insert: a rebuild moves 8 cells per
// insert, so no insert pays for the whole table (a Go map's growth is
// incremental too; a plain rehash of 10M entries would be one long pause).
func BenchmarkSlotTableFill(b *testing.B) {
	const n = 10_000_000
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(1_800_000_000_000+i/64)<<16 | uint64(i%64)
	}
	for range b.N {
		var t slotTable
		t.key = func(s uint32) uint64 { return keys[s] }
		var worst time.Duration
		start := time.Now()
		for s := range uint32(n) {
			t0 := time.Now()
			t.insert(s, keys[s])
			if d := time.Since(t0); d > worst {
				worst = d
			}
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "ns/insert")
		b.ReportMetric(float64(worst.Microseconds()), "worst-µs")
		b.ReportMetric(float64(t.bytes())/n, "B/entry")
		t.release()
	}
}

// BenchmarkSlotTableSeq files server-id-like keys (64 a millisecond) into a
// table of 1M to 4M entries and removes them oldest first, as RPUSH and
// LPOP on one list do: the grouped table (server ids) against the plain one.
func BenchmarkSlotTableSeq(b *testing.B) {
	for _, grouped := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "grouped"}[grouped], func(b *testing.B) {
			const live = 2_000_000
			var t slotTable
			t.grouped = grouped
			keyOf := func(i uint32) uint64 { return (1_800_000_000_000+uint64(i/64))<<16 | uint64(i%64) }
			t.key = func(s uint32) uint64 { return keyOf(s) }
			defer t.release()
			i := uint32(0)
			for ; i < live; i++ {
				t.insert(i, keyOf(i))
			}
			b.ResetTimer()
			for range b.N {
				t.insert(i, keyOf(i))
				d := i - live
				if !t.remove(d, keyOf(d)) {
					b.Fatal("missed")
				}
				i++
			}
		})
	}
}

// A small table that fills with tombstones (a FIFO: insert, delete, over
// and over) clears them in place: no new mapping every few inserts.
func TestSlotTableSmallRehashesInPlace(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		m := newTableModel()
		m.t.grouped = grouped
		m.keys[0] = 1 << 16
		m.t.insert(0, 1<<16) // one job stays
		first := &m.t.cells[0]
		for i := uint64(1); i < 10_000; i++ {
			s := uint32(i%2 + 1)
			m.keys[s] = 1<<16 + i
			m.t.insert(s, m.keys[s])
			if !m.t.remove(s, m.keys[s]) {
				t.Fatalf("remove %d missed", i)
			}
			if &m.t.cells[0] != first || m.t.old != nil {
				t.Fatalf("grouped %v: insert %d mapped a new table", grouped, i)
			}
		}
		if got, ok := m.find(1<<16, func(k uint64) uint64 { return k }); !ok || got != 0 {
			t.Fatalf("the job that stayed: %d, %v", got, ok)
		}
		m.t.release()
	}
}

// TestSlotTableGrowsByDoubling: growth doubles the table. Sizing the new
// table for one entry more than the trigger's count quadrupled it, which at
// 1M server ids was 16 MB of index instead of 8.
func TestSlotTableGrowsByDoubling(t *testing.T) {
	m := newTableModel()
	for s := range uint32(1 << 16) {
		m.keys[s] = uint64(s)
		m.t.insert(s, uint64(s))
		if size := len(m.t.cells); size > 16 && int(s+1)*8 < size*3 {
			t.Fatalf("%d entries in %d cells: a load under 3/8 after growth", s+1, size)
		}
	}
	m.t.finish()
	if got, want := len(m.t.cells), 1<<17; got != want {
		t.Fatalf("2^16 entries in %d cells, want %d", got, want)
	}
}
