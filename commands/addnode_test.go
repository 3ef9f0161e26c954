package commands

import (
	"errors"
	"strings"
	"testing"

	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/engine"
)

// forgetGroups is fakeGroups that removes a group when FORGET names one of
// its ids (what main's view does for del-node of a node add-node brought).
type forgetGroups struct {
	*fakeGroups
	handled map[string]error
}

// member is a fake group's view of a node it still holds (RESET refused).
type member struct{ *fakeCluster }

func (member) Forgotten(string) bool { return false }
func (member) Removed() bool         { return false }

func (g *forgetGroups) Gone(id string) bool { return false }

func (g *forgetGroups) ForgetGroupNode(id string) (bool, error) {
	err, ok := g.handled[id]
	return ok, err
}

// del-node of a node that brought a group of its own: REPLICATE at a
// replica of a group owning no slot is OK (an address replicates its own
// group's leader: nothing to move), elsewhere only for its own leader;
// FORGET is the groups view's when it handles the id; RESET is OK at an
// address whose group left the map.
func TestDelNodeOfAGroup(t *testing.T) {
	m, err := cluster.EvenSlots(3).With(cluster.SlotChange{Assign: [][3]int{{10922, 16383, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	gs := &forgetGroups{
		fakeGroups: &fakeGroups{m: m, views: []*fakeCluster{newGroupFake(0, 1), newGroupFake(1, 1), newGroupFake(2, 1)}},
		handled:    map[string]error{groupID(2, 1): nil, groupID(1, 1): errors.New("ERR this node's Raft group still owns slots")},
	}
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	at := func(g int) (*node, *Client) {
		n := &node{t: t, d: New(Options{Engine: eng, Config: map[string]string{}, Cluster: member{gs.views[g]}, Groups: gs, Group: g}), eng: eng}
		return n, n.client()
	}
	n2, c2 := at(2) // a replica of group 2, which owns no slot
	n1, c1 := at(1) // a replica of group 1, which owns slots
	for _, s := range []struct {
		n    *node
		c    *Client
		cmd  string
		want string
	}{
		{n2, c2, "CLUSTER REPLICATE " + groupID(0, 1), "+OK"},
		{n2, c2, "CLUSTER REPLICATE " + groupID(2, 1), "+OK"},
		{n2, c2, "CLUSTER REPLICATE " + groupID(2, 0), "-ERR Can't replicate myself"},
		{n1, c1, "CLUSTER REPLICATE " + groupID(1, 1), "+OK"},
		{n1, c1, "CLUSTER REPLICATE " + groupID(0, 1), "-ERR this address replicates its own Raft group's leader only"},
		{n2, c2, "CLUSTER FORGET " + groupID(2, 1), "+OK"},
		{n1, c1, "CLUSTER FORGET " + groupID(2, 1), "+OK"},
		{n1, c1, "CLUSTER FORGET " + groupID(1, 1), "-ERR this node's Raft group still owns slots"},
		{n1, c1, "CLUSTER FORGET " + groupID(1, 2), "+OK"}, // not the view's: the group's own FORGET
	} {
		if got := s.n.do(s.c, strings.Fields(s.cmd)...); !strings.HasPrefix(got, s.want) {
			t.Errorf("%s: %q, want %q", s.cmd, got, s.want)
		}
	}
	if got := strings.Join(gs.views[1].calls, "; "); got != "forget "+groupID(1, 2) {
		t.Errorf("group 1's own FORGETs: %q", got)
	}
	if got := n2.do(c2, "CLUSTER", "RESET", "SOFT"); !strings.HasPrefix(got, "-ERR this node is a member") {
		t.Errorf("RESET at a member of a group in the map: %q", got)
	}
	// Group 2 leaves the map: its addresses answer RESET for redis-cli's
	// last step.
	gs.m, err = m.With(cluster.SlotChange{RemoveGroup: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := n2.do(c2, "CLUSTER", "RESET", "SOFT"); got != "+OK" {
		t.Errorf("RESET at a removed group's address: %q", got)
	}
}
