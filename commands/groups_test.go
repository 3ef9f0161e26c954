package commands

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/engine"
)

// fakeGroups is three groups over three nodes, the slots split evenly; this
// process is member 0 of each, at its own address per group.
type fakeGroups struct {
	m     *cluster.SlotMap
	views []*fakeCluster
}

func (g *fakeGroups) Count() int                  { return g.m.Groups() }
func (g *fakeGroups) Owner(slot int) int          { return g.m.Owner(slot) }
func (g *fakeGroups) Ranges(i int) [][2]int       { return g.m.Ranges(i) }
func (g *fakeGroups) View(i int) ClusterView      { return g.views[i] }
func (g *fakeGroups) Migrating(s int) (int, bool) { return g.m.Migrating(s) }
func (g *fakeGroups) Importing(s int) (int, bool) { return g.m.Importing(s) }

// Send is MIGRATE's: what the test says the target does.
func (f *fakeCluster) Send(addr, user, password string, timeout time.Duration, cmds [][]any) error {
	return f.send(addr, cmds)
}

// ChangeSlots is group 0's: the change applied to the map at once.
func (f *fakeCluster) ChangeSlots(ch cluster.SlotChange) (uint64, error) { return 1, f.change(ch) }

// SlotsFresh is group 0's: the fake's map is the leader's.
func (f *fakeCluster) SlotsFresh() error { return nil }

// groupID is member i's node id in group g: one id per address.
func groupID(g, i int) string { return fmt.Sprintf("%039x%d", g, i) }

// newGroupFake is group g seen from member 0, led by member leader (-1:
// none known); group g's addresses are the nodes' ports + 100*g.
func newGroupFake(g, leader int) *fakeCluster {
	fc := &fakeCluster{self: groupID(g, 0), term: uint64(10 + g), index: 5}
	if leader >= 0 {
		fc.leader = groupID(g, leader)
		fc.writable = leader == 0
	}
	for i := 0; i < 3; i++ {
		fc.members = append(fc.members, cluster.Node{
			ID: groupID(g, i), Addr: fmt.Sprintf("10.0.0.%d:%d", i+1, 7000+100*g),
			BusAddr: fmt.Sprintf("10.0.0.%d:%d", i+1, 17000+100*g), Voter: true, Connected: true, Match: 5,
			ConfigEpoch: uint64(10 + g),
		})
	}
	return fc
}

// keyOf finds a key whose slot group g owns.
func keyOf(m *cluster.SlotMap, g int) string {
	for i := 0; ; i++ {
		k := fmt.Sprint("q", i)
		if m.Owner(KeySlot(k)) == g {
			return k
		}
	}
}

