package jobs

import (
	"encoding/binary"
	"iter"
	"maps"

	"github.com/cespare/xxhash/v2"
)

// Identity beyond a job's life: UNIQUE and DEBOUNCE (the engine's unique.go
// says what they mean). The options of a job live in Idents, flagged in its
// record; the ids UNIQUE keeps taken after their jobs ended are Tombs.

// SetIdent gives the job in slot s its UNIQUE ttl (ms, 0 for none) and its
// DEBOUNCE limit (unix ms, 0 for none), flagging it. O(1).
func (t *Table) SetIdent(s uint32, uniqueTTL, debounceUntil int64) {
	if uniqueTTL <= 0 && debounceUntil == 0 {
		return
	}
	if t.Idents == nil {
		t.Idents = make(map[uint32]Ident)
	}
	j := t.At(s)
	if uniqueTTL > 0 {
		j.Flags |= FlagUnique
	}
	if debounceUntil != 0 {
		j.Flags |= FlagDebounce
	}
	t.Idents[s] = Ident{UniqueTTL: max(uniqueTTL, 0), DebounceUntil: debounceUntil}
}

// DropIdent forgets the job's UNIQUE and DEBOUNCE options, leaving no
// tombstone: the job is being replaced, or starts over in a dead-letter
// queue. O(1).
func (t *Table) DropIdent(s uint32) {
	j := t.At(s)
	if j.Flags&(FlagUnique|FlagDebounce) != 0 {
		j.Flags &^= FlagUnique | FlagDebounce
		delete(t.Idents, s)
	}
}

// IdentOf is the job's UNIQUE and DEBOUNCE options; ok is false when it has
// neither. O(1).
func (t *Table) IdentOf(s uint32) (Ident, bool) {
	if t.peek(s).Flags&(FlagUnique|FlagDebounce) == 0 {
		return Ident{}, false
	}
	return t.Idents[s], true
}

// DebounceUntil is the DEBOUNCE limit of the job in slot s; ok is false
// when it has none. O(1).
func (t *Table) DebounceUntil(s uint32) (int64, bool) {
	if t.peek(s).Flags&FlagDebounce == 0 {
		return 0, false
	}
	return t.Idents[s].DebounceUntil, true
}

// EndUnique forgets the UNIQUE option of the job in slot s, which is
// ending, and returns its ttl: how long the tombstone its end leaves holds
// the id. Forgetting it means a later removal of the same slot leaves no
// second tombstone. ok is false for a job that is not UNIQUE. DEBOUNCE's
// limit stays. O(1).
func (t *Table) EndUnique(s uint32) (ttl int64, ok bool) {
	j := t.At(s)
	if j.Flags&FlagUnique == 0 {
		return 0, false
	}
	ji := t.Idents[s]
	j.Flags &^= FlagUnique
	if j.Flags&FlagDebounce == 0 {
		delete(t.Idents, s)
	} else {
		t.Idents[s] = Ident{DebounceUntil: ji.DebounceUntil}
	}
	return ji.UniqueTTL, true
}

// TombKey hashes (queue, id) for the tombstone table; the queue's length
// goes first so that ("ab", "c") and ("a", "bc") differ. The hash must be
// the same in every process, since the log and a rewrite store it: xxhash,
// not the id index's maphash, whose seed is random per process.
func TombKey(queue, id []byte) uint64 {
	var n [binary.MaxVarintLen64]byte
	var d xxhash.Digest
	d.Reset()
	d.Write(n[:binary.PutUvarint(n[:], uint64(len(queue)))])
	d.Write(queue)
	d.Write(id)
	return d.Sum64()
}

// Tombs are the tombstones of UNIQUE ids: each TombKey of an id kept taken
// maps to the timer handle the engine set for the tombstone's end (the
// timer's due time is the end, so it is stored once).
type Tombs struct{ m map[uint64]uint32 }

// Len is the number of tombstones.
func (t *Tombs) Len() int { return len(t.m) }

// Get is the timer handle of key's tombstone.
func (t *Tombs) Get(key uint64) (h uint32, ok bool) {
	h, ok = t.m[key]
	return h, ok
}

// Put sets key's tombstone to the timer h.
func (t *Tombs) Put(key uint64, h uint32) {
	if t.m == nil {
		t.m = make(map[uint64]uint32)
	}
	t.m[key] = h
}

// Delete drops key's tombstone.
func (t *Tombs) Delete(key uint64) { delete(t.m, key) }

// All is every tombstone as (key, timer handle), in no order.
func (t *Tombs) All() iter.Seq2[uint64, uint32] { return maps.All(t.m) }
