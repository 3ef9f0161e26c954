package wheel

import (
	"math"
	"math/bits"
	"runtime"

	"github.com/delayd/delayd/offheap"
)

const (
	slotBits  = 6
	wheelSize = 1 << slotBits // buckets per coarse level (1 and up); a power of two so / and % are shifts and masks
	slotMask  = wheelSize - 1

	// Level 0 is wider than the others: 1,024 one-tick buckets. With 1 ms
	// ticks a job due within a second goes straight to the bucket it fires
	// from and never moves; with 64 buckets every delay from 64 ms on was
	// added to level 1 and moved down once (docs/decisions/wheel-levels.md).
	// Its occupancy is two-level: a word per 64 buckets (fine) and a bit
	// per word (fineSum).
	fineBits  = 10
	fineSize  = 1 << fineBits
	fineMask  = fineSize - 1
	fineWords = fineSize / 64

	// maxLevels bounds the hierarchy. Positions (due times in ticks) are
	// kept within ±2^62, so two of them differ by less than 2^63 and level
	// 9, whose buckets span 2^58 ticks, always has room: 2^10 * 64^9 = 2^64.
	maxLevels = 10

	// endTag marks a bucket link that is not a handle: the head's prev and
	// the tail's next hold endTag|loc, where loc is 1 + level<<slotBits +
	// slot, the bucket. Handles are below endTag, so one bit tells the two
	// apart, and the bucket is known at both ends of its list, which is all
	// Remove needs: a middle node's neighbours are handles.
	endTag = 1 << 31

	// arrLevels is the number of levels, from 0, whose buckets are arrays
	// (abucket), not lists. A node there has next = arrTag|level (list
	// locs stay below 1<<30) and prev = its index in its array, plus one,
	// with movedBit set for the array of entries moved down.
	arrLevels = 2
	arrTag    = endTag | 1<<30
	movedBit  = 1 << 30
	// gone marks a removed entry in a bucket's array.
	gone = ^uint32(0)

	// MaxHandle is the largest handle Add takes: handles at or above
	// endTag would read as end marks.
	MaxHandle = endTag - 1

	// maxTime and minTime bound the times the wheel computes with. Times
	// beyond them are clamped, which keeps every tick computation, bucket
	// start and deadline far from overflow. maxTime is about 146 million
	// years after the Unix epoch in milliseconds.
	maxTime = math.MaxInt64 / 2
	minTime = -maxTime

	// maxTick keeps maxTime+maxTick (the largest clamped "now") from
	// overflowing and leaves room for deadline arithmetic. 2^32 ms is
	// about 49 days per tick, far coarser than any sensible use.
	maxTick = 1 << 32
)

// node is one schedulable handle: 16 bytes (8 due, 4 next, 4 prev). It
// holds no pointers, so its pages are memory the garbage collector never
// walks; a map or a per-job *struct would make every GC cycle trace every
// pending job.
//
// It was 32 bytes (a seq and a loc besides, and padding), a third of the
// engine's memory per pending job. The bucket (loc) now rides in the end
// marks of the list (endTag), and the tie-breaking seq is the owner's: a
// wheel made by NewOrdered asks the owner for it, which the engine can
// answer from the job record it keeps anyway; a wheel made by New keeps it
// in pages of its own (seqPages).
type node struct {
	due int64 // as given to Add; returned by Due and used for ordering
	// next and prev link the bucket list: handles, or endTag|loc at the
	// tail (next) and the head (prev). On an array level, next is
	// arrTag|level and prev the entry's place in its bucket's array. Both
	// are 0 while the handle is not scheduled (no list has the same handle
	// on both sides of a node, and end marks are never 0), so the slab
	// needs no other state.
	next uint32
	prev uint32
}

// linked reports whether n is in a bucket.
func (n *node) linked() bool { return n.next|n.prev != 0 }

