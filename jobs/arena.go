package jobs

import (
	"math/bits"
	"unsafe"

	"github.com/delayd/delayd/offheap"
)

// Arena stores byte strings (client ids and payloads) in large pointer-free
// chunks, addressed by a uint64 ref instead of a slice header.
//
// Why not one []byte per job: with 10M jobs pending that is 10M pointers the
// garbage collector must scan on every cycle, which is what shows up as tail
// latency on unrelated commands. Chunks hold no pointers, so the GC sees a few
// hundred objects whatever the job count.
//
// Blocks are rounded up to a size class and freed blocks are kept on a
// per-class free list for reuse (a slab allocator). Strings larger than the
// biggest class get their own allocation in big; there are few of those.
//
// Chunks are mapped outside the Go heap (package offheap), for the reason
// the slab's pages are; release unmaps them.
type Arena struct {
	chunks  [][]byte
	classes [numClasses]sizeClass
	big     map[uint32][]byte
	bigNext uint32
	InUse   int64 // bytes handed out, rounded to class sizes (INFO)
	// pinned counts the frozen copies being read (Table.Freeze): while it
	// is not 0, freed small blocks wait in held (ref | class<<heldClassOff)
	// instead of their free lists, so no Alloc reuses bytes a copy reads.
	pinned int
	held   refStack
}

// heldClassOff places a held block's size class above its ref's bits.
const heldClassOff = 56

type sizeClass struct {
	chunk uint32   // chunk being carved for this class
	off   uint32   // next free offset in it
	ready bool     // chunk is valid
	free  refStack // refs of freed blocks
}

// MaxSmall is the longest string the arena keeps in its chunks; a longer
// one gets an allocation of its own.
const MaxSmall = maxClass

const (
	chunkSize  = 1 << 20
	maxClass   = 64 << 10
	bigFlag    = uint64(1) << 63
	numClasses = 8 + 4*(16-7) // 16-byte steps to 128, then 4 steps per power of two up to 64 KiB
	emptyRef   = 0
	// A small block's ref is chunk<<refChunkOff | offset+1, in the low
	// smallRefBits bits (2^25 chunks of 1 MiB: 32 TiB); a big string's is
	// bigFlag | its key in big. The bits above are the arena's caller's:
	// a job keeps its payload length there (PackData), which the arena
	// ignores, so a job's data word goes to bytes and free as it is.
	refChunkOff  = 21
	smallRefBits = 46
	maxChunks    = 1 << (smallRefBits - refChunkOff)
	bigPlenShift = 32
)

// RefOf returns the arena ref in a job's data word.
func RefOf(data uint64) uint64 {
	if data&bigFlag != 0 {
		return data & (bigFlag | 1<<32 - 1)
	}
	return data & (1<<smallRefBits - 1)
}

// PackData returns the data word of a job whose id and payload are at ref
// and whose payload is plen bytes: the length rides in the bits of the ref
// the arena leaves free, which keeps it out of the job record (4 bytes a
// job; with the old hash-chain field, the record went from 72 bytes to 64).
// A small block holds at most maxClass bytes, so its payload length fits
// the 17 bits above smallRefBits; a big one's fits the 31 above its key
// (the engine keeps payloads to at most 2^26 bytes).
func PackData(ref uint64, plen int) uint64 {
	if ref&bigFlag != 0 {
		return ref | uint64(plen)<<bigPlenShift
	}
	return ref | uint64(plen)<<smallRefBits
}

// PlenOf returns the payload length in a job's data word.
func PlenOf(data uint64) uint32 {
	if data&bigFlag != 0 {
		return uint32(data>>bigPlenShift) &^ (1 << 31)
	}
	return uint32(data >> smallRefBits & (1<<(63-smallRefBits) - 1))
}

// classOf maps a length to its size class and the class's block size.
// Up to 128 bytes classes step by 16 (payloads are mostly small); above,
// four classes per power of two bound the waste to 25%.
func classOf(n int) (int, int) {
	if n <= 128 {
		c := (n + 15) >> 4
		if c == 0 {
			c = 1
		}
		return c - 1, c << 4
	}
	// n in (2^k, 2^(k+1)]: four steps of 2^(k-2).
	k := bits.Len(uint(n-1)) - 1 // 2^k < n <= 2^(k+1)
	step := 1 << (k - 2)
	i := (n - (1 << k) + step - 1) / step // 1..4
	return 8 + (k-7)*4 + i - 1, (1 << k) + i*step
}

