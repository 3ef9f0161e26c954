package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/redis/go-redis/v9"
)

// Membership. Raft's configuration holds each voter's id and bus address;
// the state machine holds where its clients connect (member entries). A
// change is made on the leader; a follower asked for one passes it on to
// the leader over RESP, as an admin would.

// errNoLeader: nobody leads now (an election is on).
var errNoLeader = errors.New("CLUSTERDOWN The cluster is down")

// Join adds the node id, reached by Raft at busAddr and by clients at addr,
// as a voter (CLUSTER JOIN, which --cluster-join sends); past
// Config.Replicas voters, as a nonvoter of a group every node holds, else
// not at all. A member already known at that bus address under another id
// (a node whose data dir was wiped came back with a new id) is removed
// first, so the group's size does not grow with dead ids.
func (c *Cluster) Join(id, busAddr, addr string) error {
	if c.r() == nil {
		return errNoLeader
	}
	if c.r().State() != raft.Leader {
		return c.forward("JOIN", id, busAddr, addr)
	}
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	if err := c.checkJoiner(id, addr); err != nil {
		return err
	}
	voters, voter := 0, false
	if f := c.r().GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if string(s.Address) == busAddr && string(s.ID) != id {
				if err := c.r().RemoveServer(s.ID, 0, 10*time.Second).Error(); err != nil {
					return err
				}
				c.proposeMember(member{ID: string(s.ID), Remove: true})
				continue
			}
			if s.Suffrage == raft.Voter {
				voters++
				voter = voter || string(s.ID) == id
			}
		}
	}
	add := c.r().AddVoter
	if full := c.cfg.Replicas > 0 && !voter && voters >= c.cfg.Replicas; full {
		if !c.cfg.Everywhere {
			return fmt.Errorf("ERR this group has its %d %s", c.cfg.Replicas, fullMark)
		}
		add = c.r().AddNonvoter
	}
	if err := add(raft.ServerID(id), raft.ServerAddress(busAddr), 0, 10*time.Second).Error(); err != nil {
		return err
	}
	c.log.Info().Str("id", id).Str("bus", busAddr).Str("addr", addr).Msg("cluster: node added")
	err := c.proposeMember(member{ID: id, Addr: addr, BusAddr: busAddr})
	c.kickGate()
	return err
}

// Forgotten says whether node id was removed from the group (CLUSTER
// FORGET) since this node started: a FORGET of it again is answered OK.
func (c *Cluster) Forgotten(id string) bool { return c.fsm.forgotten(id) }

// Removed says whether no group holds this node with others: its Raft
// configuration leaves it out (or holds nobody: a node never added), or the
// leader it last heard from lists it no more. A node removed may never get
// the entry that removed it (the leader stops replicating to it once the
// others hold it), so the leader is asked.
func (c *Cluster) Removed() bool {
	r := c.r()
	if r == nil {
		return false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	in := false
	for _, s := range f.Configuration().Servers {
		in = in || string(s.ID) == c.id
	}
	if !in {
		return true
	}
	leader, ok := c.Leader()
	if !ok || leader.Self || leader.Addr == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cl := c.client(leader.Addr)
	defer cl.Close()
	nodes, err := cl.Do(ctx, "CLUSTER", "NODES").Text()
	if err != nil {
		return false
	}
	for _, line := range strings.Split(nodes, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == c.id {
			return false
		}
	}
	return true
}

// Forget removes node id from the group (CLUSTER FORGET).
func (c *Cluster) Forget(id string) error {
	if id == c.id {
		return errors.New("ERR I tried hard but I can't forget myself...")
	}
	if c.r() == nil {
		return errNoLeader
	}
	if c.r().State() != raft.Leader {
		return c.forward("FORGET", id)
	}
	known := false
	if f := c.r().GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			known = known || string(s.ID) == id
		}
	}
	if !known {
		if c.fsm.forgotten(id) {
			// redis-cli's del-node sends FORGET to every node; the first
			// removed it from the group, the others find it gone.
			return nil
		}
		return fmt.Errorf("ERR Unknown node %s", id)
	}
	if err := c.r().RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error(); err != nil {
		return err
	}
	c.log.Info().Str("id", id).Msg("cluster: node removed")
	if err := c.proposeMember(member{ID: id, Remove: true}); err != nil {
		return err
	}
	c.promote()
	return nil
}

