package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
)

// Several Raft groups on one node (docs/decisions/raft-groups.md): each
// group is a Cluster of its own, with its own engine, directory, node id
// and addresses; a SlotMap says which group owns which slot. The number of
// groups is set when the cluster is bootstrapped, kept in the data dir,
// learned by joiners from a member; the map itself is group 0's to keep,
// in its Raft log (slots.go).

// Slots is the number of hash slots, as in Redis Cluster.
const Slots = 16384

// MaxGroups bounds --cluster-groups: each group costs a Raft instance, an
// engine and two ports per node.
const MaxGroups = 64

// SlotMap says which group owns each slot, and which slots are moving
// between groups (CLUSTER SETSLOT MIGRATING/IMPORTING). A map is never
// changed once shared: a change makes a new one (SlotMap.apply).
type SlotMap struct {
	n     int
	owner [Slots]uint8
	// A moving slot's groups, plus one (0: not moving): the group it
	// migrates to (marked by its owner), the group importing it (marked by
	// that group).
	migrating, importing [Slots]uint8
}

// EvenSlots splits the slots in order over n groups: group g owns
// g*Slots/n up to (g+1)*Slots/n - 1.
func EvenSlots(n int) *SlotMap {
	m := &SlotMap{n: n}
	for g := 0; g < n; g++ {
		for s := g * Slots / n; s < (g+1)*Slots/n; s++ {
			m.owner[s] = uint8(g)
		}
	}
	return m
}

// Groups is how many groups the slots are split over.
func (m *SlotMap) Groups() int { return m.n }

// Owner is the group owning slot (0 <= slot < Slots). O(1).
func (m *SlotMap) Owner(slot int) int { return int(m.owner[slot]) }

// SameOwners says whether o gives every slot to the group m gives it to.
func (m *SlotMap) SameOwners(o *SlotMap) bool { return m.owner == o.owner }

// Migrating is the group slot is being moved to, if it is.
func (m *SlotMap) Migrating(slot int) (int, bool) {
	return int(m.migrating[slot]) - 1, m.migrating[slot] != 0
}

// Importing is the group taking slot in, if one is.
func (m *SlotMap) Importing(slot int) (int, bool) {
	return int(m.importing[slot]) - 1, m.importing[slot] != 0
}

// Ranges lists group g's slots as inclusive [start, end] ranges, in order.
func (m *SlotMap) Ranges(g int) [][2]int {
	var out [][2]int
	for s := 0; s < Slots; s++ {
		if int(m.owner[s]) != g {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k][1] == s-1 {
			out[k][1] = s
		} else {
			out = append(out, [2]int{s, s})
		}
	}
	return out
}

// GroupDir is where group g keeps its Raft data: group 0 in the node's
// dir, as a one-group node always did; the others in dir/group-g.
func GroupDir(dir string, g int) string {
	if g == 0 {
		return dir
	}
	return filepath.Join(dir, "group-"+strconv.Itoa(g))
}

// ShiftPort is addr with its port moved by off: group g's addresses are
// the node's shifted by g times the port step. "" stays "".
func ShiftPort(addr string, off int) (string, error) {
	if addr == "" || off == 0 {
		return addr, nil
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", fmt.Errorf("%s: port %q: %w", addr, p, err)
	}
	if port+off < 1 || port+off > 65535 {
		return "", fmt.Errorf("%s: port %d + %d is not a TCP port", addr, port, off)
	}
	return net.JoinHostPort(host, strconv.Itoa(port+off)), nil
}

// groupsFile holds how many groups the node's cluster was bootstrapped
// with, and, on a node that joined, the addresses it joined each group
// through. Groups added since (add-node) are listed past the count: the
// map in group 0's log is the truth, the file its cache for the start.
const groupsFile = "cluster-groups"

// Layout is what groupsFile says: the number of groups the bootstrap split
// the slots over and, for a node that joined or a cluster that grew, the
// member's address for each group (one per line after the count; "" is a
// group this node bootstrapped), NotHeld for a group this node holds no
// replica of.
type Layout struct {
	Groups int
	Join   []string
	// Voters is, as AskLayout read it, each group's voters (-1: not said);
	// never kept.
	Voters []int
}

// NotHeld stands in groupsFile for the address of a group this node holds
// no replica of (the group had its --cluster-replicas when it joined).
const NotHeld = "-"

// noJoin stands in groupsFile for "" (a group this node bootstrapped) when
// a later line follows: the file is read by fields.
const noJoin = "+"

// Held says whether this node runs group g.
func (l Layout) Held(g int) bool { return g >= len(l.Join) || l.Join[g] != NotHeld }

// Total is the number of groups: the bootstrap's, plus those added since.
func (l Layout) Total() int { return max(l.Groups, len(l.Join)) }

// SetJoin records how this node holds group g (an address, "" for one it
// bootstrapped, NotHeld), the groups before it being held as they were.
func (l *Layout) SetJoin(g int, join string) {
	for len(l.Join) <= g {
		l.Join = append(l.Join, "")
	}
	l.Join[g] = join
}

// ReadLayout reads dir's groupsFile; ok is false when there is none (a
// node that never ran several groups: one group).
func ReadLayout(dir string) (l Layout, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, groupsFile))
	if errors.Is(err, os.ErrNotExist) {
		return Layout{Groups: 1}, false, nil
	}
	if err != nil {
		return l, false, err
	}
	lines := strings.Fields(string(b))
	if len(lines) == 0 {
		return l, false, fmt.Errorf("%s: empty", filepath.Join(dir, groupsFile))
	}
	n, err := strconv.Atoi(lines[0])
	if err != nil || n < 1 || n > MaxGroups {
		return l, false, fmt.Errorf("%s: %q is not a number of groups", filepath.Join(dir, groupsFile), lines[0])
	}
	join := lines[1:]
	for i, a := range join {
		if a == noJoin {
			join[i] = ""
		}
	}
	return Layout{Groups: n, Join: join}, true, nil
}