// level is one ring of wheelSize buckets. Bucket lists are intrusive:
// head and tail hold handles and the links live in the nodes (levels
// below arrLevels keep at most occupied here: their buckets are arrays,
// Wheel.arr0 and arr1, and level 0's occupancy is Wheel.fine). head and
// tail of an empty bucket are stale; occupied is the source of truth,
// which saves initialising them and gives NextDeadline a find-first-set
// instead of a scan.
type level struct {
	occupied uint64 // bit s set iff bucket s is non-empty
	head     [wheelSize]uint32
	tail     [wheelSize]uint32
}

// abucket is a bucket of level 0 or 1 (arrLevels): its handles in arrays,
// in the order they came. On level 0 the entries moved down from coarser
// levels have their own array, walked first (see pushArr).
//
// Why arrays there: a bucket of those levels is walked whole, when it
// fires (level 0) or cascades (level 1). Through a list, each node was a
// cache miss that could not start before the last one ended: 98% of fire's
// time was the load of the next link, under spread delays. From an array,
// the nodes are fetched in parallel. Only the two finest levels: they
// hold at most 1 s and 65 s of jobs (with 1 ms ticks), so their arrays
// are not memory per pending job, which arrays on every level were
// (docs/decisions/wheel-levels.md). Coarser buckets are walked too, but each entry is
// walked there once per level, while its job waits minutes or more.
type abucket struct {
	mv, dr []uint32 // moved down (level 0 only), and the rest; gone for a removed entry
	live   int      // entries not removed
}

// Wheel is a hierarchical timing wheel. The zero value is not usable;
// call New. A Wheel is not safe for concurrent use: its owner serialises
// calls (see the package documentation).
type Wheel struct {
	tick  int64 // level-0 bucket width in ms, >= 1
	pow2  bool  // tick is a power of two: ms -> ticks is a shift, not a division
	shift uint8 // log2(tick) when pow2
	now   int64 // largest time passed to New or Advance
	// cur is the first tick that is not yet complete: floor((now+1)/tick).
	// Every scheduled handle sits at a tick position >= cur; one whose
	// position drops below cur has fired.
	cur    int64
	count  int
	levels []level // created on demand, never more than maxLevels
	// pages is the slab indexed by handle, in fixed-size pages: growing it
	// never copies (a doubling slice at 10M nodes would copy 320 MB in one
	// Add) and wastes at most one page. It never shrinks. Pages are mapped
	// outside the Go heap (a heap page counts as live heap, and the
	// collector lets the heap grow by as much again before it collects);
	// Free unmaps them, or a cleanup does once the wheel is garbage.
	pages [][]node
	cap   uint32 // handles below cap have a node
	// order gives the seq of a scheduled handle (NewOrdered); when nil,
	// seqPages keeps the seqs Add was given, paged as nodes are.
	order    func(h uint32) uint64
	seqPages [][]uint64
	// mapped lists the same pages for that cleanup, which may not reach
	// the wheel itself.
	mapped *mappedPages

	// passes[L] drains level L's next bucket ahead of its time (drain);
	// draining has bit L set while passes[L] is under way, so Remove can
	// keep its cursor valid.
	passes   [maxLevels]pass
	draining uint16
	// work counts entries visited by cascades and drains, for tests that
	// bound the work of one Advance.
	work    int
	keys    []sortKey          // fire's sort buffer, reused
	sorts   int                // buckets fire had to sort, for tests
	arr0    [fineSize]abucket  // level 0's buckets; fine and fineSum keep their occupancy
	arr1    [wheelSize]abucket // level 1's; levels[1].occupied keeps theirs
	fine    [fineWords]uint64  // bit s%64 of word s/64 set iff level-0 bucket s is non-empty
	fineSum uint16             // bit i set iff fine[i] != 0
	noDrain bool               // tests: cascade only at the bucket's start, as before draining
}

// pass is one walk over a coarse bucket that moves ahead of time the
// entries that already fit a finer level (see drain).
type pass struct {
	b   int64  // the bucket's index on its level
	sub int64  // clock position on the finer level when the last pass began; math.MinInt64 if none
	cur uint32 // next handle to look at; valid while the pass is under way
	idx int    // the same on an array level: the next index in the bucket's array
}

type mappedPages struct {
	pages [][]node
	seqs  [][]uint64
}