// Alloc copies b into the arena and returns its ref. Refs are never 0, so a
// zero ref means "nothing stored". O(1) amortized.
func (a *Arena) Alloc(b []byte) uint64 {
	if len(b) == 0 {
		return emptyRef
	}
	if len(b) > maxClass {
		if a.big == nil {
			a.big = make(map[uint32][]byte)
		}
		a.bigNext++
		a.big[a.bigNext] = append([]byte(nil), b...)
		a.InUse += int64(len(b))
		return bigFlag | uint64(a.bigNext)
	}
	ci, size := classOf(len(b))
	c := &a.classes[ci]
	a.InUse += int64(size)
	var ref uint64
	if r, ok := c.free.pop(); ok {
		ref = r
	} else {
		if !c.ready || int(c.off)+size > chunkSize {
			if len(a.chunks) == maxChunks {
				panic("arena: 32 TiB of small strings")
			}
			a.chunks = append(a.chunks, offheap.Make[byte](chunkSize))
			if c.ready {
				// The class filled a whole chunk: it is in use, so map its
				// next one in one call (a fill, a replay) instead of 256
				// page faults. A class's first chunk faults in as used.
				offheap.Populate(a.chunks[len(a.chunks)-1])
			}
			c.chunk, c.off, c.ready = uint32(len(a.chunks)-1), 0, true
		}
		// Offsets start at 1 inside the ref so that chunk 0 offset 0 is not ref 0.
		ref = uint64(c.chunk)<<refChunkOff | uint64(c.off+1)
		c.off += uint32(size)
	}
	copy(a.Bytes(ref, len(b)), b)
	return ref
}

// Bytes returns the n bytes stored at ref. The slice aliases the arena: it is
// valid until the ref is freed, so callers copy before releasing the lock.
func (a *Arena) Bytes(ref uint64, n int) []byte {
	ref = RefOf(ref) // a job's data word may carry its payload length
	if ref == emptyRef {
		return nil
	}
	if ref&bigFlag != 0 {
		return a.big[uint32(ref)][:n]
	}
	off := uint32(ref&(1<<refChunkOff-1)) - 1
	return a.chunks[ref>>refChunkOff][off : off+uint32(n) : off+uint32(n)]
}

// Addr is the first byte of the string at ref, or nil for an empty or big
// one: a prefetch hint's address (the engine's warmNext).
func (a *Arena) Addr(ref uint64) unsafe.Pointer {
	ref = RefOf(ref)
	if ref == emptyRef || ref&bigFlag != 0 {
		return nil
	}
	return unsafe.Pointer(&a.chunks[ref>>refChunkOff][uint32(ref&(1<<refChunkOff-1))-1])
}

// Free releases the n-byte string at ref. O(1).
func (a *Arena) Free(ref uint64, n int) {
	ref = RefOf(ref)
	if ref == emptyRef {
		return
	}
	if ref&bigFlag != 0 {
		delete(a.big, uint32(ref))
		a.InUse -= int64(n)
		return
	}
	ci, size := classOf(n)
	a.InUse -= int64(size)
	if a.pinned > 0 {
		a.held.push(ref | uint64(ci)<<heldClassOff)
		return
	}
	a.classes[ci].free.push(ref)
}

// Release unmaps every chunk and empties the arena: no ref stays valid.
// O(chunks).
func (a *Arena) Release() {
	for _, c := range a.chunks {
		offheap.Free(c)
	}
	*a = Arena{}
}

// Footprint is the memory the arena holds from the runtime, in bytes.
func (a *Arena) Footprint() int64 {
	n := int64(len(a.chunks)) * chunkSize
	for _, b := range a.big {
		n += int64(cap(b))
	}
	for i := range a.classes {
		n += a.classes[i].free.bytes()
	}
	n += a.held.bytes()
	return n
}

// DataSize is the arena bytes that hold a job's id and payload: its block's
// size class, or the exact length of a big string. O(1).
func DataSize(j *Job) int64 {
	n := int(j.IDLen) + int(j.Plen())
	switch {
	case n == 0:
		return 0
	case n > maxClass:
		return int64(n)
	}
	_, size := classOf(n)
	return int64(size)
}
