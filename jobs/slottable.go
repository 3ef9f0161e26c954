package jobs

import (
	"math/bits"

	"github.com/delayd/delayd/offheap"
)

// slotTable is an open-addressing hash table of job slots: each cell holds
// slot+1 (0: empty, tombEntry: deleted), and nothing else. The key of an
// entry is not stored: the table asks its owner for the hash of a slot when
// it must rehash, and lookups compare candidates against the job itself.
//
// Why not a Go map: a map[uint64]uint32 spends about 16 bytes a slot plus
// control bytes and growth slack, 24 to 36 bytes a job, on the Go heap,
// where GOGC headroom doubles it again. Four bytes a cell at a load of at
// most 3/4, mapped outside the heap (package offheap), is 5 to 11 bytes a job.
//
// Probing is linear from the top bits of a mixed hash, which keeps a probe
// run within a cache line or two of cells. Deletion writes a tombstone (no job is read, unlike a backward shift,
// which must rehash every entry after the hole); tombstones count toward the
// load and are dropped by the next rebuild.
//
// A rebuild (growth, or clearing tombstones) never stops the world: it
// allocates the new table (mapped: O(1), pages are backed as they are
// written) and moves the old one's cells a few at a time, on each insert and
// delete, as Redis's dict rehashes incrementally. Meanwhile an entry lives
// in exactly one of the two tables, and lookups probe both. Moved cells
// become tombstones in the old table, so its probe runs stay intact for the
// entries not yet moved.
type slotTable struct {
	// key gives the hash of the key a slot is filed under (the Table reads
	// it from the job): it must be the hash the slot was inserted with.
	key func(s uint32) uint64

	// grouped files keys that rise by one (server ids) in runs of
	// 1<<groupBits adjacent cells: see groupHome.
	grouped bool

	cells []uint32 // len 0 or a power of two
	shift uint8    // 64 - log2(len(cells)): a hash's top bits pick the home cell
	n     int      // live entries in cells
	tombs int      // tombstones in cells

	old    []uint32 // the table being moved into cells; nil when not rebuilding
	oldSh  uint8
	oldN   int // live entries left in old
	oldPos int // next cell of old to move

	spare []uint32 // rehashInPlace's buffer, kept between calls

	// lastKey and lastAt (its cell+1; 0: none) are where the last put
	// went, for the next key of the same group (put): valid until cells
	// is replaced or cleared.
	lastKey uint64
	lastAt  uint32
}

const (
	tombEntry    = ^uint32(0) // slot 2^32-2 would read as one: the slab never gets there
	minTableBits = groupBits
	// moveStep is the old cells moved per insert or delete while rebuilding.
	// A rebuild starts with the new table at most 3/8 full and never
	// smaller than the old one, so at least 3/8 of its size in inserts must
	// come before it reaches 3/4; moving 4 old cells per insert finishes
	// the old table well before that.
	moveStep = 8
)

// home is the first cell of h's probe run in a table of 1<<(64-shift) cells:
// the top bits of a full 64-bit mix (murmur3's finalizer). Server ids are
// structured (a millisecond above a 16-bit counter); a bare Fibonacci
// multiply left long runs of them for linear probing.
func home(h uint64, shift uint8) uint32 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return uint32(h >> (shift & 63))
}

// groupBits: a grouped table places keys that differ only in their low
// groupBits bits in one aligned run of 1<<groupBits cells (64 bytes, a cache
// line of the mapped table, whose start is page aligned).
const groupBits = 4

// groupHome is home for a grouped table: the key's high bits pick an aligned
// group of cells at random, as home does, and its low bits the cell within
// it. Server ids are made in order (id.go: a millisecond above a counter),
// so consecutive ids (a pipeline of RPUSHes, a replay, a FIFO's pops) write
// one cache line per 16 ids instead of missing the cache on each; ids of
// one millisecond past the 16th go to another group, chosen at random, so
// the table stays as evenly loaded as a plain hash one at the level of
// groups. This is bucketized linear probing with buckets of a cache line:
// a collision spills into the next cells, and probe runs, counted in cache
// lines, stay about as short as home's runs are in cells. Tables below one
// group cannot be: minTableBits is groupBits.
func groupHome(h uint64, shift uint8) uint32 {
	g := h >> groupBits
	g ^= g >> 33
	g *= 0xff51afd7ed558ccd
	g ^= g >> 33
	g *= 0xc4ceb9fe1a85ec53
	g ^= g >> 33
	return uint32(g>>(uint(shift)+groupBits))<<groupBits | uint32(h&(1<<groupBits-1))
}