func (m *mappedPages) free() {
	for _, p := range m.pages {
		offheap.Free(p)
	}
	for _, p := range m.seqs {
		offheap.Free(p)
	}
	m.pages, m.seqs = nil, nil
}

// New returns an empty wheel whose level-0 tick is tick milliseconds and
// whose clock starts at now (milliseconds, any epoch; the engine passes
// Unix milliseconds). It panics if tick is outside [1, 2^32].
//
// Only level 0 is allocated (about 60 KB); coarser levels appear when
// a due time first needs them, as Kafka's overflow wheels do.
func New(tick int64, now int64) *Wheel { return NewOrdered(tick, now, nil) }

// NewOrdered is New for an owner that keeps each handle's seq itself:
// seq(h) must return, for as long as h is scheduled, the seq h was added
// with. The wheel then stores none (8 bytes a handle less) and calls seq
// only to order handles with equal due times, when they fire or when
// Earliest compares them. seq must not call the wheel. A nil seq is New.
func NewOrdered(tick int64, now int64, seq func(h uint32) uint64) *Wheel {
	if tick < 1 || tick > maxTick {
		panic("wheel: tick must be in [1, 2^32] milliseconds")
	}
	w := &Wheel{tick: tick, now: now, order: seq, mapped: &mappedPages{}}
	runtime.AddCleanup(w, (*mappedPages).free, w.mapped)
	if tick&(tick-1) == 0 {
		w.pow2, w.shift = true, uint8(bits.TrailingZeros64(uint64(tick)))
	}
	w.cur = w.done(now)
	w.levels = make([]level, 1, maxLevels)
	w.resetPasses()
	return w
}

// resetPasses forgets every drain pass.
func (w *Wheel) resetPasses() {
	w.draining = 0
	for i := range w.passes {
		w.passes[i] = pass{sub: math.MinInt64}
	}
}

// Len returns the number of scheduled handles. O(1).
func (w *Wheel) Len() int { return w.count }

// Now returns the wheel's clock: the largest time passed to New or Advance. O(1).
func (w *Wheel) Now() int64 { return w.now }

// Contains reports whether h is scheduled. O(1).
func (w *Wheel) Contains(h uint32) bool {
	return h < w.cap && w.node(h).linked()
}

// Due returns the due time h was added with, while it is scheduled. O(1).
func (w *Wheel) Due(h uint32) (int64, bool) {
	if !w.Contains(h) {
		return 0, false
	}
	return w.node(h).due, true
}

// Seq returns the seq h was added with, while it is scheduled: the one Add
// stored, or for a wheel from NewOrdered what the owner's function says.
// O(1).
func (w *Wheel) Seq(h uint32) (uint64, bool) {
	if !w.Contains(h) {
		return 0, false
	}
	return w.seq(h), true
}

// LastDue returns the due time h was last added with, whether it is still
// scheduled, has fired or was removed (0 if it never was): what a caller
// needs to know about a handle that just fired. O(1).
func (w *Wheel) LastDue(h uint32) int64 {
	if h >= w.cap {
		return 0
	}
	return w.node(h).due
}

// Add schedules handle h to fire at due (ms). Among equal due times, lower
// seq fires first; the engine passes an add counter so equal due times
// keep add order. A wheel from NewOrdered does not keep seq: it must be
// what the owner's seq function returns for h until h fires or is removed.
//
// Add returns false and schedules nothing if due <= w.Now(): the job is
// already due and the caller treats it as ready now. (For a due time
// beyond ±math.MaxInt64/2, which the wheel clamps, Add may also return
// false once the clock has passed the clamped time.)
//
// It panics if h is already scheduled (Remove it first) or above MaxHandle
// (2^31-1; larger values mark list ends).
//
// Cost: O(1), a few shifts and two link writes; no allocation once the
// slab covers h. The first use of a handle beyond the slab adds pages (O(1)
// per page, nothing copied; the caller picks dense handles, so the slab stays
// proportional to the number of jobs).
func (w *Wheel) Add(h uint32, due int64, seq uint64) bool {
	if due <= w.now {
		return false
	}
	if h >= w.cap {
		w.grow(h)
	}
	n := w.node(h)
	if n.linked() {
		panic("wheel: Add of a handle that is already scheduled")
	}
	u := w.pos(due)
	if u < w.cur {
		// Only reachable outside the documented time range, where clamping
		// can put a future due time into a tick that has already completed.
		return false
	}
	n.due = due
	if w.order == nil {
		w.seqPages[h>>nodePageBits][h&(nodePage-1)] = seq
	}
	lv := w.levelOf(u)
	if lv >= uint(len(w.levels)) {
		w.addLevels(lv)
	}
	if slot := slotAt(u, lv); lv < arrLevels {
		w.pushArr(h, n, lv, slot, 0)
	} else {
		w.push(h, n, lv, slot)
	}
	w.count++
	return true
}