// A node serving group 1 of three: it runs its group's keys, sends the
// others' to their leaders, and shows one shard per group.
func TestSeveralGroups(t *testing.T) {
	m := cluster.EvenSlots(3)
	gs := &fakeGroups{m: m, views: []*fakeCluster{newGroupFake(0, 1), newGroupFake(1, 0), newGroupFake(2, -1)}}
	n := groupNode(t, gs, 1)
	c := n.client()
	k0, k1, k2 := keyOf(m, 0), keyOf(m, 1), keyOf(m, 2)

	for _, s := range [][2]string{
		{"RPUSH " + k1 + " x", ":1"},
		{"LLEN " + k1, ":1"},
		{"RPUSH " + k0 + " x", fmt.Sprintf("-MOVED %d 10.0.0.2:7000", KeySlot(k0))},
		{"RPUSH " + k2 + " x", down},
		{"DBSIZE", ":1"},
		{"RPOPLPUSH " + k1 + " " + k0, cross},
		{"CLUSTER SLOTS", down},
		{"CLUSTER SHARDS", down},
		{"CLUSTER MYSHARDID", "$" + shardIDOf(1)},
		{"CLUSTER GROUPS", "*3 *4 :0 $10.0.0.1:7000 *2 :0 :5460 :3 *4 :1 $10.0.0.1:7100 *2 :5461 :10921 :3 *4 :2 $10.0.0.1:7200 *2 :10922 :16383 :3"},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	// A READONLY client still goes to another group's leader: this address
	// is no replica of it.
	n.do(c, "READONLY")
	if got, want := n.do(c, "LLEN", k0), fmt.Sprintf("-MOVED %d 10.0.0.2:7000", KeySlot(k0)); got != want {
		t.Errorf("READONLY LLEN of group 0: %q, want %q", got, want)
	}
	info := n.do(c, "CLUSTER", "INFO")
	for _, f := range []string{"cluster_state:fail", "cluster_slots_ok:10922", "cluster_slots_fail:5462", "cluster_known_nodes:9", "cluster_size:3", "cluster_current_epoch:12", "cluster_my_epoch:11"} {
		if !strings.Contains(info, f+"\r\n") {
			t.Errorf("CLUSTER INFO lacks %s: %q", f, info)
		}
	}

	gs.views[2].set(func(f *fakeCluster) { f.leader = groupID(2, 2) })
	if got, want := n.do(c, "RPUSH", k2, "x"), fmt.Sprintf("-MOVED %d 10.0.0.3:7200", KeySlot(k2)); got != want {
		t.Errorf("RPUSH of group 2: %q, want %q", got, want)
	}
	if info := n.do(c, "CLUSTER", "INFO"); !strings.Contains(info, "cluster_state:ok\r\n") || !strings.Contains(info, "cluster_slots_ok:16384\r\n") {
		t.Errorf("CLUSTER INFO with every group led: %q", info)
	}
	slots := n.do(c, "CLUSTER", "SLOTS")
	for _, want := range []string{
		"*3 *5 :0 :5460 *4 $10.0.0.2 :7000 $" + groupID(0, 1) + " *0 *4 $10.0.0.1 :7000",
		"*5 :5461 :10921 *4 $10.0.0.1 :7100 $" + groupID(1, 0),
		"*5 :10922 :16383 *4 $10.0.0.3 :7200 $" + groupID(2, 2),
	} {
		if !strings.Contains(slots, want) {
			t.Errorf("CLUSTER SLOTS lacks %q: %q", want, slots)
		}
	}
	if shards := n.do(c, "CLUSTER", "SHARDS"); !strings.HasPrefix(shards, "*3 *4 $slots *2 :0 :5460 $nodes *3") {
		t.Errorf("CLUSTER SHARDS: %q", shards)
	}
	nodes := strings.TrimPrefix(n.do(c, "CLUSTER", "NODES"), "=")
	lines := strings.Split(strings.TrimSuffix(nodes, "\n"), "\n")
	if len(lines) != 9 {
		t.Fatalf("CLUSTER NODES: %d lines, want 9: %q", len(lines), nodes)
	}
	masterOf := map[string]string{}
	for g, lead := range []int{1, 0, 2} {
		for i := 0; i < 3; i++ {
			masterOf[groupID(g, i)] = groupID(g, lead)
		}
	}
	masters, myself := 0, 0
	for _, l := range lines {
		f := strings.Fields(l)
		if strings.Contains(f[2], "myself") {
			myself++
			if f[0] != groupID(1, 0) || f[2] != "myself,master" || f[8] != "5461-10921" {
				t.Errorf("myself line: %q", l)
			}
		}
		if strings.Contains(f[2], "master") {
			masters++
		} else if f[3] != masterOf[f[0]] {
			t.Errorf("replica of another group's master: %q", l)
		}
	}
	if masters != 3 || myself != 1 {
		t.Errorf("CLUSTER NODES: %d masters, %d myself: %q", masters, myself, nodes)
	}
}

func TestEvenSlots(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 64} {
		m := cluster.EvenSlots(n)
		total := 0
		for g := 0; g < n; g++ {
			for _, r := range m.Ranges(g) {
				total += r[1] - r[0] + 1
				for s := r[0]; s <= r[1]; s++ {
					if m.Owner(s) != g {
						t.Fatalf("n=%d: slot %d in group %d's ranges, owned by %d", n, s, g, m.Owner(s))
					}
				}
			}
			if rs := m.Ranges(g); len(rs) != 1 {
				t.Errorf("n=%d group %d: %d ranges", n, g, len(rs))
			}
		}
		if total != Slots {
			t.Errorf("n=%d: %d slots", n, total)
		}
	}
}

// failFake is a fakeCluster that hands leadership over (cluster.Cluster's
// Failover and HandOver).
type failFake struct {
	*fakeCluster
	calls []string
	err   error
}

