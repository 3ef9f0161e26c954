package commands

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/delayd/delayd/cluster"
)

// The slot map's subcommands: SETSLOT, ADDSLOTS, DELSLOTS, BUMPEPOCH as
// Redis's, and delayd's own SLOTCHANGE and SLOTINDEX, which every node
// sends group 0's leader (docs/decisions/slot-moves.md).

// slotChanger is group 0's Cluster: the keeper of the slot map.
type slotChanger interface {
	ChangeSlots(ch cluster.SlotChange) (index uint64, err error)
}

// clusterSlotChange is CLUSTER SLOTCHANGE json, delayd's own: group 0's
// leader commits a change of the slot map (cluster.SlotChange) and answers
// the entry's log index, which the node that sent it waits to apply; a
// follower passes it on to the leader. Only group 0's addresses keep the
// map.
func clusterSlotChange(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	sc, ok := cl.(slotChanger)
	if !ok || d.opts.Groups == nil || d.opts.Group != 0 {
		c.W.Error("ERR CLUSTER SLOTCHANGE is for the addresses of Raft group 0 of a cluster of several groups")
		return
	}
	var ch cluster.SlotChange
	if err := json.Unmarshal(args[2], &ch); err != nil {
		c.W.Error("ERR syntax error: " + err.Error())
		return
	}
	index, err := sc.ChangeSlots(ch)
	if err != nil {
		c.W.Error(codedErr(err))
		return
	}
	c.W.Int(int64(index))
}

// slotIndexer is group 0's Cluster, asked how far its log is applied.
type slotIndexer interface {
	SlotIndex() (uint64, error)
}

// clusterSlotIndex is CLUSTER SLOTINDEX, delayd's own: group 0's leader
// answers the index it applied, once a majority confirmed it leads. A new
// leader of another group waits until its node applied that far before it
// takes writes (cluster.Config.MapFresh): it then routes by a slot map at
// least as new as any change answered.
func clusterSlotIndex(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	si, ok := cl.(slotIndexer)
	if !ok || d.opts.Groups == nil || d.opts.Group != 0 {
		c.W.Error("ERR CLUSTER SLOTINDEX is for the addresses of Raft group 0 of a cluster of several groups")
		return
	}
	index, err := si.SlotIndex()
	if err != nil {
		c.W.Error(codedErr(err))
		return
	}
	c.W.Int(int64(index))
}

// clusterSetSlot is CLUSTER SETSLOT slot IMPORTING|MIGRATING|NODE id |
// STABLE, as Redis's, sent to a group's leader: each changes the slot map
// by an entry in group 0's log (docs/decisions/slot-moves.md), so every
// address of every node routes by it alike. The node ids are addresses'
// (one per group per node): an id names its group. STABLE ends the slot's
// move on both sides (the map holds one move per slot).
func clusterSetSlot(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	gs := d.opts.Groups
	if gs == nil {
		c.W.Error("ERR CLUSTER SETSLOT moves slots between Raft groups: this cluster has one (--cluster-groups)")
		return
	}
	sc, ok := gs.View(0).(slotChanger)
	if !ok {
		c.W.Error(errClusterDown)
		return
	}
	if !cl.Writable() {
		c.W.Error("ERR Please use SETSLOT only with masters.")
		return
	}
	n, ok := parseInt(args[2])
	if !ok || n < 0 || n >= Slots {
		c.W.Error("ERR Invalid or out of range slot")
		return
	}
	slot, my := int(n), d.opts.Group
	action := strings.ToLower(string(args[3]))
	known := action == "stable" || action == "migrating" || action == "importing" || action == "node"
	if !known || (action == "stable" && len(args) != 4) || (action != "stable" && len(args) != 5) {
		c.W.Error("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP")
		return
	}
	if !d.freshSlots(c) {
		return
	}
	var ch cluster.SlotChange
	if action == "stable" {
		var ok bool
		if ch, ok = stableChange(gs, slot, my); !ok {
			c.W.Status("OK")
			return
		}
	} else {
		id := string(args[4])
		g, ok := d.groupOf(cl, id)
		if !ok {
			c.W.Error("ERR I don't know about node " + id)
			return
		}
		switch action {
		case "migrating":
			if gs.Owner(slot) != my {
				c.W.Error("ERR I'm not the owner of hash slot " + strconv.Itoa(slot))
				return
			}
			ch.Migrating = [][2]int{{slot, g}}
		case "importing":
			if gs.Owner(slot) == my {
				c.W.Error("ERR I'm already the owner of hash slot " + strconv.Itoa(slot))
				return
			}
			if in := importer(gs, slot); in >= 0 && in != my {
				// One importer a slot: taking its mark would leave that
				// group's queues of the slot unmarked (ADDSLOTS, below).
				c.W.Error(fmt.Sprintf("ERR Slot %d is being imported by group %d: finish that move first (redis-cli --cluster fix)", slot, in))
				return
			}
			ch.Importing = [][2]int{{slot, my}}
		case "node":
			if gs.Owner(slot) == my && g != my {
				keys, ok := keysInSlot(d, c, slot, 1)
				if !ok {
					return
				}
				if len(keys) > 0 {
					c.W.Error("ERR Can't assign hashslot " + strconv.Itoa(slot) + " to a different node while I still hold keys for this hash slot.")
					return
				}
			}
			if gs.Owner(slot) == g {
				// Already its owner (the NODE redis-cli sends to every
				// master after the first): end the move only, if any.
				_, m := gs.Migrating(slot)
				i, imp := gs.Importing(slot)
				if !m && !imp {
					c.W.Status("OK")
					return
				}
				if !m && i == my && g != my {
					// This group lost the slot holding queues of it
					// (ADDSLOTS): they must reach the owner before the mark
					// goes (STABLE after --cluster fix's MIGRATE), or no
					// client and no check would find them again.
					keys, ok := keysInSlot(d, c, slot, 1)
					if !ok {
						return
					}
					if len(keys) > 0 {
						c.W.Status("OK")
						return
					}
				}
			}
			ch.Assign = [][3]int{{slot, slot, g}}
		}
	}
	if _, err := sc.ChangeSlots(ch); err != nil {
		c.W.Error(codedErr(err))
		return
	}
	c.W.Status("OK")
}