// Remove unschedules h and reports whether it was scheduled. O(1): the
// node knows its bucket and the list is doubly linked, so nothing is
// searched (a plain heap would need its index tracked and O(log n) to
// repair; Kafka's TimerTaskList.remove is the same O(1) unlink).
func (w *Wheel) Remove(h uint32) bool {
	if h >= w.cap {
		return false
	}
	n := w.node(h)
	prev, next := n.prev, n.next // locals: the stores below may alias n
	if prev|next == 0 {
		return false
	}
	if next&arrTag == arrTag {
		w.removeArr(n, next, prev)
		n.next, n.prev = 0, 0
		w.count--
		return true
	}
	if w.draining != 0 {
		w.unhook(h, next)
	}
	// An end mark moves to the neighbour that becomes the new end, so the
	// mark's bucket stays known at both ends.
	if prev&endTag != 0 {
		l, slot := w.bucket(prev)
		if next&endTag != 0 {
			l.occupied &^= 1 << slot // h was alone
		} else {
			l.head[slot] = next
			w.node(next).prev = prev
		}
	} else {
		w.node(prev).next = next
		if next&endTag != 0 {
			l, slot := w.bucket(next)
			l.tail[slot] = prev
		} else {
			w.node(next).prev = prev
		}
	}
	n.next, n.prev = 0, 0
	w.count--
	return true
}

// bucket returns the level and slot an end mark names.
func (w *Wheel) bucket(mark uint32) (*level, uint32) {
	loc := mark&^endTag - 1
	return &w.levels[loc>>slotBits], loc & slotMask
}

// seq returns the seq h was added with; h must be scheduled, or have just
// fired (the engine's seq stays until it reuses the handle).
func (w *Wheel) seq(h uint32) uint64 {
	if w.order != nil {
		return w.order(h)
	}
	return w.seqPages[h>>nodePageBits][h&(nodePage-1)]
}

// NextDeadline returns the earliest time at which Advance may have work,
// and ok=false when the wheel is empty. The caller arms one timer for it
// and calls Advance when it expires.
//
// The deadline is always after Now() and never after the earliest fire:
// Advance(t) with t < deadline returns nothing. When the earliest work is
// a level-0 bucket the deadline is exactly that bucket's fire time. When
// it is a coarser bucket that must cascade, the deadline is the last
// millisecond of that bucket's first tick, the earliest moment any of its
// entries could fire; Advance at that time cascades it and may fire
// nothing, after which NextDeadline is later. Reporting the cascade one
// tick earlier, at the bucket's start as Kafka's DelayQueue does, would
// wake the caller for work that can never fire anything.
// While a coarse bucket is near or being drained (drain.go) the deadline
// is earlier still: the tick at which Advance will move its next slice.
//
// Cost: O(levels), one rotate and count-trailing-zeros per non-empty
// level; no bucket is scanned. (A cached minimum would be O(1) to read but
// goes stale on Remove and needs a scan to repair.)
func (w *Wheel) NextDeadline() (deadline int64, ok bool) {
	p, lv, ok := w.nextEvent()
	if !ok {
		return 0, false
	}
	k := p // a cascade at position p can first fire tick p
	if lv == 0 {
		k = p - 1 // a fire at position p completes tick p-1
	}
	deadline = k*w.tick + w.tick - 1
	if q, ok := w.nextDrain(); ok {
		// Advance at q*tick-1 moves the clock to position q.
		deadline = min(deadline, q*w.tick-1)
	}
	return deadline, true
}

