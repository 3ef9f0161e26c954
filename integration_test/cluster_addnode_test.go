package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// redis-cli --cluster add-node and del-node against a one-group cluster
// (docs/decisions/add-node.md): add-node sends CLUSTER MEET to the new
// node, which is in no group and so joins the member's; del-node sends
// CLUSTER FORGET to every other node (the first removes it, the others
// find it gone) and CLUSTER RESET SOFT to it.
//
//	go test -count=1 -run 'TestClusterAddDelNode' -v ./integration_test/

func TestClusterAddDelNode(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("no redis-cli")
	}
	t.Parallel()
	cc := clStart(t, 3)
	leader := cc.waitFormed(t, 20*time.Second)
	fresh := cc.add(t) // neither bootstrap nor join: waits to be met
	id := fresh.myID(t)

	out, err := exec.Command("redis-cli", "--cluster", "add-node", fresh.Addr(), cc.nodes[1].Addr()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "[OK] New node added correctly.") {
		t.Fatalf("redis-cli --cluster add-node: %v\n%s", err, out)
	}
	clWait(t, 30*time.Second, "the new node replicates the group", func() (bool, string) {
		return fresh.infoField("replication", "master_link_status") == "up" && fresh.role() == "slave",
			fresh.infoField("replication", "role") + " " + fresh.infoField("replication", "master_link_status")
	})
	check := func(replicas string) {
		t.Helper()
		clWait(t, 20*time.Second, "redis-cli --cluster check with "+replicas, func() (bool, string) {
			out, err := exec.Command("redis-cli", "--cluster", "check", leader.Addr()).CombinedOutput()
			s := string(out)
			return err == nil && strings.Contains(s, "[OK] All 16384 slots covered.") && !strings.Contains(s, "[ERR]") &&
				strings.Contains(s, replicas), s
		})
	}
	check("3 additional replica(s)")
	// A write is replicated to it: its offset reaches the leader's.
	c := leader.client()
	if err := c.Do(ctxT(t, 10*time.Second), "DELAY.ADD", "addnode", 0, "x").Err(); err != nil {
		t.Fatal(err)
	}

	out, err = exec.Command("redis-cli", "--cluster", "del-node", cc.nodes[2].Addr(), id).CombinedOutput()
	if err != nil || strings.Contains(string(out), "ERR") {
		t.Fatalf("redis-cli --cluster del-node: %v\n%s", err, out)
	}
	for _, n := range cc.nodes[:3] {
		n := n
		clWait(t, 20*time.Second, "every node forgot it", func() (bool, string) {
			lines, err := n.nodesView()
			if err != nil || len(lines) != 3 {
				return false, fmt.Sprint(lines, err)
			}
			for _, l := range lines {
				if l.id == id {
					return false, fmt.Sprint(lines)
				}
			}
			return true, ""
		})
	}
	check("2 additional replica(s)")
	// Forgetting it again, anywhere, is what redis-cli's retries meet: OK.
	if v, err := cc.nodes[0].do(cc.nodes[0].client(), "CLUSTER", "FORGET", id); err != nil || v != "OK" {
		t.Errorf("FORGET of a forgotten node: %v %v", v, err)
	}
	// A member is not reset.
	if _, err := cc.nodes[0].do(cc.nodes[0].client(), "CLUSTER", "RESET", "SOFT"); err == nil || !strings.Contains(err.Error(), "member of its Raft group") {
		t.Errorf("CLUSTER RESET of a member: %v", err)
	}
}