// WriteLayout writes dir's groupsFile (a new file renamed over the old,
// fsynced: a node that forgot its groups would start with one).
func WriteLayout(dir string, l Layout) error {
	s := strconv.Itoa(l.Groups) + "\n"
	for _, a := range l.Join {
		if a == "" {
			a = noJoin
		}
		s += a + "\n"
	}
	tmp := filepath.Join(dir, groupsFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, groupsFile))
}

// HasState reports whether this node holds Raft state: a log, a snapshot,
// a term. A node that joins asks how many groups there are before it
// starts, so a node that has none never joined anything.
func (c *Cluster) HasState() (bool, error) {
	return raft.HasExistingState(c.store, c.stable, c.snaps)
}

// AskLayout asks the member whose clients connect at addr how many groups
// the cluster has and where that member serves each (CLUSTER GROUPS, one
// [group, addr, slot ranges] per group), as this node's Join would reach
// it (password, TLS). A member that does not know the subcommand is a
// delayd of one group.
func (c *Cluster) AskLayout(ctx context.Context, addr string) (Layout, error) {
	cl := c.client(addr)
	defer cl.Close()
	groups, err := cl.Do(ctx, "CLUSTER", "GROUPS").Slice()
	if err != nil {
		if strings.Contains(err.Error(), "unknown subcommand") {
			return Layout{Groups: 1}, nil
		}
		return Layout{}, err
	}
	if len(groups) < 1 || len(groups) > MaxGroups {
		return Layout{}, fmt.Errorf("CLUSTER GROUPS from %s: %d groups", addr, len(groups))
	}
	// Groups added since the bootstrap (add-node) are marked: the
	// bootstrap's count is the even split a snapshot with no map means.
	l := Layout{Groups: len(groups), Join: make([]string, len(groups)), Voters: make([]int, len(groups))}
	for i, g := range groups {
		f, ok := g.([]any)
		if !ok || len(f) < 2 {
			return Layout{}, fmt.Errorf("CLUSTER GROUPS from %s: group %d malformed", addr, i)
		}
		id, _ := f[0].(int64)
		a, ok := f[1].(string)
		if int(id) != i || !ok {
			return Layout{}, fmt.Errorf("CLUSTER GROUPS from %s: group %d malformed", addr, i)
		}
		l.Join[i], l.Voters[i] = a, -1
		if len(f) > 3 {
			if v, ok := f[3].(int64); ok {
				l.Voters[i] = int(v)
			}
		}
		if added, _ := f[len(f)-1].(int64); len(f) > 4 && added == 1 && i > 0 && i < l.Groups {
			l.Groups = i
		}
	}
	return l, nil
}

// HoldReplicas sets Config.Replicas and Everywhere, once the node knows
// it runs several groups. Only before Start.
func (c *Cluster) HoldReplicas(n int, everywhere bool) {
	c.cfg.Replicas, c.cfg.Everywhere = n, everywhere
}

// JoinThrough makes addr the member Start asks to add this node: a node
// that learned the groups of its cluster joins group 0 through that
// member's group-0 address, whichever of its addresses --cluster-join
// named. Only before Start.
func (c *Cluster) JoinThrough(addr string) { c.cfg.Join = addr }

// AskGroupNodes reads the members of the group served at addr from that
// address's CLUSTER NODES: the line marked myself and the lines of its
// master's replicas (ParseGroupNodes). For a group this node holds no
// replica of.
func (c *Cluster) AskGroupNodes(ctx context.Context, addr string) ([]Node, error) {
	cl := c.client(addr)
	defer cl.Close()
	s, err := cl.Do(ctx, "CLUSTER", "NODES").Text()
	if err != nil {
		return nil, err
	}
	return ParseGroupNodes(s), nil
}

// ParseGroupNodes picks out of a CLUSTER NODES reply the shard of the line
// marked myself: its master (Leader unless marked fail?) and the master's
// replicas. While that address knows no master (slave of -), only itself,
// with no leader. None is Self; Match is 1 for a connected member (an
// offset this node does not know, but not an empty replica).
func ParseGroupNodes(s string) []Node {
	type line struct {
		f    []string
		node Node
	}
	var lines []line
	master := ""
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) < 8 {
			continue
		}
		n := Node{ID: f[0], Voter: true, Connected: f[7] == "connected"}
		addr, bus, _ := strings.Cut(f[1], "@")
		bus, _, _ = strings.Cut(bus, ",")
		n.Addr = addr
		if host, _, err := net.SplitHostPort(addr); err == nil && bus != "" {
			n.BusAddr = net.JoinHostPort(host, bus)
		}
		flags := "," + f[2] + ","
		if strings.Contains(flags, ",master,") && !strings.Contains(flags, "fail") {
			n.Leader = true
			n.ConfigEpoch, _ = strconv.ParseUint(f[6], 10, 64)
		}
		if n.Connected {
			n.Match = 1
		}
		if strings.Contains(flags, ",myself,") {
			if strings.Contains(flags, ",master,") {
				master = f[0]
			} else if f[3] != "-" {
				master = f[3]
			}
			n.Connected = true
		}
		lines = append(lines, line{f, n})
	}
	var out []Node
	for _, l := range lines {
		if master == "" {
			if strings.Contains(","+l.f[2]+",", ",myself,") {
				l.node.Leader = false
				out = append(out, l.node)
			}
			continue
		}
		if l.f[0] == master || l.f[3] == master {
			out = append(out, l.node)
		}
	}
	return out
}