// clusterAddSlots is CLUSTER ADDSLOTS slot ..., sent to a group's leader:
// the slots become its group's, by one entry of group 0's log, their
// moves ended. A slot is never unassigned here (DELSLOTS), so one of
// another group is taken from it: what redis-cli --cluster fix means when
// it gives an open slot to the group holding most of its queues, before it
// moves the others' queues there. That group is left importing the slot.
func clusterAddSlots(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	sc, slots, ok := d.slotArgs(c, cl, args, "ADDSLOTS")
	if !ok {
		return
	}
	ch, err := addSlotsChange(d.opts.Groups, slots, d.opts.Group)
	if err != nil {
		c.W.Error(err.Error())
		return
	}
	if _, err := sc.ChangeSlots(ch); err != nil {
		c.W.Error(codedErr(err))
		return
	}
	c.W.Status("OK")
}

// addSlotsChange is the slot entry of CLUSTER ADDSLOTS slots at group g's
// leader: each slot becomes g's. A group other than g that may hold queues
// of the slot (the owner it is taken from, the group importing it: a move
// stopped midway) keeps an importing mark, an open slot to --cluster check,
// until fix has moved them to g and sent STABLE there; were the slot closed
// now, a fix stopped after this would leave them where no client goes. The
// map marks one importer a slot, so a slot open between two groups other
// than g is refused: redis-cli --cluster fix picks such an owner when the
// owner's leader was not taking writes as it looked (no master claimed the
// slot), and the owner's queues were left behind (TestChaosSlotMoves with a
// kill in every move). Run again once the groups have leaders, fix finishes
// the move between the two.
func addSlotsChange(gs Groups, slots []int, g int) (cluster.SlotChange, error) {
	var ch cluster.SlotChange
	for _, s := range slots {
		ch.Assign = append(ch.Assign, [3]int{s, s, g})
		keep := -1
		for _, h := range [2]int{gs.Owner(s), importer(gs, s)} {
			switch {
			case h < 0 || h == g || h == keep:
			case keep >= 0:
				return ch, fmt.Errorf("TRYAGAIN slot %d is open between groups %d and %d: finish its move there (redis-cli --cluster fix, once both have a master)", s, keep, h)
			default:
				keep = h
			}
		}
		if keep >= 0 {
			ch.Importing = append(ch.Importing, [2]int{s, keep})
		}
	}
	return ch, nil
}

// importer is the group importing slot, -1 when none.
func importer(gs Groups, slot int) int {
	if g, ok := gs.Importing(slot); ok {
		return g
	}
	return -1
}