// Advance moves the clock to now and appends to dst every handle that
// fires, ordered by (due, seq), and returns dst. A handle due at d fires in
// the first Advance whose now reaches the last millisecond of d's tick,
// floor(d/tick)*tick + tick - 1: never before d, never later than the end
// of its tick. Fired handles are no longer scheduled. The clock never goes
// backwards: if now <= Now(), Advance does nothing.
//
// Advance jumps from one non-empty bucket to the next in deadline order,
// never tick by tick, so an hour's jump over three pending jobs costs a
// handful of bucket visits, not 3.6M ticks, and an idle wheel does no
// work. Cost: O(levels) per visited bucket, plus O(1) per entry cascaded
// (each entry cascades at most once per level it starts above 0) and
// O(k log k) to order a fired bucket of k entries when they did not
// arrive in order. It allocates only when dst must grow.
func (w *Wheel) Advance(now int64, dst []uint32) []uint32 {
	if now <= w.now {
		return dst
	}
	w.now = now
	target := w.done(now)
	if w.count == 0 {
		w.cur = target
		return dst
	}
	for {
		p, lv, ok := w.nextEvent()
		if !ok || p > target {
			break
		}
		// Processing each event with the clock set to the event's own
		// position keeps the invariant that level L never holds a bucket
		// at or behind the clock, whatever the size of the jump.
		w.cur = p
		if lv == 0 {
			dst = w.fire(slotAt(p-1, 0), dst)
		} else {
			w.cascade(lv, int(slotAt(p, uint(lv))))
		}
	}
	w.cur = target
	if len(w.levels) > 1 && !w.noDrain {
		w.drain()
	}
	return dst
}

// done returns the number of completed ticks at time now: the first tick
// position that has not yet reached its last millisecond.
func (w *Wheel) done(now int64) int64 {
	now = min(max(now, minTime-w.tick), maxTime+w.tick)
	if w.pow2 {
		return (now + 1) >> (w.shift & 63)
	}
	q := now / w.tick
	r := now - q*w.tick
	if r < 0 { // Go truncates towards zero; times before the epoch need floor
		q--
		r += w.tick
	}
	if r == w.tick-1 {
		q++
	}
	return q
}

// grow extends the slab to cover h. New nodes are zero: not scheduled.
// Kept out of line: inlined, its growslice call gave Add a large frame
// and spills on every call.
//
//go:noinline
func (w *Wheel) grow(h uint32) {
	if h > MaxHandle {
		panic("wheel: handles above 2^31-1 are reserved")
	}
	for h >= w.cap {
		p := offheap.Make[node](nodePage) // zeroed: not scheduled
		offheap.Populate(p)               // one call, not a page fault per 4 KiB (Add reads, then writes, each new node)
		w.mapped.pages = append(w.mapped.pages, p)
		w.pages = append(w.pages, p)
		if w.order == nil {
			q := offheap.Make[uint64](nodePage)
			w.mapped.seqs = append(w.mapped.seqs, q)
			w.seqPages = append(w.seqPages, q)
		}
		w.cap += nodePage
	}
}

// Free unschedules every handle and gives the node pages back to the
// system now rather than when the wheel is garbage. The wheel stays usable,
// empty, its clock where it was. O(pages).
func (w *Wheel) Free() {
	w.mapped.free()
	w.pages, w.seqPages, w.cap, w.count = nil, nil, 0, 0
	w.levels = append(w.levels[:0], level{})
	w.arr0, w.arr1 = [fineSize]abucket{}, [wheelSize]abucket{}
	w.fine, w.fineSum = [fineWords]uint64{}, 0
	w.resetPasses()
}

const (
	nodePageBits = 14
	nodePage     = 1 << nodePageBits
)

// node returns the node of handle h, which must be below w.cap. O(1).
func (w *Wheel) node(h uint32) *node { return &w.pages[h>>nodePageBits][h&(nodePage-1)] }
