package cluster

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestSlotMapApply(t *testing.T) {
	even := EvenSlots(3)
	m, err := (*SlotMap)(nil).apply(even.Change())
	if err != nil || *m != *even {
		t.Fatalf("the even split's entry on an empty map: %v", err)
	}
	// A second first entry changes nothing.
	if n, err := m.apply(EvenSlots(2).Change()); err != nil || n != m {
		t.Fatalf("a second first entry applied: %v", err)
	}
	if _, err := (*SlotMap)(nil).apply(SlotChange{Stable: []int{1}}); err == nil {
		t.Fatal("a change applied to no map")
	}
	n, err := m.apply(SlotChange{Migrating: [][2]int{{5, 2}}, Importing: [][2]int{{6000, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := n.Migrating(5); !ok || g != 2 {
		t.Errorf("slot 5 migrating to %d %v, want 2", g, ok)
	}
	if g, ok := n.Importing(6000); !ok || g != 0 {
		t.Errorf("slot 6000 importing from %d %v, want 0", g, ok)
	}
	if _, ok := m.Migrating(5); ok {
		t.Error("the map a change was applied to changed")
	}
	// NODE assigns and ends the move; STABLE ends it in place.
	n, err = n.apply(SlotChange{Assign: [][3]int{{0, 5, 2}}, Stable: []int{6000}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Migrating(5); ok || n.Owner(5) != 2 || n.Owner(6) != 0 {
		t.Errorf("after NODE: slot 5 owned by %d (migrating %v), slot 6 by %d", n.Owner(5), ok, n.Owner(6))
	}
	if _, ok := n.Importing(6000); ok || n.Owner(6000) != 1 {
		t.Error("STABLE did not end slot 6000's move, or moved it")
	}
	if got := n.Ranges(2); len(got) != 2 || got[0] != [2]int{0, 5} {
		t.Errorf("group 2's ranges %v", got)
	}
	// The whole map's entry makes the same map.
	if r, err := (*SlotMap)(nil).apply(n.Change()); err != nil || *r != *n {
		t.Errorf("a map's own entry made another map: %v", err)
	}
	for _, bad := range []SlotChange{
		{Assign: [][3]int{{0, 5, 3}}},
		{Assign: [][3]int{{5, 0, 1}}},
		{Assign: [][3]int{{0, Slots, 1}}},
		{Migrating: [][2]int{{-1, 1}}},
		{Importing: [][2]int{{1, 7}}},
		{Stable: []int{Slots}},
	} {
		if _, err := m.apply(bad); err == nil {
			t.Errorf("%+v applied", bad)
		}
	}
}

// Group 0's leader writes the even split when its log holds no map, every
// member applies each change, and a restart gets the map back from the
// snapshot and the log.
func TestSlotMapReplicated(t *testing.T) {
	var heard [3]atomic.Pointer[SlotMap]
	use := func(i int) func(*Cluster) {
		return func(c *Cluster) { c.UseSlots(3, func(m *SlotMap) { heard[i].Store(m) }) }
	}
	first := startNode(t, Config{Bootstrap: true}, use(0))
	nodes := []*testNode{first}
	leaderOf(t, nodes)
	for i := 1; i < 3; i++ {
		n := startNode(t, Config{}, use(i))
		if err := first.c.Join(n.c.ID(), n.cfg.BusAddr, n.cfg.AnnounceAddr); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	even := EvenSlots(3)
	for i, n := range nodes {
		waitFor(t, 10*time.Second, "the even split everywhere", func() bool {
			m := heard[i].Load()
			return m != nil && *m == *even && n.c.Slots() == m
		})
	}
	l := leaderOf(t, nodes)
	if _, err := l.c.ChangeSlots(SlotChange{Assign: [][3]int{{0, 99, 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.ChangeSlots(SlotChange{Migrating: [][2]int{{100, 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.ChangeSlots(SlotChange{Assign: [][3]int{{0, 0, 9}}}); err == nil {
		t.Error("a change naming group 9 of 3 was committed")
	}
	moved := func(m *SlotMap) bool {
		g, ok := m.Migrating(100)
		return m.Owner(0) == 2 && m.Owner(99) == 2 && m.Owner(100) == 0 && ok && g == 1
	}
	for i := range nodes {
		waitFor(t, 10*time.Second, "the changes everywhere", func() bool {
			m := heard[i].Load()
			return m != nil && moved(m)
		})
	}
	if err := l.c.r().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if _, err := l.c.ChangeSlots(SlotChange{Stable: []int{100}}); err != nil {
		t.Fatal(err)
	}
	var f *testNode
	for _, n := range nodes {
		if n != l {
			f = n
		}
	}
	waitFor(t, 10*time.Second, "STABLE at the follower", func() bool {
		_, ok := f.c.Slots().Migrating(100)
		return !ok
	})
	// The follower restarts: the snapshot's map, then the log's change.
	cfg := f.cfg
	f.stop()
	cfg.NodeID = ""
	var again atomic.Pointer[SlotMap]
	g := startNode(t, cfg, func(c *Cluster) { c.UseSlots(3, func(m *SlotMap) { again.Store(m) }) })
	waitFor(t, 10*time.Second, "the restarted follower's map", func() bool {
		m := again.Load()
		if m == nil || m != g.c.Slots() {
			return false
		}
		_, ok := m.Migrating(100)
		return m.Owner(0) == 2 && m.Owner(100) == 0 && !ok
	})
}

// A cluster whose slots never moved snapshots no map (framed as before
// maps were kept), and a node that restored none applies a change to the
// even split it routes by.
func TestSlotMapWithoutEntries(t *testing.T) {
	f := &fsm{c: &Cluster{log: zerolog.Nop()}}
	f.c.groups.Store(3)
	if b, err := f.slotsJSON(); b != nil || err != nil {
		t.Fatalf("no map: %s %v", b, err)
	}
	if err := f.applySlots([]byte(`{"migrating":[[7,2]]}`), 1); err != nil {
		t.Fatalf("a change before any map: %v", err)
	}
	m := f.slots.Load()
	if g, ok := m.Migrating(7); !ok || g != 2 || m.Owner(7) != 0 || m.Owner(16383) != 2 {
		t.Fatalf("the change on the even split: owner %d, migrating %d %v", m.Owner(7), g, ok)
	}
	if b, _ := f.slotsJSON(); b == nil {
		t.Error("a map with a move open was not snapshotted")
	}
	if err := f.applySlots([]byte(`{"stable":[7]}`), 2); err != nil {
		t.Fatal(err)
	}
	if b, _ := f.slotsJSON(); b != nil {
		t.Errorf("the even split again was snapshotted: %s", b)
	}
}

// A group added (redis-cli --cluster add-node) owns no slot; the map
// counts it from then on, takes changes naming it, and is snapshotted
// even once its slots are the even split of its new size; a stale add (a
// map that grew meanwhile) and an add with no host are refused. The
// process hears of the add after the map.
func TestSlotMapAddGroup(t *testing.T) {
	f := &fsm{c: &Cluster{log: zerolog.Nop()}}
	f.c.groups.Store(3)
	var heard []SlotChange
	f.c.OnGroupChange(func(ch SlotChange) {
		if ch.RemoveGroup != 0 {
			heard = append(heard, ch)
			return
		}
		if f.slots.Load().Groups() != ch.AddGroup+1 {
			t.Errorf("told of the add before the map had it")
		}
		heard = append(heard, ch)
	})
	// On a node that restored no map: the add applies to the even split.
	if err := f.applySlots([]byte(`{"add_group":3,"hosts":["a","b"],"first":"h:1"}`), 1); err != nil {
		t.Fatal(err)
	}
	m := f.slots.Load()
	if m.Groups() != 4 || len(m.Ranges(3)) != 0 || m.Owner(16383) != 2 {
		t.Fatalf("after the add: %d groups, group 3's ranges %v", m.Groups(), m.Ranges(3))
	}
	if len(heard) != 1 || heard[0].First != "h:1" || len(heard[0].Hosts) != 2 {
		t.Fatalf("heard %+v", heard)
	}
	if b, _ := f.slotsJSON(); b == nil {
		t.Error("a map with a group added was not snapshotted")
	}
	for _, bad := range []string{
		`{"add_group":3,"hosts":["a"],"first":"h:1"}`, // the map has 4 now
		`{"add_group":4,"first":"h:1"}`,
		`{"add_group":4,"hosts":["a"]}`,
		`{"add_group":4,"groups":5,"hosts":["a"],"first":"h:1"}`,
	} {
		if err := f.applySlots([]byte(bad), 2); err == nil {
			t.Errorf("%s applied", bad)
		}
	}
	if len(heard) != 1 || f.slots.Load() != m {
		t.Fatalf("a refused add changed the map or was heard")
	}
	// Slots move to it (rebalance), and the map restored from a snapshot
	// keeps its 4 groups.
	var q [3]int
	for g := 0; g < 3; g++ {
		q[g] = g*Slots/3 + Slots/12
	}
	ch := SlotChange{Assign: [][3]int{{0, q[0] - 1, 3}, {Slots / 3, q[1] - 1, 3}, {2 * Slots / 3, q[2] - 1, 3}}}
	if err := f.applySlots(mustJSON(t, ch), 3); err != nil {
		t.Fatal(err)
	}
	b, _ := f.slotsJSON()
	r := &fsm{c: &Cluster{log: zerolog.Nop()}}
	r.c.groups.Store(3)
	if err := r.restoreSlots(b); err != nil || *r.slots.Load() != *f.slots.Load() || r.slots.Load().Groups() != 4 {
		t.Fatalf("restored: %v", err)
	}
	// The group is removed only once it owns no slot again (rebalance
	// with its weight 0), and only the last.
	if err := f.applySlots([]byte(`{"remove_group":3,"forget":["x"]}`), 4); err == nil {
		t.Error("a group owning slots was removed")
	}
	ch = SlotChange{Assign: [][3]int{{0, q[0] - 1, 0}, {Slots / 3, q[1] - 1, 1}, {2 * Slots / 3, q[2] - 1, 2}}}
	if err := f.applySlots(mustJSON(t, ch), 5); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"remove_group":2}`, `{"remove_group":3,"assign":[[0,0,3]]}`} {
		if err := f.applySlots([]byte(bad), 6); err == nil {
			t.Errorf("%s applied", bad)
		}
	}
	if err := f.applySlots([]byte(`{"remove_group":3,"forget":["x"]}`), 7); err != nil {
		t.Fatal(err)
	}
	if m := f.slots.Load(); m.Groups() != 3 || *m != *EvenSlots(3) || len(heard) != 2 || heard[1].Forget[0] != "x" {
		t.Fatalf("after the removal: %d groups, heard %+v", m.Groups(), heard)
	}
	if b, _ := f.slotsJSON(); b != nil {
		t.Error("the bootstrap's split again was snapshotted")
	}
}

func mustJSON(t *testing.T, ch SlotChange) []byte {
	t.Helper()
	b, err := json.Marshal(ch)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
