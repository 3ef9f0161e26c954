package integration

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayd/delayd/commands"
	"github.com/redis/go-redis/v9"
)

// slotPreload is the jobs TestChaosSlotMoves adds before its moves, in
// the slots the moves take (each group's lowest), one queue a slot, and
// the workload never touches: half ready, half delayed an hour or more.
// Every move must carry each of them whole, so after the run each queue
// holds exactly its jobs, a sample reads back as it was written, and no
// group holds a queue of a slot it does not own. With
// DELAYD_CHAOS_PRELOAD=1000000 DELAYD_CHAOS_MOVE_SLOTS=4096 each move
// carries about a million jobs (issue 34's reshard line).
type slotPreload struct {
	queues []string
	slots  []int
	per    int
	sample map[[2]string]any // (queue, id) -> DELAY.GET before the moves
}

// newSlotPreload adds perGroup jobs to each group's lowest moveSlots
// slots through c.
func newSlotPreload(t *testing.T, c *redis.ClusterClient, perGroup, moveSlots int, rng *rand.Rand) *slotPreload {
	t.Helper()
	p := &slotPreload{per: max(1, perGroup/moveSlots), sample: map[[2]string]any{}}
	want := map[int]bool{}
	for _, r := range grRanges {
		lo, _ := strconv.Atoi(strings.Split(r, "-")[0])
		for s := lo; s < lo+moveSlots; s++ {
			want[s] = true
		}
	}
	// A name for each slot: the first "pl-i" that hashes to it.
	for i := 0; len(want) > 0; i++ {
		q := "pl-" + strconv.Itoa(i)
		if s := commands.KeySlot(q); want[s] {
			delete(want, s)
			p.queues, p.slots = append(p.queues, q), append(p.slots, s)
		}
	}
	ctx := ctxT(t, 30*time.Minute)
	start := time.Now()
	const batch = 4096
	total := len(p.queues) * p.per
	for from := 0; from < total; from += batch {
		cmds, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for j := from; j < min(total, from+batch); j++ {
				q, i := p.queues[j%len(p.queues)], j/len(p.queues)
				delay := 0
				if i%2 == 1 {
					delay = 3_600_000 + i
				}
				pl.Do(ctx, "DELAY.ADD", q, delay, fmt.Sprintf("payload %s %d", q, i), "ID", strconv.Itoa(i))
			}
			return nil
		})
		if err != nil {
			for _, cmd := range cmds {
				if cmd.Err() != nil {
					t.Fatalf("preload: %v", cmd.Err())
				}
			}
			t.Fatalf("preload: %v", err)
		}
	}
	for len(p.sample) < min(total, 1000) {
		q, i := p.queues[rng.Intn(len(p.queues))], strconv.Itoa(rng.Intn(p.per))
		v, err := c.Do(ctx, "DELAY.GET", q, i).Result()
		if err != nil || v == nil {
			t.Fatalf("preload: DELAY.GET %s %s: %v", q, i, err)
		}
		p.sample[[2]string{q, i}] = v
	}
	t.Logf("chaos: preloaded %d jobs in %d queues (%d slots of each group) in %v", total, len(p.queues), moveSlots, time.Since(start).Round(time.Millisecond))
	return p
}

// verify checks the preloaded jobs after the run: each queue's counts,
// the sample's jobs field by field, and no queue left in a group that does
// not own its slot.
func (p *slotPreload) verify(t *testing.T, c *redis.ClusterClient, m *slotMover) {
	t.Helper()
	ctx := ctxT(t, 10*time.Minute)
	bad := 0
	for _, q := range p.queues {
		v, err := c.Do(ctx, "DELAY.STATS", q).Result()
		if err != nil {
			t.Errorf("chaos: preloaded queue %s: DELAY.STATS: %v", q, err)
			bad++
			continue
		}
		f := map[string]int64{}
		switch v := v.(type) {
		case map[any]any: // RESP3
			for k, n := range v {
				f[fmt.Sprint(k)], _ = n.(int64)
			}
		case []any:
			for i := 0; i+1 < len(v); i += 2 {
				f[fmt.Sprint(v[i])], _ = v[i+1].(int64)
			}
		}
		if f["ready"] != int64((p.per+1)/2) || f["delayed"] != int64(p.per/2) || f["reserved"] != 0 {
			t.Errorf("chaos: preloaded queue %s (slot %d) holds %v, want ready %d, delayed %d", q, commands.KeySlot(q), v, (p.per+1)/2, p.per/2)
			bad++
		}
		if bad > 20 {
			t.Fatal("chaos: too many preloaded queues wrong")
		}
	}
	for k, before := range p.sample {
		after, err := c.Do(ctx, "DELAY.GET", k[0], k[1]).Result()
		if err != nil || fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("chaos: preloaded job %s of %s: %v %v, before the moves %v", k[1], k[0], after, err, before)
		}
	}
	// Orphans: a group holding keys of a slot it does not own.
	for g := 0; g < grCount; g++ {
		l, err := m.leader(g)
		if err != nil {
			t.Error(err)
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: l.addr(g), Protocol: 2, MaxRetries: -1})
		for i, s := range p.slots {
			n, err := rc.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", s).Int64()
			if err != nil || n == 0 {
				continue
			}
			if err := rc.Do(ctx, "DELAY.STATS", p.queues[i]).Err(); err != nil && strings.HasPrefix(err.Error(), "MOVED") {
				t.Errorf("chaos: group %d holds %d queues of slot %d, which it does not own (%v)", g, n, s, err)
			}
		}
		rc.Close()
	}
}
