package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/redis/go-redis/v9"
)

// The slot map of a cluster of several groups is group 0's state, kept by
// its Raft log as CockroachDB keeps its meta range (docs/decisions/
// slot-moves.md): slot entries assign ranges to groups and mark slots
// moving, every member of group 0 applies them, and every process runs
// group 0, so each of its addresses routes by the map its group 0 applied.
// The first entry is the even split, written by group 0's first leader
// that finds none: the bootstrap's, or, on a cluster made before the map
// was logged, the same split its nodes computed from the groups file.
//
// A slot entry is JSON (SlotChange): a handful per moved slot, far off
// the hot paths. A one-group cluster never writes one.

// entrySlots is the Raft entry kind of a slot change (JSON SlotChange).
const entrySlots byte = 4

// SlotChange is one slot entry; from an empty map, a whole map (the form
// a snapshot keeps it in).
type SlotChange struct {
	// Groups starts a map: an entry that has it applies to an empty map
	// only, so a second first entry (two leaders that each found none)
	// changes nothing.
	Groups int `json:"groups,omitempty"`
	// Assign gives each [first, last] range to its group and ends any move
	// of its slots (CLUSTER SETSLOT NODE).
	Assign [][3]int `json:"assign,omitempty"`
	// Migrating marks [slot, group] moving from its owner to group (SETSLOT
	// MIGRATING at the owner); Importing marks [slot, group] taken in by
	// group (SETSLOT IMPORTING at the target); Stable ends a slot's move,
	// its owner unchanged.
	Migrating [][2]int `json:"migrating,omitempty"`
	Importing [][2]int `json:"importing,omitempty"`
	Stable    []int    `json:"stable,omitempty"`
	// AddGroup adds group AddGroup, owning no slot, to a map of AddGroup
	// groups (redis-cli --cluster add-node; docs/decisions/add-node.md):
	// Hosts are the processes that run it (group 0's node ids), the first
	// bootstrapping it and the others joining it through First, its
	// address there. A map of another size refuses it (two adds at once:
	// the second is made again on the new map).
	AddGroup int      `json:"add_group,omitempty"`
	Hosts    []string `json:"hosts,omitempty"`
	First    string   `json:"first,omitempty"`
	// RemoveGroup drops the map's last group, which owns no slot and has
	// no move open (redis-cli --cluster del-node of its master); Forget
	// are its addresses' node ids, which a FORGET repeated answers OK.
	RemoveGroup int      `json:"remove_group,omitempty"`
	Forget      []string `json:"forget,omitempty"`
}

var errNoSlotMap = errors.New("cluster: a slot change before the map's first entry")

// apply returns the map m becomes with ch (m is not changed; nil is the
// empty map). A change naming a group or slot out of range is refused
// whole.
func (m *SlotMap) apply(ch SlotChange) (*SlotMap, error) {
	if ch.Groups != 0 && ch.AddGroup != 0 || ch.RemoveGroup != 0 && (ch.Groups != 0 || ch.AddGroup != 0 || len(ch.Assign) > 0) {
		return nil, errors.New("cluster: a slot change both starts a map and adds or removes a group")
	}
	if ch.Groups != 0 {
		if m != nil {
			return m, nil
		}
		if ch.Groups < 1 || ch.Groups > MaxGroups {
			return nil, fmt.Errorf("cluster: a slot map of %d groups", ch.Groups)
		}
		m = &SlotMap{n: ch.Groups}
	} else if m == nil {
		return nil, errNoSlotMap
	}
	groups := m.n
	if ch.AddGroup != 0 {
		groups++
	}
	group := func(g int) error {
		if g < 0 || g >= groups {
			return fmt.Errorf("cluster: slot change names group %d of %d", g, groups)
		}
		return nil
	}
	slot := func(s int) error {
		if s < 0 || s >= Slots {
			return fmt.Errorf("cluster: slot change names slot %d", s)
		}
		return nil
	}
	for _, a := range ch.Assign {
		if err := errors.Join(slot(a[0]), slot(a[1]), group(a[2])); err != nil || a[0] > a[1] {
			return nil, fmt.Errorf("cluster: slot change assigns %v: %v", a, err)
		}
	}
	for _, p := range append(append([][2]int(nil), ch.Migrating...), ch.Importing...) {
		if err := errors.Join(slot(p[0]), group(p[1])); err != nil {
			return nil, err
		}
	}
	for _, s := range ch.Stable {
		if err := slot(s); err != nil {
			return nil, err
		}
	}
	if ch.AddGroup != 0 {
		switch {
		case ch.AddGroup != m.n:
			return nil, fmt.Errorf("cluster: a slot change adds group %d to a map of %d groups", ch.AddGroup, m.n)
		case m.n >= MaxGroups:
			return nil, fmt.Errorf("cluster: a map has %d groups at most", MaxGroups)
		case len(ch.Hosts) == 0 || ch.First == "":
			return nil, fmt.Errorf("cluster: a slot change adds group %d with no host", ch.AddGroup)
		}
	}
	if g := ch.RemoveGroup; g != 0 {
		if g != m.n-1 {
			return nil, fmt.Errorf("cluster: a slot change removes group %d of a map of %d groups (the last only)", g, m.n)
		}
		for s := 0; s < Slots; s++ {
			if int(m.owner[s]) == g || m.migrating[s] == uint8(g+1) || m.importing[s] == uint8(g+1) {
				return nil, fmt.Errorf("cluster: a slot change removes group %d, which holds slot %d", g, s)
			}
		}
	}
	n := *m
	if ch.AddGroup != 0 {
		n.n++ // before the ranges: a change may give the new group slots
	}
	if ch.RemoveGroup != 0 {
		n.n--
	}
	for _, a := range ch.Assign {
		for s := a[0]; s <= a[1]; s++ {
			n.owner[s], n.migrating[s], n.importing[s] = uint8(a[2]), 0, 0
		}
	}
	for _, s := range ch.Stable {
		n.migrating[s], n.importing[s] = 0, 0
	}
	for _, p := range ch.Migrating {
		n.migrating[p[0]] = uint8(p[1] + 1)
	}
	for _, p := range ch.Importing {
		n.importing[p[0]] = uint8(p[1] + 1)
	}
	return &n, nil
}

