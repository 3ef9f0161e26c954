package offheap

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

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

// With Free a no-op, the 2 GB mapped here would stay in the address space.
func TestFreeUnmaps(t *testing.T) {
	vmSize := func() int {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Skip("no /proc/self/status here")
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "VmSize:" {
				kb, _ := strconv.Atoi(f[1])
				return kb << 10
			}
		}
		t.Skip("no VmSize")
		return 0
	}
	before := vmSize()
	kept := make([][]byte, 0, 1000)
	for i := range 2000 {
		s := Make[byte](1 << 20)
		s[i] = 1
		if i%2 == 0 {
			Free(s)
		} else {
			kept = append(kept, s)
		}
	}
	if mid := vmSize(); mid < before+900<<20 {
		t.Fatalf("address space grew by %d MiB with 1000 MiB mapped: cannot tell a leak", (mid-before)>>20)
	}
	for _, s := range kept {
		Free(s)
	}
	if after := vmSize(); after > before+100<<20 {
		t.Fatalf("address space %d MiB larger after freeing everything: Free leaks", (after-before)>>20)
	}
}

// Populate maps pages in without changing them: a fresh block stays zero,
// written bytes stay written, and tiny or odd-sized blocks are fine.
func TestPopulateKeepsContents(t *testing.T) {
	for _, n := range []int{1, 4095, 1 << 16, 1<<20 + 7} {
		b := Make[byte](n)
		b[n/2] = 42
		Populate(b)
		for i, c := range b {
			if want := byte(0); i == n/2 {
				if c != 42 {
					t.Fatalf("n=%d: the written byte became %d", n, c)
				}
			} else if c != want {
				t.Fatalf("n=%d: byte %d became %d", n, i, c)
			}
		}
		b[0] = 1 // still writable
		Free(b)
	}
}