func (t *slotTable) homeOf(h uint64, shift uint8) uint32 {
	if t.grouped {
		return groupHome(h, shift)
	}
	return home(h, shift)
}

// len returns the live entries. O(1).
func (t *slotTable) len() int { return t.n + t.oldN }

// bytes is the memory the table holds.
func (t *slotTable) bytes() int64 { return int64(len(t.cells)+len(t.old)) * 4 }

// find returns the slot filed under h for which eq holds. eq reads the job
// of each candidate with the same home run, so it should be cheap. O(1)
// expected: at a load of 3/4, a hit probes 2.5 cells on average.
func (t *slotTable) find(h uint64, eq func(s uint32) bool) (uint32, bool) {
	if len(t.cells) > 0 {
		if s, ok := probe(t.cells, t.homeOf(h, t.shift), eq); ok {
			return s, true
		}
	}
	if t.old != nil {
		return probe(t.old, t.homeOf(h, t.oldSh), eq)
	}
	return 0, false
}

// probe searches the run of cells from i, which must be non-empty.
func probe(cells []uint32, i uint32, eq func(s uint32) bool) (uint32, bool) {
	mask := uint32(len(cells) - 1)
	for ; ; i = (i + 1) & mask {
		c := cells[i]
		if c == 0 {
			return 0, false
		}
		if c != tombEntry && eq(c-1) {
			return c - 1, true
		}
	}
}

// insert files slot s under h; s must not be in the table. O(1) amortized,
// plus up to moveStep rehashes while a rebuild runs.
func (t *slotTable) insert(s uint32, h uint64) {
	if t.old != nil {
		t.move()
	}
	if (t.n+t.tombs+1)*4 > len(t.cells)*3 {
		if t.old != nil {
			t.finish() // only when inserts outran the moves
		}
		// len, not len+1: at the trigger len is 3/4 of the table, exactly
		// 3/8 of twice its size, and one entry more made tableSize pick four
		// times the size (1M jobs held 4M cells, 16 MB, where 2M suffice).
		t.rebuild(t.len())
	}
	t.put(s, h)
}

// put places s in its run's first free cell (empty or tombstone).
//
// In a grouped table, the next key of the group of the last put starts
// after the last put's cell instead of at its own home. Server ids come in
// order, 16 to a group, and a group's home is taken whole or not at all,
// so at the loads the table runs at, a group's run spills over several
// full groups: a test that filed 2M ids as the engine makes them measured
// 46 cells probed per put, the same run scanned again for each of the 16
// ids. Starting after the last put is sound: the key's home is the last
// key's home plus one, every cell from there to the last put's was taken
// then, and no cell goes back to empty (what lookup's probe stops at)
// until cells is replaced or cleared, which forgets lastAt. A tombstone
// skipped there only lengthens a later probe by a cell.
func (t *slotTable) put(s uint32, h uint64) {
	mask := uint32(len(t.cells) - 1)
	i := t.homeOf(h, t.shift)
	if t.grouped && t.lastAt != 0 && h == t.lastKey+1 && h>>groupBits == t.lastKey>>groupBits {
		i = t.lastAt & mask // the cell after the last put's
	}
	for ; ; i = (i + 1) & mask {
		switch t.cells[i] {
		case 0:
		case tombEntry:
			t.tombs--
		default:
			continue
		}
		t.cells[i] = s + 1
		t.n++
		t.lastKey, t.lastAt = h, i+1
		return
	}
}

// remove unfiles slot s, filed under h, and reports whether it was there.
// Cells are compared with s directly: no job is read. O(1) expected.
func (t *slotTable) remove(s uint32, h uint64) bool {
	found := false
	if len(t.cells) > 0 && unfile(t.cells, t.homeOf(h, t.shift), s) {
		t.n--
		t.tombs++
		found = true
	} else if t.old != nil && unfile(t.old, t.homeOf(h, t.oldSh), s) {
		t.oldN--
		found = true
	}
	if t.old != nil {
		t.move()
	}
	return found
}

// unfile clears s from the run of cells from i, which must be non-empty.
func unfile(cells []uint32, i uint32, s uint32) bool {
	mask := uint32(len(cells) - 1)
	for ; ; i = (i + 1) & mask {
		switch cells[i] {
		case 0:
			return false
		case s + 1:
			cells[i] = tombEntry
			return true
		}
	}
}