// promote, at the leader of a group every node holds (group 0) short of
// Config.Replicas voters, makes its most caught-up nonvoter that the
// leader hears from a voter (hashicorp/raft's AddVoter of a nonvoter
// promotes it). A voter forgotten (a node gone for good, `redis-cli
// --cluster del-node`) would otherwise leave the slot map's group one
// failure from losing its majority until a node joined again.
func (c *Cluster) promote() {
	if !c.cfg.Everywhere || c.cfg.Replicas <= 0 {
		return
	}
	voters := 0
	var best *Node
	nodes := c.Nodes()
	for i := range nodes {
		n := &nodes[i]
		if n.Voter {
			voters++
			continue
		}
		if n.Self || !n.Connected || n.LastHeard > c.cfg.ElectionTimeout {
			continue
		}
		if best == nil || n.Match > best.Match {
			best = n
		}
	}
	if voters >= c.cfg.Replicas || best == nil {
		return
	}
	if err := c.r().AddVoter(raft.ServerID(best.ID), raft.ServerAddress(best.BusAddr), 0, 10*time.Second).Error(); err != nil {
		c.log.Warn().Err(err).Str("id", best.ID).Msg("cluster: promoting a nonvoter")
		return
	}
	c.log.Info().Str("id", best.ID).Int("voters", voters+1).Msg("cluster: nonvoter promoted to voter")
}

// ForgetSelf asks the group's leader to remove this node (CLUSTER FORGET
// of it there): a node that leaves with a group of its own removed
// (del-node, which sends every address but the group's master FORGET).
func (c *Cluster) ForgetSelf() error { return c.forward("FORGET", c.id) }

// Meet adds the node whose clients connect at host:port (CLUSTER MEET): it
// asks that node for its id and bus address, then joins it. Sent to a node
// that is in no group yet (started with neither --cluster-bootstrap nor
// --cluster-join: what redis-cli --cluster add-node meets), it works the
// other way, as Redis's MEET introduces both ends: this node asks the
// member at host:port to add it (MeetAlone).
func (c *Cluster) Meet(host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if c.alone() {
		return c.meetAlone(addr)
	}
	cl := c.client(addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, err := cl.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return fmt.Errorf("ERR cannot reach %s: %v", addr, err)
	}
	nodes, err := cl.Do(ctx, "CLUSTER", "NODES").Text()
	if err != nil {
		return fmt.Errorf("ERR cannot reach %s: %v", addr, err)
	}
	bus := ""
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == id && strings.Contains(f[2], "myself") {
			// ip:port@cport: the bus is on the host MEET named.
			if _, cport, ok := strings.Cut(f[1], "@"); ok {
				cport, _, _ = strings.Cut(cport, ",")
				bus = net.JoinHostPort(host, cport)
			}
		}
	}
	if bus == "" {
		return fmt.Errorf("ERR %s did not say where its cluster bus is", addr)
	}
	return c.Join(id, bus, addr)
}

// alone says whether Raft runs with no configuration: this node was
// never bootstrapped, joined or added.
func (c *Cluster) alone() bool {
	r := c.r()
	if r == nil || c.cfg.Bootstrap {
		return false
	}
	f := r.GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) == 0
}

// member says whether id is in Raft's latest configuration (the one being
// committed included: a removal counts from the moment the leader logs
// it). Before Raft runs, every id is.
func (c *Cluster) member(id raft.ServerID) bool {
	r := c.r()
	if r == nil {
		return true
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return true
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id {
			return true
		}
	}
	return false
}

// keepLogAfter is how long a leader keeps its whole log after its last
// snapshot send ended: the follower catches up from the snapshot's index
// with AppendEntries.
const keepLogAfter = 10 * time.Second

// keepLog keeps the leader's log whole while it sends a snapshot, and for
// keepLogAfter after the last send (tracker.sends calls it as each starts
// and ends). A snapshot the leader takes compacts its log to TrailingLogs
// entries behind that one; if that passed the index of the one being sent
// (which may be nearly --cluster-snapshot-entries old, and whose restore
// takes seconds at millions of jobs), the follower, once it restored it,
// could not catch up from the log and would be sent another. Raising
// TrailingLogs (Raft reloads it) covers every snapshot, snapshotLoop's
// and Raft's backstop, and one whose capture began before the send.
func (c *Cluster) keepLog(start bool) {
	c.keepMu.Lock()
	defer c.keepMu.Unlock()
	if start {
		c.sends++
		if c.keepTimer != nil {
			c.keepTimer.Stop()
			c.keepTimer = nil
		}
		c.setTrailing(1 << 62)
		return
	}
	c.sends--
	if c.sends == 0 {
		c.keepTimer = time.AfterFunc(keepLogAfter, func() {
			c.keepMu.Lock()
			defer c.keepMu.Unlock()
			if c.sends == 0 {
				c.setTrailing(c.trailing)
			}
		})
	}
}

// setTrailing sets Raft's TrailingLogs (keepMu held).
func (c *Cluster) setTrailing(n uint64) {
	r := c.r()
	if r == nil {
		return
	}
	rc := r.ReloadableConfig()
	if rc.TrailingLogs == n {
		return
	}
	rc.TrailingLogs = n
	if err := r.ReloadConfig(rc); err != nil {
		c.log.Warn().Err(err).Msg("cluster: keeping the log during a snapshot send failed")
	}
}

