package journal

import (
	"errors"
	"testing"
	"time"

	"github.com/delayd/delayd/aof"
)

// holder is a Compactor whose Live reports holds of its lock and then
// ends the round, as an owner closing does.
type holder struct {
	j     *Journal
	holds []time.Duration
	seen  time.Duration // MaxHold as the running round shows it
}

func (h *holder) Live([]uint64) (int64, bool) {
	for _, d := range h.holds {
		h.j.Held(d)
	}
	h.seen = h.j.CompactionInfo().MaxHold
	return 0, true
}

func (h *holder) Restate(uint64) (uint64, error) { return 0, nil }

// INFO's aof_compaction_max_hold_us is the longest hold of the last round:
// while a round runs, its own longest so far; each round starts from none.
func TestCompactionMaxHoldIsTheLastRounds(t *testing.T) {
	o := newOwner(t, aof.NewMemFS(), FsyncEverySec, nil)
	h := &holder{j: o.j, holds: []time.Duration{2 * time.Millisecond, 7 * time.Millisecond, 3 * time.Millisecond}}
	o.j.comp.running.Store(true) // claimed (ClaimCompaction wants a segmented log)
	if _, err := o.j.Compact(h); !errors.Is(err, ErrCompactionClosed) {
		t.Fatalf("Compact: %v, want ErrCompactionClosed", err)
	}
	if h.seen != 7*time.Millisecond {
		t.Fatalf("MaxHold during the round: %v, want 7ms", h.seen)
	}
	if got := o.j.CompactionInfo().MaxHold; got != 7*time.Millisecond {
		t.Fatalf("MaxHold after the round: %v, want 7ms", got)
	}
	h.holds = []time.Duration{time.Millisecond}
	o.j.comp.running.Store(true)
	o.j.Compact(h)
	if got := o.j.CompactionInfo().MaxHold; got != time.Millisecond {
		t.Fatalf("MaxHold after a round of shorter holds: %v, want 1ms", got)
	}
}