// rebuild starts moving every entry into a new table sized for need
// entries at a load of at most 3/8, and never smaller than the current one.
// The caller has finished any earlier rebuild.
func (t *slotTable) rebuild(need int) {
	t.rebuildTo(max(tableSize(need, 3, 8), len(t.cells)))
}

// tableSize is the smallest table (a power of two) that holds n entries at
// a load of at most num/den.
func tableSize(n, num, den int) int {
	size := 1 << minTableBits
	for size*num < n*den {
		size <<= 1
	}
	return size
}

func (t *slotTable) rebuildTo(size int) {
	t.lastAt = 0 // cells is replaced, or cleared
	if size == len(t.cells) && size <= inPlaceCells {
		t.rehashInPlace()
		return
	}
	sh := uint8(64 - bits.TrailingZeros(uint(size)))
	if t.n == 0 {
		// Nothing to move: swap the tables outright.
		offheap.Free(t.cells)
		t.cells, t.shift, t.tombs = offheap.Make[uint32](size), sh, 0
		populateSoon(t.cells)
		return
	}
	t.old, t.oldSh, t.oldN, t.oldPos = t.cells, t.shift, t.n, 0
	t.cells, t.shift, t.n, t.tombs = offheap.Make[uint32](size), sh, 0, 0
	populateSoon(t.cells)
}

// populateSoon maps in the pages of a new table on another goroutine, off
// the engine's lock. The moves and inserts that fill a new table write its
// cells all over it: a profile of a pipelined RPUSH fill had a page fault
// per 4 KiB of each new table as most of the index's cost (in a VM a fault
// costs about 20 times what populating the same page in bulk does). Every
// page of the table gets written anyway once it holds its 3/8 share of
// entries, so this maps nothing that would have stayed unmapped. It is
// safe on memory being written (offheap.Populate changes no contents) and
// on a table freed meanwhile (the call then fails, or maps in another
// block's zero pages early). Tables under 64 KiB fault in as written.
func populateSoon(cells []uint32) {
	if len(cells) >= 1<<14 {
		go offheap.Populate(cells)
	}
}

// inPlaceCells is the largest table that clears its tombstones in place,
// at once, instead of moving into a freshly mapped table: a fresh mapping
// costs a system call and a page fault per 4 KiB written, which a small
// table pays every few inserts when a FIFO's deletes fill it with
// tombstones (a grouped table files consecutive ids in fresh cells, so its
// inserts rarely reuse a tombstone). 4096 cells: 16 KiB to rehash, after
// at least 3/8 of 4096 inserts.
const inPlaceCells = 4096

// rehashInPlace drops every tombstone: the live slots are set aside, the
// cells cleared and the slots filed again. O(cells); no rebuild is under way.
func (t *slotTable) rehashInPlace() {
	live := t.spare[:0]
	for _, c := range t.cells {
		if c != 0 && c != tombEntry {
			live = append(live, c-1)
		}
	}
	clear(t.cells)
	t.n, t.tombs = 0, 0
	for _, s := range live {
		t.put(s, t.key(s))
	}
	t.spare = live[:0]
}

// move moves up to moveStep cells of the old table into the new one.
func (t *slotTable) move() {
	end := min(t.oldPos+moveStep, len(t.old))
	for ; t.oldPos < end; t.oldPos++ {
		c := t.old[t.oldPos]
		if c == 0 || c == tombEntry {
			continue
		}
		t.old[t.oldPos] = tombEntry // keeps the runs of cells not yet moved
		t.oldN--
		t.put(c-1, t.key(c-1))
	}
	if t.oldPos == len(t.old) || t.oldN == 0 {
		offheap.Free(t.old)
		t.old, t.oldN, t.oldPos = nil, 0, 0
	}
}

// finish moves what is left of the old table at once.
func (t *slotTable) finish() {
	for t.old != nil {
		t.move()
	}
}

// reserve makes room for n entries in all, so that filing them rebuilds
// nothing (replay calls it with an estimate of the log's job count). The
// table is sized for n at the most load it allows (3/4): every cell of a
// hash table gets written, so slack here is resident memory. It finishes
// any rebuild under way first. O(entries) if the table holds any.
func (t *slotTable) reserve(n int) {
	if n*4 <= len(t.cells)*3 {
		return // room already
	}
	t.finish()
	t.rebuildTo(max(tableSize(max(n, t.len()), 3, 4), len(t.cells)))
	t.finish()
}

// release unmaps both tables and empties the table. O(1).
func (t *slotTable) release() {
	offheap.Free(t.cells)
	offheap.Free(t.old)
	*t = slotTable{key: t.key, grouped: t.grouped}
}
