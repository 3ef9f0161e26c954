package jobs

// refStack is a size class's free list: a stack of refs kept in fixed
// blocks rather than one slice. A slice grown by append copies the whole
// list at each growth, under the lock: freeing a 3M-job queue (lazy free,
// or any mass ACK) grew one list to 3M refs and the last copies held the
// lock for 50-140 ms on a loaded 2-core machine. With blocks, a push
// allocates at most one 32 KiB block and copies nothing.
type refStack struct {
	blocks [][]uint64 // all full but the last; the last is never empty
	spare  []uint64   // one emptied block kept, so a push/pop at a block edge does not allocate each time
}

const refBlock = 4096

func (s *refStack) push(r uint64) {
	n := len(s.blocks)
	if n == 0 || len(s.blocks[n-1]) == refBlock {
		b := s.spare
		s.spare = nil
		if b == nil {
			b = make([]uint64, 0, refBlock)
		}
		s.blocks = append(s.blocks, b)
		n++
	}
	s.blocks[n-1] = append(s.blocks[n-1], r)
}

// pop returns the last ref pushed, or false when there is none.
func (s *refStack) pop() (uint64, bool) {
	n := len(s.blocks)
	if n == 0 {
		return 0, false
	}
	b := s.blocks[n-1]
	r := b[len(b)-1]
	b = b[:len(b)-1]
	if len(b) == 0 {
		s.blocks[n-1] = nil
		s.blocks = s.blocks[:n-1]
		s.spare = b
	} else {
		s.blocks[n-1] = b
	}
	return r, true
}

// bytes is the memory the stack holds (every block has refBlock's capacity).
func (s *refStack) bytes() int64 {
	return int64(cap(s.blocks))*24 + int64(len(s.blocks))*refBlock*8 + int64(cap(s.spare))*8
}