// meetAlone makes this node, in no group yet, join the cluster of the
// member at addr, as --cluster-join would have: the join runs in the
// background (joinLoop), as Redis's MEET handshake does, and the reply
// says only that it started. Of a cluster of several groups it joins
// group 0, and the process (OnMeetGroups) adds a group of its own
// (docs/decisions/add-node.md); without one such a MEET is refused.
func (c *Cluster) meetAlone(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.AskLayout(ctx, addr)
	if err != nil {
		return fmt.Errorf("ERR cannot reach %s: %v", addr, err)
	}
	if l.Groups > 1 && c.onMeet == nil {
		return fmt.Errorf("ERR %s's cluster splits its slots over %d Raft groups: start this node with --cluster-join %s", addr, l.Groups, addr)
	}
	c.meetOnce.Do(func() {
		c.cfg.Join = addr
		if l.Groups > 1 {
			if l.Join[0] != "" {
				c.cfg.Join = l.Join[0] // group 0's address at the member
			}
			c.onMeet(addr, l)
		}
		select {
		case <-c.quit:
			return
		default:
		}
		c.log.Info().Str("via", addr).Msg("cluster: CLUSTER MEET of a node in no group: joining the member's")
		c.wg.Add(1)
		go c.joinLoop()
	})
	return nil
}

// OnMeetGroups makes on hear of a CLUSTER MEET that joins this node, in
// no group yet, to a cluster of several groups, before it asks to join
// group 0: the process runs the map's groups from then on, and adds one
// of its own. Only before Start.
func (c *Cluster) OnMeetGroups(on func(addr string, l Layout)) { c.onMeet = on }

// forward sends a membership change to the leader over RESP.
func (c *Cluster) forward(sub string, args ...string) error {
	leader, ok := c.Leader()
	if !ok || leader.Addr == "" {
		return errNoLeader
	}
	cl := c.client(leader.Addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := []any{"CLUSTER", sub}
	for _, a := range args {
		cmd = append(cmd, a)
	}
	return cl.Do(ctx, cmd...).Err()
}

func (c *Cluster) client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, Password: c.cfg.Password, MaxRetries: -1, DialTimeout: 2 * time.Second,
		ReadTimeout: 15 * time.Second, Protocol: 2, DisableIdentity: true,
		TLSConfig: c.respTLS(addr),
	})
}

// proposeMember commits a member entry (leader only).
func (c *Cluster) proposeMember(m member) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return c.r().Apply(append([]byte{entryMember}, b...), 10*time.Second).Error()
}

// announceSelf makes sure the state machine knows this leader's client
// address (the bootstrap node, or one whose address changed).
func (c *Cluster) announceSelf() {
	m, ok := c.fsm.memberList()[c.id]
	if ok && m.Addr == c.cfg.AnnounceAddr && m.BusAddr == c.cfg.AnnounceBusAddr {
		return
	}
	if err := c.proposeMember(member{ID: c.id, Addr: c.cfg.AnnounceAddr, BusAddr: c.cfg.AnnounceBusAddr}); err != nil {
		c.log.Warn().Err(err).Msg("cluster: announcing this node's address failed")
	}
}

// fullMark ends the refusal of a group that has its voters; ErrGroupFull
// is that refusal to a joiner (Reserve).
const fullMark = "replicas (cluster-replicas)"

// ErrGroupFull: the group has its --cluster-replicas voters, and takes no
// other.
var ErrGroupFull = errors.New("cluster: the group has its replicas")