// With is the map m becomes with ch, as group 0's members apply it (m is
// unchanged).
func (m *SlotMap) With(ch SlotChange) (*SlotMap, error) { return m.apply(ch) }

// Change is the whole map as one entry: what makes it from an empty map.
func (m *SlotMap) Change() SlotChange {
	ch := SlotChange{Groups: m.n}
	for g := 0; g < m.n; g++ {
		for _, r := range m.Ranges(g) {
			ch.Assign = append(ch.Assign, [3]int{r[0], r[1], g})
		}
	}
	for s := 0; s < Slots; s++ {
		if g, ok := m.Migrating(s); ok {
			ch.Migrating = append(ch.Migrating, [2]int{s, g})
		}
		if g, ok := m.Importing(s); ok {
			ch.Importing = append(ch.Importing, [2]int{s, g})
		}
	}
	return ch
}

// UseSlots makes this Cluster, group 0 of a cluster of groups groups, the
// keeper of the slot map: its leader writes the first entry when the log
// has none, and on is called, in apply order, with each map applied (nil
// when a snapshot restored holds none). Only before Start.
func (c *Cluster) UseSlots(groups int, on func(*SlotMap)) {
	c.groups.Store(int32(groups))
	c.onSlots = on
}

// SetGroups is UseSlots's number, for a node in no group that learns it
// when it is met (CLUSTER MEET), before it joins group 0 and applies any
// of its entries.
func (c *Cluster) SetGroups(groups int) { c.groups.Store(int32(groups)) }

// OnGroupChange makes on hear, in apply order, of each group added to the
// map or removed from it (a slot change with AddGroup or RemoveGroup),
// after the map was applied. It is called as group 0 applies: it must
// not wait. Only before Start.
func (c *Cluster) OnGroupChange(on func(SlotChange)) { c.onGroupChange = on }

// Slots is the slot map this node's group 0 applied last; nil before the
// first slot entry (or with one group).
func (c *Cluster) Slots() *SlotMap { return c.fsm.slots.Load() }

// ChangeSlots commits a slot change through group 0's leader: this node if
// it leads, else the leader, asked over RESP (CLUSTER SLOTCHANGE, which
// answers the entry's index). It returns the entry's index once the entry
// is committed and applied here too, so that this node routes by it.
func (c *Cluster) ChangeSlots(ch SlotChange) (uint64, error) {
	b, err := json.Marshal(ch)
	if err != nil {
		return 0, err
	}
	if !c.Writable() {
		leader, ok := c.Leader()
		if !ok || leader.Addr == "" {
			return 0, errNoLeader
		}
		cl := c.slotClient(leader.Addr)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		index, err := cl.Do(ctx, "CLUSTER", "SLOTCHANGE", string(b)).Uint64()
		if err != nil {
			return 0, err
		}
		if !c.waitApplied(index, 5*time.Second) {
			return index, fmt.Errorf("TRYAGAIN the slot change is committed (index %d) but not applied here yet", index)
		}
		return index, nil
	}
	if _, err := c.fsm.baseSlots(ch).apply(ch); err != nil {
		return 0, fmt.Errorf("ERR %v", err)
	}
	f := c.r().Apply(append([]byte{entrySlots}, b...), 10*time.Second)
	if err := f.Error(); err != nil {
		return 0, err
	}
	c.nudgeFollowers()
	return f.Index(), nil
}

