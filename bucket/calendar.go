package bucket

// calendar orders a bucket in memory's entries by due, so that a load
// round plans the entries due by its time in O(entries due), not in a scan
// of the whole bucket: its entries are in add order, and with a short
// horizon (every job through disk) a round every quarter horizon scanned a
// million of them under the owner's lock, 3-4 ms each, back to back at
// 20k jobs a second (docs/decisions/far-future-buckets.md, "Loads").
//
// It is one ring of calSlots slots of grain ms from base, as one level of
// the timing wheel: an entry goes to the slot of its due (one due before
// base goes to base's), an entry due past the ring's end to later. A slot
// keeps its entries until a round finds them dead (taken, removed or
// moved), so a round that fails to read leaves nothing out. Once base has
// come within half a ring of later's earliest due, later is spread again
// (O(later), once a half ring of time); 4 bytes an entry, and the ring's
// 96 KiB once the bucket has an entry.
type calendar struct {
	grain    int64
	base     int64 // the first slot's start, a multiple of grain; set by the first round
	started  bool
	slots    [][]uint32
	later    []uint32
	laterMin int64
	visits   int // entries looked at by rounds and spreads: the work a test bounds
}

const calSlots = 4096

// ring is the slot of a due at or after base (dues are ms of the epoch).
func (c *calendar) ring(due int64) int { return int(uint64(due) / uint64(c.grain) % calSlots) }

// add files entry i, due at due.
func (c *calendar) add(i uint32, due int64) {
	if !c.started || due >= c.base+calSlots*c.grain {
		if len(c.later) == 0 || due < c.laterMin {
			c.laterMin = due
		}
		c.later = append(c.later, i)
		return
	}
	k := c.ring(max(due, c.base))
	c.slots[k] = append(c.slots[k], i)
}

// due offers plan, a slot at a time from base, the live entries of b
// filed in slots that start by until, until enough; plan takes those due
// by until. Dead entries are dropped as they are met, and base moves past
// each slot left empty that ends by until.
func (c *calendar) due(b *bucket, until int64, enough func() bool, plan func(i uint32)) {
	if !c.started {
		c.started, c.base = true, until-until%c.grain
		c.slots = make([][]uint32, calSlots)
	}
	if until-c.base >= calSlots/2*c.grain {
		c.rebase(b, until-until%c.grain)
	}
	if len(c.later) > 0 && c.laterMin < c.base+calSlots/2*c.grain {
		c.spread(b)
	}
	advancing := true
	for s, start := 0, c.base; s < calSlots && (s == 0 || start <= until); s, start = s+1, start+c.grain { // base's slot always: it holds what was due before base
		k := c.ring(start)
		all, es := c.slots[k], c.slots[k][:0]
		c.visits += len(all)
		for n, i := range all {
			if b.isDead(i) {
				continue
			}
			if enough() {
				c.slots[k] = append(es, all[n:]...)
				return
			}
			plan(i)
			es = append(es, i) // taken or not, it stays until a round finds it dead: a failed read loses nothing
		}
		c.slots[k] = es
		if advancing && len(es) == 0 && start+c.grain <= until {
			c.slots[k] = nil // its memory goes with it
			c.base = start + c.grain
		} else {
			advancing = false
		}
	}
}

// rebase moves base to nb, past slots rounds did not empty (cut by their
// max, or a long pause between rounds): their entries, all due by nb, go
// to nb's slot. O(their entries), which are due, and then a spread: so
// that a round's time stays within half a ring of base, and later's
// entries beyond it.
func (c *calendar) rebase(b *bucket, nb int64) {
	var moved []uint32
	for s, start := 0, c.base; s < calSlots && start < nb; s, start = s+1, start+c.grain {
		k := c.ring(start)
		c.visits += len(c.slots[k])
		for _, i := range c.slots[k] {
			if !b.isDead(i) {
				moved = append(moved, i)
			}
		}
		c.slots[k] = nil
	}
	c.base = nb
	k := c.ring(nb)
	c.slots[k] = append(c.slots[k], moved...)
}

// spread files later's entries due within the ring now.
func (c *calendar) spread(b *bucket) {
	kept := c.later[:0]
	c.laterMin = 1<<63 - 1
	c.visits += len(c.later)
	for _, i := range c.later {
		if b.isDead(i) {
			continue
		}
		due := b.ent(int(i)).Due
		if due < c.base+calSlots*c.grain {
			k := c.ring(max(due, c.base))
			c.slots[k] = append(c.slots[k], i)
			continue
		}
		kept = append(kept, i)
		c.laterMin = min(c.laterMin, due)
	}
	c.later = kept
}