// Reserve asks the member named by Config.Join to add this node, as
// joinLoop does, and waits for the answer until ctx ends: a node joining a
// cluster of several groups learns which groups took it (nodes joining at
// once all saw room; the leader admits them up to --cluster-replicas and
// refuses the rest with ErrGroupFull). Other errors (no leader yet) are
// retried; ctx's end returns the last, and joinLoop asks on.
func (c *Cluster) Reserve(ctx context.Context) error {
	target := c.cfg.Join
	for {
		err := func() error {
			cl := c.client(target)
			defer cl.Close()
			actx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			return cl.Do(actx, "CLUSTER", "JOIN", c.id, c.cfg.AnnounceBusAddr, c.cfg.AnnounceAddr).Err()
		}()
		switch {
		case err == nil:
			return nil
		case strings.HasSuffix(err.Error(), fullMark):
			return ErrGroupFull
		}
		if f := strings.Fields(err.Error()); len(f) == 3 && f[0] == "MOVED" {
			target = f[2]
		} else {
			target = c.cfg.Join
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// joinLoop asks the member named by --cluster-join (or whoever leads) to
// add this node, until this node is in the group with its address known.
func (c *Cluster) joinLoop() {
	defer c.wg.Done()
	target := c.cfg.Join
	for attempt := 0; ; attempt++ {
		if m, ok := c.fsm.memberList()[c.id]; ok && m.Addr == c.cfg.AnnounceAddr && m.BusAddr == c.cfg.AnnounceBusAddr {
			return // in the group, with its addresses: nothing to ask
		}
		err := func() error {
			cl := c.client(target)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			return cl.Do(ctx, "CLUSTER", "JOIN", c.id, c.cfg.AnnounceBusAddr, c.cfg.AnnounceAddr).Err()
		}()
		if err == nil {
			c.log.Info().Str("via", target).Msg("cluster: joined")
			target = c.cfg.Join
		} else {
			// MOVED names the leader: ask it next time.
			if f := strings.Fields(err.Error()); len(f) == 3 && f[0] == "MOVED" {
				target = f[2]
			} else {
				target = c.cfg.Join
			}
			if attempt%10 == 0 {
				// Nodes started together (scripts/cluster.sh, a StatefulSet)
				// ask before the bootstrap node has elected itself: refusals
				// in the first 10 s are the healthy start's (a loaded machine
				// takes seconds), a warning only when they last.
				ev := c.log.Warn()
				if attempt < 20 {
					ev = c.log.Info()
				}
				ev.Err(err).Str("via", c.cfg.Join).Msg("cluster: joining failed; retrying")
			}
		}
		select {
		case <-c.quit:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// snapshotLoop takes this node's snapshots once enough entries piled up
// since the last, on every role (takeSnapshot: the state written to a file
// at a known index, the log after it streamed behind). Raft's own timer is
// a backstop at a higher threshold: its snapshot is copied in memory under
// the engine's lock, and on a leader only when no write is in flight,
// which under steady load is never.
func (c *Cluster) snapshotLoop() {
	defer c.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
		c.snapLooks.Add(1)
		r := c.r()
		if r == nil || r.State() == raft.Shutdown {
			continue
		}
		var size int64
		if metas, err := c.snaps.List(); err == nil && len(metas) > 0 {
			last, size = metas[0].Index, metas[0].Size
		}
		// A node installing a snapshot has it in the store before its
		// applied index reaches it: not a reason to capture (unsigned, the
		// difference would wrap to a huge one, and the capture wait for
		// the restore and then hold the lock for as long again).
		if applied := r.AppliedIndex(); applied < last || applied-last < c.cfg.SnapshotThreshold {
			continue
		}
		if !c.logGrown(last, size) {
			continue
		}
		if err := c.takeSnapshot(r); err != nil {
			c.log.Debug().Err(err).Msg("cluster: snapshot not taken; trying again")
		}
	}
}

// logGrown says whether the log after the last snapshot (at index last,
// size bytes) is large enough for a new one under SnapshotGrowth, as the
// log rewrite's rule: a snapshot's cost grows with the jobs, the log's
// with the writes, so snapshots come as often as the writes could fill
// the state again, never more.
func (c *Cluster) logGrown(last uint64, size int64) bool {
	if c.cfg.SnapshotGrowth <= 0 {
		return true
	}
	need := max(c.cfg.SnapshotMinBytes, size/100*int64(c.cfg.SnapshotGrowth))
	return c.store.BytesAfter(last) >= need
}

// Failover makes this node its group's leader (CLUSTER FAILOVER sent to a
// replica, Redis's manual failover): it asks the leader to hand over, and
// Raft's leadership transfer lets it catch up with the log first, so no
// committed write is lost. A node that leads already is refused, as a
// Redis master is.
func (c *Cluster) Failover() error {
	r := c.r()
	if r == nil {
		return errNoLeader
	}
	if r.State() == raft.Leader {
		return errors.New("ERR You should send CLUSTER FAILOVER to a replica")
	}
	return c.forward("HANDOVER", c.id)
}

// HandOver makes node id the leader (CLUSTER HANDOVER, what Failover asks
// the leader); on a follower it is passed on to the leader. It returns once
// this leader stepped down.
func (c *Cluster) HandOver(id string) error {
	r := c.r()
	if r == nil {
		return errNoLeader
	}
	if r.State() != raft.Leader {
		return c.forward("HANDOVER", id)
	}
	if id == c.id {
		return nil
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			if s.Suffrage != raft.Voter {
				return fmt.Errorf("ERR node %s cannot be elected", id)
			}
			c.log.Info().Str("to", id).Msg("cluster: handing leadership over")
			return r.LeadershipTransferToServer(s.ID, s.Address).Error()
		}
	}
	return fmt.Errorf("ERR Unknown node %s", id)
}