// nudgeFollowers tells the followers at once what the leader has
// committed: a barrier entry, whose append carries the commit index, not
// waited for. Without it they learn it from the next write's append, or
// after Raft's CommitTimeout (50 ms) when none comes, and a reshard waits
// for every node to apply each slot change.
func (c *Cluster) nudgeFollowers() {
	if r := c.r(); r != nil {
		r.Barrier(0)
	}
}

// nudgeAfter is how long after a batch commits its followers are told,
// if no append has told them meanwhile.
const nudgeAfter = 5 * time.Millisecond

// armNudge, called as an engine batch commits on the leader, makes sure
// the followers learn of it soon: Raft tells them only with the next
// append, or after CommitTimeout (50 ms) when none comes, and READONLY
// reads on a follower of a group that went quiet would lag that long. A
// timer, not a loop: an idle group wakes for nothing.
func (c *Cluster) armNudge() {
	if c.nudging.CompareAndSwap(false, true) {
		time.AfterFunc(nudgeAfter, c.nudgeIfSettled)
	}
}

// nudgeIfSettled nudges the followers once every entry is committed; with
// entries in flight, their commit will arm it again.
func (c *Cluster) nudgeIfSettled() {
	c.nudging.Store(false)
	r := c.r()
	if r == nil || r.State() != raft.Leader || r.LastIndex() != r.CommitIndex() {
		return
	}
	r.Barrier(0)
}

