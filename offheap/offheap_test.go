package offheap

import "testing"

type rec struct {
	a, b uint64
	c    uint32
}

func TestMakeZeroedWritableFree(t *testing.T) {
	for _, n := range []int{1, 3, 4096, 1 << 16} {
		s := Make[rec](n)
		if len(s) != n || cap(s) != n {
			t.Fatalf("Make(%d): len %d cap %d", n, len(s), cap(s))
		}
		for i := range s {
			if s[i] != (rec{}) {
				t.Fatalf("Make(%d)[%d] = %+v, want zero", n, i, s[i])
			}
			s[i] = rec{uint64(i), 2, 3}
		}
		if s[n-1].a != uint64(n-1) {
			t.Fatalf("write lost")
		}
		Free(s[:1]) // resliced: Free still gives back the whole mapping
	}
	if Make[rec](0) != nil {
		t.Fatal("Make(0) should be nil")
	}
	Free[rec](nil)
}

func TestManyMappings(t *testing.T) {
	// Far more than the kernel's map count limit would allow if Free leaked.
	for range 1<<16 + 100 {
		s := Make[byte](4096)
		s[0] = 1
		Free(s)
	}
}