// stableChange is the slot entry of CLUSTER SETSLOT slot STABLE at group
// g's leader, and false when it changes nothing. As a Redis node's STABLE
// clears its own state only, it ends g's part of the slot's move: the move
// between the owner and the group it migrates to (both marks) when g is
// one of the two, or g's importing mark. The mark of a group that holds
// queues of a slot it lost (ADDSLOTS, above) stays until that group itself
// is sent STABLE: fix sends it there once it has moved them. Before, a
// STABLE at another importer cleared it and the queues were lost to every
// client (TestChaosSlotMoves with a kill in every move).
func stableChange(gs Groups, slot, g int) (cluster.SlotChange, bool) {
	owner, in := gs.Owner(slot), importer(gs, slot)
	to, migrating := gs.Migrating(slot)
	ch := cluster.SlotChange{Stable: []int{slot}}
	switch {
	case migrating && (g == owner || g == to):
		if in >= 0 && in != to {
			ch.Importing = [][2]int{{slot, in}} // another group's mark stays
		}
	case in == g:
		if migrating {
			ch.Migrating = [][2]int{{slot, to}} // not g's move: it stays
		}
	default:
		return ch, false
	}
	return ch, true
}

// clusterDelSlots is CLUSTER DELSLOTS slot ...: every slot is some group's
// in delayd, so a slot this group owns is refused (give it away with
// SETSLOT NODE or ADDSLOTS at the other group); one it does not own is,
// as Redis would leave it, not this address's: OK.
func clusterDelSlots(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	_, slots, ok := d.slotArgs(c, cl, args, "DELSLOTS")
	if !ok {
		return
	}
	for _, s := range slots {
		if d.opts.Groups.Owner(s) == d.opts.Group {
			c.W.Error("ERR Slot " + strconv.Itoa(s) + " is served by this Raft group: delayd leaves no slot unassigned (CLUSTER SETSLOT NODE or ADDSLOTS at the group to take it)")
			return
		}
	}
	c.W.Status("OK")
}

// clusterBumpEpoch is CLUSTER BUMPEPOCH: epochs are Raft terms, which only
// elections raise; it says so as Redis says an epoch it kept.
func clusterBumpEpoch(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	c.W.Status("STILL " + strconv.FormatUint(cl.Term(), 10))
}

// slotArgs checks ADDSLOTS and DELSLOTS: several groups, sent to a leader,
// slots in range; it answers the refusal itself.
func (d *Dispatcher) slotArgs(c *Client, cl ClusterView, args [][]byte, name string) (slotChanger, []int, bool) {
	gs := d.opts.Groups
	if gs == nil {
		c.W.Error("ERR CLUSTER " + name + ": every slot is this Raft group's; slots move between groups of a cluster of several (--cluster-groups)")
		return nil, nil, false
	}
	sc, ok := gs.View(0).(slotChanger)
	if !ok {
		c.W.Error(errClusterDown)
		return nil, nil, false
	}
	if !cl.Writable() {
		c.W.Error("ERR Please use " + name + " only with masters.")
		return nil, nil, false
	}
	var slots []int
	for _, a := range args[2:] {
		n, ok := parseInt(a)
		if !ok || n < 0 || n >= Slots {
			c.W.Error("ERR Invalid or out of range slot")
			return nil, nil, false
		}
		slots = append(slots, int(n))
	}
	if !d.freshSlots(c) {
		return nil, nil, false
	}
	return sc, slots, true
}

// freshSlots brings this node's slot map up to group 0's leader's before
// SETSLOT, ADDSLOTS or DELSLOTS decides by it (who owns the slot, is it
// moving): a node's copy of group 0 may lag, and redis-cli sends the next
// step to another group at once. A DELSLOTS that still saw the slot as its
// own, just after ADDSLOTS gave it away, stopped --cluster fix before it
// moved this group's queues (TestChaosSlotMoves, seed 1795944028760553740).
// One round trip to group 0's leader; these are an operator's commands.
func (d *Dispatcher) freshSlots(c *Client) bool {
	f, ok := d.opts.Groups.View(0).(interface{ SlotsFresh() error })
	if !ok {
		c.W.Error(errClusterDown)
		return false
	}
	if err := f.SlotsFresh(); err != nil {
		c.W.Error("TRYAGAIN this node's slot map is behind group 0's leader's: " + err.Error())
		return false
	}
	return true
}

// groupOf is the group whose member has node id id (each address has its
// own id).
func (d *Dispatcher) groupOf(cl ClusterView, id string) (int, bool) {
	gs := d.opts.Groups
	for g := 0; g < gs.Count(); g++ {
		v := cl
		if g != d.opts.Group {
			v = gs.View(g)
		}
		if v == nil {
			continue
		}
		for _, n := range v.Nodes() {
			if n.ID == id {
				return g, true
			}
		}
	}
	return 0, false
}