func (f *failFake) Failover() error          { f.calls = append(f.calls, "failover"); return f.err }
func (f *failFake) HandOver(id string) error { f.calls = append(f.calls, "handover "+id); return f.err }

func TestClusterFailover(t *testing.T) {
	n := newNode(t, newFake(idA, idL))
	c := n.client()
	if got := n.do(c, "CLUSTER", "FAILOVER"); got != "-ERR CLUSTER FAILOVER is not supported here" {
		t.Errorf("without hand-over: %q", got)
	}
	ff := &failFake{fakeCluster: newFake(idA, idL)}
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	n = &node{t: t, d: New(Options{Engine: eng, Config: map[string]string{}, Cluster: ff}), eng: eng}
	c = n.client()
	for _, s := range [][2]string{
		{"CLUSTER FAILOVER", "+OK"},
		{"CLUSTER FAILOVER force", "+OK"},
		{"CLUSTER FAILOVER TAKEOVER", "+OK"},
		{"CLUSTER FAILOVER now", "-" + errSyntax},
		{"CLUSTER FAILOVER force now", "-" + errSyntax},
		{"CLUSTER HANDOVER " + idB, "+OK"},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	if got, want := strings.Join(ff.calls, "; "), "failover; failover; failover; handover "+idB; got != want {
		t.Errorf("calls: %q, want %q", got, want)
	}
	// The leader's own refusal is passed on as it is, not as ERR ERR.
	ff.err = errors.New("ERR You should send CLUSTER FAILOVER to a replica")
	if got := n.do(c, "CLUSTER", "FAILOVER"); got != "-ERR You should send CLUSTER FAILOVER to a replica" {
		t.Errorf("refused: %q", got)
	}
}

// CLUSTER SETSLOT, ASKING and ASK, at the leader of group 1 of three.
func TestSetSlotAndAsk(t *testing.T) {
	gs := &fakeGroups{m: cluster.EvenSlots(3), views: []*fakeCluster{newGroupFake(0, 1), newGroupFake(1, 0), newGroupFake(2, 2)}}
	var changes []string
	gs.views[0].change = func(ch cluster.SlotChange) error {
		m, err := gs.m.With(ch)
		if err == nil {
			gs.m = m
			changes = append(changes, fmt.Sprint(ch.Assign, ch.Migrating, ch.Importing, ch.Stable))
		}
		return err
	}
	n := groupNode(t, gs, 1)
	c := n.client()
	// Keys of one slot of group 1 (a hash tag) and one of group 0's.
	tag := keyOf(gs.m, 1)
	a, b := "{"+tag+"}a", "{"+tag+"}b"
	s1, k0 := KeySlot(tag), keyOf(gs.m, 0)
	s0 := KeySlot(k0)
	n.do(c, "RPUSH", a, "x")
	for _, s := range [][2]string{
		// Refusals, as Redis words them.
		{"CLUSTER SETSLOT " + fmt.Sprint(s0) + " MIGRATING " + groupID(2, 2), fmt.Sprintf("-ERR I'm not the owner of hash slot %d", s0)},
		{"CLUSTER SETSLOT " + fmt.Sprint(s1) + " IMPORTING " + groupID(0, 1), fmt.Sprintf("-ERR I'm already the owner of hash slot %d", s1)},
		{"CLUSTER SETSLOT " + fmt.Sprint(s1) + " MIGRATING nobody", "-ERR I don't know about node nobody"},
		{"CLUSTER SETSLOT 16384 STABLE", "-ERR Invalid or out of range slot"},
		{"CLUSTER SETSLOT 1 STABLE x", "-ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"},
		{"CLUSTER SETSLOT 1 DANCE x", "-ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"},
		{"CLUSTER SETSLOT " + fmt.Sprint(s1) + " NODE " + groupID(2, 2), fmt.Sprintf("-ERR Can't assign hashslot %d to a different node while I still hold keys for this hash slot.", s1)},
		// Slot s1 migrates to group 2: keys here run here, keys gone get
		// ASK to group 2's leader, some of each TRYAGAIN.
		{"CLUSTER SETSLOT " + fmt.Sprint(s1) + " MIGRATING " + groupID(2, 1), "+OK"},
		{"LLEN " + a, ":1"},
		{"LLEN " + b, fmt.Sprintf("-ASK %d 10.0.0.3:7200", s1)},
		{"RPOPLPUSH " + a + " " + b, "-TRYAGAIN Multiple keys request during rehashing of slot"},
		{"CLUSTER SETSLOT " + fmt.Sprint(s1) + " STABLE", "+OK"},
		{"LLEN " + b, ":0"},
		// Slot s0 is imported from group 0: after ASKING, one command runs here.
		{"CLUSTER SETSLOT " + fmt.Sprint(s0) + " IMPORTING " + groupID(0, 1), "+OK"},
		{"CLUSTER SETSLOT " + fmt.Sprint(s0) + " IMPORTING " + groupID(0, 1), "+OK"}, // again: the same mark
		{"RPUSH " + k0 + " y", fmt.Sprintf("-MOVED %d 10.0.0.2:7000", s0)},
		{"ASKING", "+OK"},
		{"RPUSH " + k0 + " y", ":1"},
		{"LLEN " + k0, fmt.Sprintf("-MOVED %d 10.0.0.2:7000", s0)},
		// NODE gives it to group 1 and ends the move.
		{"CLUSTER SETSLOT " + fmt.Sprint(s0) + " NODE " + groupID(1, 0), "+OK"},
		{"LLEN " + k0, ":1"},
		{"CLUSTER SETSLOT " + fmt.Sprint(s0) + " NODE " + groupID(1, 2), "+OK"}, // already so: no entry
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	if _, ok := gs.m.Importing(s0); ok || gs.m.Owner(s0) != 1 {
		t.Errorf("slot %d after NODE: owner %d", s0, gs.m.Owner(s0))
	}
	if len(changes) != 5 {
		t.Errorf("%d slot entries, want 5: %v", len(changes), changes)
	}
	// CLUSTER NODES shows the open slots on this master's own line.
	s2 := KeySlot(keyOf(gs.m, 2))
	n.do(c, "CLUSTER", "SETSLOT", fmt.Sprint(s1), "MIGRATING", groupID(2, 1))
	n.do(c, "CLUSTER", "SETSLOT", fmt.Sprint(s2), "IMPORTING", groupID(2, 1))
	nodes := n.do(c, "CLUSTER", "NODES")
	for _, want := range []string{fmt.Sprintf(" [%d->-%s]", s1, groupID(2, 2)), fmt.Sprintf(" [%d-<-%s]", s2, groupID(2, 2))} {
		if i := strings.Index(nodes, want); i < 0 || !strings.Contains(nodes[strings.LastIndex(nodes[:i], "\n")+1:i], "myself,master") {
			t.Errorf("CLUSTER NODES lacks %q on its myself line: %q", want, nodes)
		}
	}
	// ADDSLOTS takes slots for this group; DELSLOTS leaves none unassigned.
	s0b := KeySlot(keyOf(gs.m, 0))
	for _, s := range [][2]string{
		{"CLUSTER ADDSLOTS " + fmt.Sprint(s2), "+OK"},
		{"CLUSTER DELSLOTS " + fmt.Sprint(s2), fmt.Sprintf("-ERR Slot %d is served by this Raft group: delayd leaves no slot unassigned (CLUSTER SETSLOT NODE or ADDSLOTS at the group to take it)", s2)},
		{"CLUSTER DELSLOTS " + fmt.Sprint(s0b), "+OK"},
		{"CLUSTER ADDSLOTS 16384", "-ERR Invalid or out of range slot"},
		{"CLUSTER BUMPEPOCH", "+STILL 11"},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	// The group the slot was taken from is left importing it: it may hold
	// queues of it, which --cluster fix moves before it closes the slot.
	if g, ok := gs.m.Importing(s2); !ok || g != 2 || gs.m.Owner(s2) != 1 || gs.m.Owner(s0b) != 0 {
		t.Errorf("after ADDSLOTS %d: owner %d, importing %d %v (want 2 true); slot %d's owner %d", s2, gs.m.Owner(s2), g, ok, s0b, gs.m.Owner(s0b))
	}
	// A replica of the group refuses SETSLOT.
	gs.views[1].set(func(f *fakeCluster) { f.leader, f.writable = groupID(1, 2), false })
	if got := n.do(c, "CLUSTER", "SETSLOT", "1", "STABLE"); got != "-ERR Please use SETSLOT only with masters." {
		t.Errorf("SETSLOT at a replica: %q", got)
	}
}

// MIGRATE at the leader of group 1: the queues go to the target as
// RESTORE-ASKING, are dropped here once it answers, and are fenced
// meanwhile; a target's error keeps them here.
func TestMigrate(t *testing.T) {
	gs := &fakeGroups{m: cluster.EvenSlots(3), views: []*fakeCluster{newGroupFake(0, 1), newGroupFake(1, 0), newGroupFake(2, 2)}}
	n := groupNode(t, gs, 1)
	c, other := n.client(), n.client()
	tag := keyOf(gs.m, 1)
	a, b := "{"+tag+"}a", "{"+tag+"}b"
	n.do(c, "DELAY.ADD", a, "0", "x", "ID", "j1")
	n.do(c, "DELAY.ADD", a, "60000", "y", "ID", "j2")
	n.do(c, "DELAY.ADD", b, "0", "z", "ID", "j3")
	var sent []string
	var during string
	gs.views[1].send = func(addr string, cmds [][]any) error {
		for _, cmd := range cmds {
			sent = append(sent, fmt.Sprint(addr, " ", cmd[0], " ", cmd[1], " ", cmd[2]))
		}
		during = n.do(other, "DELAY.GET", a, "j1")
		return nil
	}
	for _, s := range [][2]string{
		{"MIGRATE 10.0.0.3 7200 " + a + " 1 5000", "-ERR DB index is out of range"},
		{"MIGRATE 10.0.0.3 port " + a + " 0 5000", "-" + errNotInteger},
		{"MIGRATE 10.0.0.3 7200 " + a + " 0 5000 KEYS " + b, "-ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"},
		{"MIGRATE 10.0.0.3 7200 " + a + " 0 5000 SIDEWAYS", "-" + errSyntax},
		{"MIGRATE 10.0.0.3 7200 {" + tag + "}none 0 5000", "+NOKEY"},
		{"MIGRATE 10.0.0.2 7100 " + a + " 0 5000", "-ERR the target is a member of this Raft group: MIGRATE moves queues to another group"},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	// redis-cli's form: the key argument empty, the keys after KEYS.
	if got := n.do(c, "MIGRATE", "10.0.0.3", "7200", "", "0", "5000", "REPLACE", "AUTH2", "u", "pw", "KEYS", a, b); got != "+OK" {
		t.Fatalf("MIGRATE: %q", got)
	}
	if want := "10.0.0.3:7200 RESTORE-ASKING " + a + " 0; 10.0.0.3:7200 RESTORE-ASKING " + b + " 0"; strings.Join(sent, "; ") != want {
		t.Errorf("sent %q, want %q", strings.Join(sent, "; "), want)
	}
	if during != errMovingLine {
		t.Errorf("a command on a queue being moved: %q, want %q", during, errMovingLine)
	}
	if n.eng.Exists([]byte(a)) || n.eng.Exists([]byte(b)) {
		t.Error("the queues stayed after MIGRATE")
	}
	// COPY keeps the queue; a target's error keeps it too.
	n.do(c, "DELAY.ADD", a, "0", "x", "ID", "j4")
	if got := n.do(c, "MIGRATE", "10.0.0.3", "7200", a, "0", "5000", "COPY"); got != "+OK" || !n.eng.Exists([]byte(a)) {
		t.Errorf("MIGRATE COPY: %q, queue kept %v", got, n.eng.Exists([]byte(a)))
	}
	gs.views[1].send = func(string, [][]any) error { return errors.New("BUSYKEY Target key name already exists.") }
	if got := n.do(c, "MIGRATE", "10.0.0.3", "7200", a, "0", "5000"); got != "-ERR Target instance replied with error: BUSYKEY Target key name already exists." || !n.eng.Exists([]byte(a)) {
		t.Errorf("MIGRATE to a target that refused: %q, queue kept %v", got, n.eng.Exists([]byte(a)))
	}
	if got := n.do(c, "DELAY.GET", a, "j4"); !strings.HasPrefix(got, "*") {
		t.Errorf("the queue is not fenced after a failed MIGRATE: %q", got)
	}
}

var errMovingLine = "-" + errMoving

// What ADDSLOTS and STABLE leave marked, as redis-cli --cluster fix sends
// them after a stopped move: a group that may hold queues of a slot it
// lost keeps its importing mark until it is sent STABLE itself.
func TestSlotFixMarks(t *testing.T) {
	const s = 5461 // group 1's first slot
	type marks struct{ owner, migrating, importing int }
	state := func(m *cluster.SlotMap) marks {
		mg, ok := m.Migrating(s)
		if !ok {
			mg = -1
		}
		return marks{m.Owner(s), mg, importer(&fakeGroups{m: m}, s)}
	}
	with := func(m *cluster.SlotMap, ch cluster.SlotChange) *cluster.SlotMap {
		t.Helper()
		n, err := m.With(ch)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	moving := with(cluster.EvenSlots(3), cluster.SlotChange{Migrating: [][2]int{{s, 2}}, Importing: [][2]int{{s, 2}}})
	for _, tc := range []struct {
		name   string
		m      *cluster.SlotMap
		add    int // ADDSLOTS at this group, or -1
		stable []int
		want   marks
		err    string
	}{
		{name: "a move 1->2 ended by STABLE at its source", m: moving, add: -1, stable: []int{1}, want: marks{1, -1, -1}},
		{name: "... or at its target", m: moving, add: -1, stable: []int{2}, want: marks{1, -1, -1}},
		{name: "STABLE at a group not in the move changes nothing", m: moving, add: -1, stable: []int{0}, want: marks{1, 2, 2}},
		{name: "ADDSLOTS at the target: the source keeps a mark", m: moving, add: 2, want: marks{2, -1, 1}},
		{name: "then STABLE at the new owner keeps it", m: moving, add: 2, stable: []int{2}, want: marks{2, -1, 1}},
		{name: "then STABLE at the old owner, its queues moved, ends it", m: moving, add: 2, stable: []int{2, 1}, want: marks{2, -1, -1}},
		{name: "ADDSLOTS at a third group of a slot open between two", m: moving, add: 0, err: "TRYAGAIN slot 5461 is open between groups 1 and 2"},
		{name: "ADDSLOTS at the owner of its own open slot: the importer keeps a mark", m: moving, add: 1, want: marks{1, -1, 2}},
		{name: "ADDSLOTS of a closed slot", m: cluster.EvenSlots(3), add: 0, want: marks{0, -1, 1}},
	} {
		m := tc.m
		if tc.add >= 0 {
			ch, err := addSlotsChange(&fakeGroups{m: m}, []int{s}, tc.add)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			m = with(m, ch)
		}
		for _, g := range tc.stable {
			if ch, ok := stableChange(&fakeGroups{m: m}, s, g); ok {
				m = with(m, ch)
			}
		}
		if got := state(m); got != tc.want {
			t.Errorf("%s: owner, migrating, importing %v, want %v", tc.name, got, tc.want)
		}
	}
}

// IMPORTING of a slot another group imports is refused: the map keeps one
// importer a slot, and that group may hold queues of it.
func TestSetSlotImportingTaken(t *testing.T) {
	gs := &fakeGroups{m: cluster.EvenSlots(3), views: []*fakeCluster{newGroupFake(0, 1), newGroupFake(1, 0), newGroupFake(2, 2)}}
	gs.views[0].change = func(ch cluster.SlotChange) error {
		m, err := gs.m.With(ch)
		if err == nil {
			gs.m = m
		}
		return err
	}
	s0 := KeySlot(keyOf(gs.m, 0))
	m, err := gs.m.With(cluster.SlotChange{Importing: [][2]int{{s0, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	gs.m = m
	n := groupNode(t, gs, 1)
	c := n.client()
	want := fmt.Sprintf("-ERR Slot %d is being imported by group 2: finish that move first (redis-cli --cluster fix)", s0)
	if got := n.do(c, "CLUSTER", "SETSLOT", fmt.Sprint(s0), "IMPORTING", groupID(0, 1)); got != want {
		t.Errorf("IMPORTING of a slot group 2 imports: %q, want %q", got, want)
	}
	if g, ok := gs.m.Importing(s0); !ok || g != 2 {
		t.Errorf("the importer after the refusal: %d %v, want 2", g, ok)
	}
}

// groupNode is this process's address of group g, over an engine of its own.
func groupNode(t *testing.T, gs *fakeGroups, g int) *node {
	t.Helper()
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &node{t: t, d: New(Options{Engine: eng, Config: map[string]string{}, Cluster: gs.views[g], Groups: gs, Group: g}), eng: eng}
}
