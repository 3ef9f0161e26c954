package jobs

import "testing"

// The stack is LIFO across block edges, reuses its spare block at an edge,
// and never copies a pushed ref (each block keeps its first backing array).
func TestRefStackAcrossBlocks(t *testing.T) {
	var s refStack
	const n = 3*refBlock + 17
	for i := uint64(1); i <= n; i++ {
		s.push(i)
	}
	if len(s.blocks) != 4 {
		t.Fatalf("%d blocks, want 4", len(s.blocks))
	}
	first := &s.blocks[0][0]
	for i := uint64(1); i <= n; i++ {
		s.push(n + i)
		if &s.blocks[0][0] != first {
			t.Fatal("the first block was copied by a push")
		}
	}
	for i := uint64(2 * n); i >= 1; i-- {
		r, ok := s.pop()
		if !ok || r != i {
			t.Fatalf("pop %d: %d %v", i, r, ok)
		}
	}
	if r, ok := s.pop(); ok {
		t.Fatalf("pop of an empty stack: %d", r)
	}
	// Pushes and pops at a block edge allocate nothing once warm.
	for i := uint64(0); i < refBlock; i++ {
		s.push(i)
	}
	if a := testing.AllocsPerRun(100, func() { s.push(1); s.pop() }); a != 0 {
		t.Fatalf("%v allocations per push/pop at a block edge, want 0", a)
	}
	if s.bytes() < refBlock*8 {
		t.Fatalf("bytes %d, want at least one block", s.bytes())
	}
}