// SlotsFresh returns once this node, of group 0, has applied every slot
// change group 0's leader had applied when asked (CLUSTER SLOTINDEX): a
// change answered to redis-cli was applied there first, so this node then
// routes by a map at least as new as any answered. At the leader itself
// it returns at once: its map is the newest.
func (c *Cluster) SlotsFresh() error {
	if c.Writable() {
		return nil
	}
	leader, ok := c.Leader()
	if !ok || leader.Addr == "" {
		return errNoLeader
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	index, err := c.slotClient(leader.Addr).Do(ctx, "CLUSTER", "SLOTINDEX").Uint64()
	if err != nil {
		return err
	}
	if !c.waitApplied(index, 5*time.Second) {
		return fmt.Errorf("group 0's log applied to %d here, short of the leader's %d", c.fsm.done.Load(), index)
	}
	return nil
}

// SlotIndex, at group 0's leader, is the index it applied, once it has
// checked with a majority that it still leads (a deposed leader's would
// miss the changes of its successor).
func (c *Cluster) SlotIndex() (uint64, error) {
	r := c.r()
	if r == nil || !c.Writable() {
		return 0, errNoLeader
	}
	if err := r.VerifyLeader().Error(); err != nil {
		return 0, err
	}
	c.nudgeFollowers() // the asker waits to apply what this returns
	return r.AppliedIndex(), nil
}

// slotClient is a client of group 0's leader at addr, kept while it leads:
// a reshard sends it a change per slot and end.
func (c *Cluster) slotClient(addr string) *redis.Client {
	c.slotMu.Lock()
	defer c.slotMu.Unlock()
	if c.slotCl != nil && c.slotAddr == addr {
		return c.slotCl
	}
	if c.slotCl != nil {
		c.slotCl.Close()
	}
	c.slotCl, c.slotAddr = c.client(addr), addr
	return c.slotCl
}

// waitApplied waits until this node applied index, its effects in place
// (the slot map routes by it), at most d, and says whether it did. Raft's
// AppliedIndex moves when it hands entries to the state machine, before
// they are applied; and the entries that are no command (a new leader's
// no-op, a barrier) never reach it: so once AppliedIndex is there, the
// last command at or before index must be applied too.
func (c *Cluster) waitApplied(index uint64, d time.Duration) bool {
	end := time.Now().Add(d)
	for c.r().AppliedIndex() < index {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	for last := c.lastCommand(index); c.fsm.done.Load() < last; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// lastCommand is the index of the last command entry at or before index
// in this node's log, 0 if none is within 64 entries or the log no longer
// holds it (a snapshot the state machine restored covers it).
func (c *Cluster) lastCommand(index uint64) uint64 {
	for i := index; i > 0 && index-i < 64; i-- {
		var l raft.Log
		if err := c.store.GetLog(i, &l); err != nil {
			return 0
		}
		if l.Type == raft.LogCommand {
			return i
		}
	}
	return 0
}

// seedSlots writes the map's first entry, the even split, when group 0's
// new leader finds none applied (after its barrier, so none committed).
func (c *Cluster) seedSlots() {
	n := int(c.groups.Load())
	if n < 2 || c.Slots() != nil {
		return
	}
	if _, err := c.ChangeSlots(EvenSlots(n).Change()); err != nil {
		c.log.Warn().Err(err).Msg("cluster: the slot map's first entry failed; the next leader writes it")
	}
}

// applySlots applies a slot entry (under fsm.mu). One that does not apply
// is logged and left out on every member alike, its change validated by
// the same map.
func (f *fsm) applySlots(b []byte, index uint64) error {
	var ch SlotChange
	err := json.Unmarshal(b, &ch)
	var m *SlotMap
	if err == nil {
		m, err = f.baseSlots(ch).apply(ch)
	}
	if err != nil {
		f.c.log.Error().Err(err).Uint64("index", index).Msg("cluster: a slot entry did not apply")
		return err
	}
	f.setSlots(m)
	if (ch.AddGroup != 0 || ch.RemoveGroup != 0) && f.c.onGroupChange != nil {
		f.c.onGroupChange(ch)
	}
	return nil
}

// setSlots makes m the map (under fsm.mu) and tells the process.
func (f *fsm) setSlots(m *SlotMap) {
	f.slots.Store(m)
	if f.c.onSlots != nil {
		f.c.onSlots(m)
	}
}

// baseSlots is the map a change applies to: the one applied, or, before
// any (a snapshot that held none restored), the even split every node
// routes by meanwhile; a first entry applies to none.
func (f *fsm) baseSlots(ch SlotChange) *SlotMap {
	m := f.slots.Load()
	if n := int(f.c.groups.Load()); m == nil && ch.Groups == 0 && n > 1 {
		return EvenSlots(n)
	}
	return m
}

// slotsJSON is the map as a snapshot keeps it; nil for none, and for the
// bootstrap's even split with no move open: a snapshot of a cluster whose
// slots never moved is framed as before maps were kept (an older member
// reads it), and restores as no map, which routes alike. A map with a
// group added is never that split.
func (f *fsm) slotsJSON() ([]byte, error) {
	m := f.slots.Load()
	if m == nil || (m.n == int(f.c.groups.Load()) && *m == *EvenSlots(m.n)) {
		return nil, nil
	}
	return json.Marshal(m.Change())
}

// restoreSlots makes a snapshot's map (nil: none) the map.
func (f *fsm) restoreSlots(b []byte) error {
	var m *SlotMap
	if len(b) > 0 {
		var ch SlotChange
		if err := json.Unmarshal(b, &ch); err != nil {
			return fmt.Errorf("snapshot's slot map: %w", err)
		}
		var err error
		if m, err = (*SlotMap)(nil).apply(ch); err != nil {
			return fmt.Errorf("snapshot's slot map: %w", err)
		}
	}
	f.setSlots(m)
	return nil
}

// Send runs cmds, pipelined, on the node whose clients connect at addr
// (MIGRATE's target), as user with password when one is given (else as
// this node's own connections authenticate), each command within timeout.
// It returns the first error, the target's error reply as it is.
func (c *Cluster) Send(addr, user, password string, timeout time.Duration, cmds [][]any) error {
	opts := &redis.Options{
		Addr: addr, Password: c.cfg.Password, MaxRetries: -1, DialTimeout: timeout,
		ReadTimeout: timeout, WriteTimeout: timeout, Protocol: 2, DisableIdentity: true,
		TLSConfig: c.respTLS(addr),
	}
	if password != "" {
		opts.Username, opts.Password = user, password
	}
	cl := redis.NewClient(opts)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Duration(len(cmds))*timeout/10)
	defer cancel()
	pipe := cl.Pipeline()
	res := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		res[i] = pipe.Do(ctx, args...)
	}
	_, err := pipe.Exec(ctx)
	for _, r := range res {
		if r.Err() != nil {
			return r.Err()
		}
	}
	return err
}
