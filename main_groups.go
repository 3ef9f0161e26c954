package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/resp"
)

// A node of a cluster whose slots are split over several Raft groups runs
// one group per (process, group) address (docs/decisions/raft-groups.md):
// group g has its own Cluster, engine, dispatcher and listener, on the
// node's ports + g * --cluster-group-port-step. Group 0 is what a
// one-group node always was.

// group is one Raft group as this process runs it.
type group struct {
	g    int
	clu  *cluster.Cluster
	disp *commands.Dispatcher
	srv  *resp.Server
	eng  *engine.Engine // nil until opened
}

// groupsView is the cluster's groups as every dispatcher sees them
// (commands.Groups): the slot map, and each group's Cluster once started.
// The map is what this process's group 0 applied last (cluster/slots.go);
// before its first entry, the even split every node computes alike.
type groupsView struct {
	m        atomic.Pointer[cluster.SlotMap]
	n        atomic.Int32 // the number of groups, for the even split
	clusters [cluster.MaxGroups]atomic.Pointer[cluster.Cluster]
	// disps are the groups' dispatchers, told when slots change owner.
	disps [cluster.MaxGroups]atomic.Pointer[commands.Dispatcher]
	// remote are the groups this process holds no replica of, as read
	// from a process that does (watchRemote).
	remote [cluster.MaxGroups]atomic.Pointer[remoteGroup]
	// step is --cluster-group-port-step: group g of a process listens g
	// steps above its group 0.
	step int
	// gone are the node ids of the addresses of groups removed since the
	// start (del-node): a FORGET of one answers OK.
	goneMu sync.Mutex
	gone   map[string]bool
	// changed is when the map last changed (UnixNano): leaders stay put
	// for a while after (moving).
	changed atomic.Int64
}

func newGroupsView(n int) *groupsView {
	gv := new(groupsView)
	gv.setMap(n, nil)
	return gv
}

// setMap makes m the map the addresses route by; nil: the even split of n
// groups (a cluster made before the map was logged, until its group 0's
// leader writes the map's first entry).
func (gv *groupsView) setMap(n int, m *cluster.SlotMap) {
	gv.n.Store(int32(n))
	if m == nil {
		m = cluster.EvenSlots(n)
	}
	old := gv.m.Swap(m)
	gv.changed.Store(time.Now().UnixNano())
	if old == nil || old.SameOwners(m) {
		return
	}
	// Clients blocked on keys of a slot that changed owner follow it, as
	// Redis redirects them; not here, which runs as group 0 applies.
	for g := range gv.disps {
		if d := gv.disps[g].Load(); d != nil {
			go d.RedirectBlocked()
		}
	}
}

// useSlots makes clu, this process's group 0, keep gv's map.
func (gv *groupsView) useSlots(clu *cluster.Cluster, n int) {
	clu.UseSlots(n, func(m *cluster.SlotMap) { gv.setMap(int(gv.n.Load()), m) })
}

func (gv *groupsView) Count() int                     { return gv.m.Load().Groups() }
func (gv *groupsView) Base() int                      { return int(gv.n.Load()) } // the bootstrap's count
func (gv *groupsView) Owner(slot int) int             { return gv.m.Load().Owner(slot) }
func (gv *groupsView) Ranges(g int) [][2]int          { return gv.m.Load().Ranges(g) }
func (gv *groupsView) Migrating(slot int) (int, bool) { return gv.m.Load().Migrating(slot) }
func (gv *groupsView) Importing(slot int) (int, bool) { return gv.m.Load().Importing(slot) }
func (gv *groupsView) View(g int) commands.ClusterView {
	if c := gv.clusters[g].Load(); c != nil {
		return c
	}
	if r := gv.remote[g].Load(); r != nil {
		return r
	}
	return nil // not a typed nil: the commands test for nil
}

// allLed says whether every group of gv knows a leader taking writes.
func (gv *groupsView) allLed() bool {
	for g := 0; g < gv.Count(); g++ {
		v := gv.View(g)
		if v == nil {
			return false
		}
		if _, ok := v.Leader(); !ok {
			return false
		}
	}
	return true
}

// groupLayout is how many groups this node runs, and through which member
// address each is joined, as far as the node can tell before it asks
// anyone: discover is true for a node that joins for the first time, which
// asks its --cluster-join address (discoverLayout). has says whether group
// 0 holds Raft state already.
func groupLayout(cfg config, has bool) (l cluster.Layout, discover bool, err error) {
	l, ok, err := cluster.ReadLayout(cfg.Dir)
	if err != nil {
		return l, false, err
	}
	switch {
	case ok:
		if cfg.ClusterBootstrap && cfg.ClusterGroups > 1 && cfg.ClusterGroups != l.Groups {
			return l, false, fmt.Errorf("cluster-groups %d: this node's cluster has %d groups; the number is set when the cluster is bootstrapped", cfg.ClusterGroups, l.Groups)
		}
		return l, false, nil
	case has:
		// A node of a one-group cluster, from before groups or not.
		if cfg.ClusterBootstrap && cfg.ClusterGroups > 1 {
			return l, false, fmt.Errorf("cluster-groups %d: this node's data dir holds a one-group cluster; the number is set when the cluster is bootstrapped", cfg.ClusterGroups)
		}
		return cluster.Layout{Groups: 1}, false, nil
	case cfg.ClusterBootstrap:
		l = cluster.Layout{Groups: cfg.ClusterGroups}
		if l.Groups > 1 {
			err = cluster.WriteLayout(cfg.Dir, l)
		}
		return l, false, err
	case cfg.ClusterJoin != "":
		return cluster.Layout{Groups: 1}, true, nil
	}
	// Waits to be added by CLUSTER MEET: one group.
	return cluster.Layout{Groups: 1}, false, nil
}

// discoverLayout asks the --cluster-join address how many groups the
// cluster has and where that member serves each, until it answers (nodes
// started together ask before the bootstrap node listens), then keeps the
// answer in the data dir. Meanwhile the node answers LOADING.
func discoverLayout(ctx context.Context, clu *cluster.Cluster, cfg config, log zerolog.Logger) (cluster.Layout, error) {
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err := clu.AskLayout(actx, cfg.ClusterJoin)
		var seated []bool
		if err == nil && l.Groups > 1 {
			seated, err = askSeated(actx, clu, cfg, l)
		}
		cancel()
		if err == nil {
			if l.Groups > 1 {
				holdReplicas(&l, cfg.ClusterReplicas, seated)
				if err := cluster.WriteLayout(cfg.Dir, l); err != nil {
					return l, err
				}
				log.Info().Int("groups", l.Groups).Str("via", cfg.ClusterJoin).Msg("cluster: the slots are split over several Raft groups; joining each")
			}
			return l, nil
		}
		if attempt%10 == 0 {
			ev := log.Info()
			if attempt >= 20 {
				ev = log.Warn()
			}
			ev.Err(err).Str("via", cfg.ClusterJoin).Msg("cluster: asking the member for its groups failed; retrying")
		}
		select {
		case <-ctx.Done():
			return l, engine.ErrLoadAborted
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// holdReplicas marks in l the groups a joining node takes no replica of:
// those that have their replicas (--cluster-replicas), and those the
// member it asked does not hold either (it cannot be joined through).
// Group 0 it always holds: every process routes by its slot map. A group
// with a member at this node's own addresses (seated[g], askSeated) is
// not full of others: that member is this node before its data dir was
// wiped, a dead voter the leader's Join replaces with the new id, and
// counting it would leave the node out of every group it held.
func holdReplicas(l *cluster.Layout, replicas int, seated []bool) {
	if replicas <= 0 {
		return
	}
	for g := 1; g < len(l.Join) && g < len(l.Voters); g++ {
		mine := g < len(seated) && seated[g]
		if l.Join[g] == "" || (l.Voters[g] >= replicas && !mine) {
			l.Join[g] = cluster.NotHeld
		}
	}
}

// askSeated says, for each group of l that looks full to a node joining
// it (holdReplicas), whether one of its members is at this node's own
// client or bus address for that group, as the member l was read from
// lists the group's members (CLUSTER NODES at its address for the
// group). An error, or a group that knows no leader (its list holds
// only the member asked), is retried by the caller: the answer is kept
// in the groups file, and a node wrongly left out of a group never
// takes its seat there again.
func askSeated(ctx context.Context, clu *cluster.Cluster, cfg config, l cluster.Layout) ([]bool, error) {
	seated := make([]bool, len(l.Join))
	if cfg.ClusterReplicas <= 0 {
		return seated, nil
	}
	for g := 1; g < len(l.Join) && g < len(l.Voters); g++ {
		if l.Join[g] == "" || l.Voters[g] < cfg.ClusterReplicas {
			continue
		}
		off := g * cfg.ClusterGroupPortStep
		addr, err := cluster.ShiftPort(cfg.ClusterAnnounceAddr, off)
		if err != nil {
			return nil, fmt.Errorf("group %d: %w", g, err)
		}
		bus, err := cluster.ShiftPort(cfg.ClusterAnnounceBusAddr, off)
		if err != nil {
			return nil, fmt.Errorf("group %d: %w", g, err)
		}
		nodes, err := clu.AskGroupNodes(ctx, l.Join[g])
		if err != nil {
			return nil, fmt.Errorf("group %d's members at %s: %w", g, l.Join[g], err)
		}
		led := false
		for _, n := range nodes {
			led = led || n.Leader
			seated[g] = seated[g] || n.Addr == addr || n.BusAddr == bus
		}
		if !led && !seated[g] {
			return nil, fmt.Errorf("group %d at %s knows no leader", g, l.Join[g])
		}
	}
	return seated, nil
}

// groupConfig is group g's cluster settings: the node's, its addresses
// shifted by g steps, its own directory and node id, joined through join.
func groupConfig(base cluster.Config, cfg config, g int, join string, log zerolog.Logger) (cluster.Config, error) {
	if g == 0 {
		return base, nil
	}
	off := g * cfg.ClusterGroupPortStep
	c := base
	c.Dir = cluster.GroupDir(cfg.Dir, g)
	c.NodeID = "" // one id per address, kept in the group's dir
	c.Join = join
	c.Logger = log
	c.Replicas, c.Everywhere = cfg.ClusterReplicas, false
	var err error
	for _, a := range []*string{&c.BusAddr, &c.AnnounceAddr, &c.AnnounceBusAddr} {
		if *a, err = cluster.ShiftPort(*a, off); err != nil {
			return c, fmt.Errorf("group %d: %w", g, err)
		}
	}
	return c, nil
}

// startGroupFront creates group g's Cluster, dispatcher and listener (not
// its engine): what group 0 gets before the log loads, for a group this
// node learns of later.
func startGroupFront(base cluster.Config, dopts commands.Options, ropts resp.Options, cfg config, gv *groupsView,
	g int, join string, log zerolog.Logger) (*group, error) {
	glog := log.With().Int("group", g).Logger()
	cc, err := groupConfig(base, cfg, g, join, glog)
	if err != nil {
		return nil, err
	}
	if g > 0 {
		cc.MapFresh = func() error {
			c0 := gv.clusters[0].Load()
			if c0 == nil {
				return errors.New("group 0 is not started yet")
			}
			return c0.SlotsFresh()
		}
	}
	clu, err := cluster.New(cc)
	if err != nil {
		return nil, fmt.Errorf("group %d: %w", g, err)
	}
	port := cfg.Port + g*cfg.ClusterGroupPortStep
	dopts.Cluster, dopts.Groups, dopts.Group, dopts.Port = clu, gv, g, port
	dopts.Loading = new(engine.Loading)
	dopts.Log = glog
	disp := commands.New(dopts)
	if err := disp.LoadACLFile(); err != nil {
		clu.Close()
		return nil, err
	}
	ropts.Addr, ropts.TLSAddr, ropts.TLS = net.JoinHostPort(cfg.Bind, strconv.Itoa(port)), "", nil
	ropts.Dispatcher, ropts.Log = disp, glog
	srv, err := resp.Listen(ropts)
	if err != nil {
		clu.Close()
		return nil, fmt.Errorf("group %d: %w", g, err)
	}
	go func() {
		if err := srv.Serve(); err != nil {
			glog.Error().Err(err).Msg("serve")
		}
	}()
	gv.clusters[g].Store(clu)
	gv.disps[g].Store(disp)
	glog.Info().Str("addr", srv.Addr().String()).Str("id", clu.ID()).Str("bus", cc.BusAddr).Msg("cluster group listening")
	return &group{g: g, clu: clu, disp: disp, srv: srv}, nil
}

// keepSeats makes a node joining a cluster of several groups for the first
// time take its seat in each group it started (Cluster.Reserve: the joins
// its joinLoops would make, waited for), and give up a group that turns
// out full: nodes that joined at once all saw room in it, and its leader
// took the first ones (--cluster-replicas). Such a group is closed before
// it served anyone, marked not held in l and the groups file, and seen
// through another process (watchRemote). Group 0 is never full.
func keepSeats(groups []*group, l *cluster.Layout, cfg config, gv *groupsView, log zerolog.Logger) ([]*group, error) {
	kept := groups[:1]
	for _, gr := range groups[1:] {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := gr.clu.Reserve(ctx)
		cancel()
		if !errors.Is(err, cluster.ErrGroupFull) {
			kept = append(kept, gr) // joined, or its joinLoop asks on
			continue
		}
		log.Info().Int("group", gr.g).Msg("cluster: the group took nodes that joined at the same time up to --cluster-replicas; this node holds none of it")
		gv.clusters[gr.g].Store(nil)
		gv.disps[gr.g].Store(nil)
		gv.remote[gr.g].Store(&remoteGroup{g: gr.g})
		gr.srv.Close(time.Second)
		gr.eng.Stop()
		gr.clu.Close()
		if err := gr.eng.Close(); err != nil {
			return kept, err
		}
		l.Join[gr.g] = cluster.NotHeld
		if err := cluster.WriteLayout(cfg.Dir, *l); err != nil {
			return kept, err
		}
	}
	return kept, nil
}

// balanceLeaders runs the leader placement rule (cluster.Balancer) over
// this process's groups until the returned func is called, which waits for
// a hand-over in progress to end.
func (gv *groupsView) balanceLeaders(log zerolog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b := &cluster.Balancer{
		Local: func(g int) *cluster.Cluster { return gv.clusters[g].Load() },
		View: func(g int) cluster.LeaderView {
			if v := gv.View(g); v != nil {
				return v
			}
			return nil
		},
		Count: gv.Count,
		Busy:  gv.moving,
		Log:   log,
	}
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// movesQuiet is how long the slot map must stay unchanged before leaders
// move: redis-cli --cluster reshard and rebalance close one slot before
// they open the next, and address every step of a slot to the master they
// read at their start; a leader handed over between two slots made the next
// SETSLOT answer "Please use SETSLOT only with masters" and stopped the
// reshard (TestClusterAddNodeGroup).
const movesQuiet = 10 * time.Second

// moving says whether any slot is migrating or importing, or the map
// changed within movesQuiet.
func (gv *groupsView) moving() bool {
	if time.Since(time.Unix(0, gv.changed.Load())) < movesQuiet {
		return true
	}
	m := gv.m.Load()
	for s := 0; s < cluster.Slots; s++ {
		if _, ok := m.Migrating(s); ok {
			return true
		}
		if _, ok := m.Importing(s); ok {
			return true
		}
	}
	return false
}

// remoteGroup is a group this process holds no replica of (it joined
// once the group had its --cluster-replicas), as one of its members'
// CLUSTER NODES shows it, read every second (watchRemote): enough to
// list the group in CLUSTER SLOTS, SHARDS and NODES and send its keys'
// commands to its leader with MOVED. It takes no writes and no
// membership changes.
type remoteGroup struct {
	g     int
	nodes atomic.Pointer[[]cluster.Node]
}

var errNotHeld = errors.New("ERR this node holds no replica of this group; send it to one of the group's addresses")

func (r *remoteGroup) list() []cluster.Node {
	if p := r.nodes.Load(); p != nil {
		return *p
	}
	return nil
}

func (r *remoteGroup) Self() cluster.Node                          { return cluster.Node{} }
func (r *remoteGroup) Nodes() []cluster.Node                       { return append([]cluster.Node(nil), r.list()...) }
func (r *remoteGroup) Writable() bool                              { return false }
func (r *remoteGroup) LastIndex() uint64                           { return 0 }
func (r *remoteGroup) Meet(string, int) error                      { return errNotHeld }
func (r *remoteGroup) Forget(string) error                         { return errNotHeld }
func (r *remoteGroup) Join(_, _, _ string) error                   { return errNotHeld }
func (r *remoteGroup) WaitReplicas(uint64, int, time.Duration) int { return 0 }
func (r *remoteGroup) LastLeader() (cluster.Node, bool)            { return cluster.Node{}, false }

func (r *remoteGroup) Leader() (cluster.Node, bool) {
	for _, n := range r.list() {
		if n.Leader {
			return n, true
		}
	}
	return cluster.Node{}, false
}

func (r *remoteGroup) Term() uint64 {
	if n, ok := r.Leader(); ok {
		return n.ConfigEpoch
	}
	return 0
}

// watchRemote keeps the view of each group this process holds no replica
// of (gv.remote, set at start and as groups are added), until ctx ends:
// every second it reads the group's members at an address of it, learned
// from group 0's members (CLUSTER GROUPS) and kept while it answers.
func (gv *groupsView) watchRemote(ctx context.Context, c0 *cluster.Cluster, log zerolog.Logger) {
	addrs := map[int]string{}
	for {
		for g := 1; g < gv.Count(); g++ {
			r := gv.remote[g].Load()
			if r == nil {
				continue
			}
			if addrs[g] == "" {
				for _, n := range c0.Nodes() {
					if n.Self || n.Addr == "" {
						continue
					}
					actx, cancel := context.WithTimeout(ctx, time.Second)
					ml, err := c0.AskLayout(actx, n.Addr)
					cancel()
					if err == nil && g < len(ml.Join) && ml.Join[g] != "" {
						addrs[g] = ml.Join[g]
						break
					}
				}
			}
			if addrs[g] == "" {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, time.Second)
			nodes, err := c0.AskGroupNodes(actx, addrs[g])
			cancel()
			if err != nil || len(nodes) == 0 {
				// Another member next time; meanwhile the last view stays, as a
				// client keeps its map.
				log.Debug().Err(err).Int("group", g).Str("via", addrs[g]).Msg("cluster: reading a group this node holds no replica of failed")
				delete(addrs, g)
				continue
			}
			r.nodes.Store(&nodes)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// forgot records the node ids of a removed group's addresses.
func (gv *groupsView) forgot(ids []string) {
	gv.goneMu.Lock()
	defer gv.goneMu.Unlock()
	if gv.gone == nil {
		gv.gone = map[string]bool{}
	}
	for _, id := range ids {
		gv.gone[id] = true
	}
}

// own says whether id is one of this process's addresses.
func (gv *groupsView) own(id string) bool {
	for g := range gv.clusters {
		if c := gv.clusters[g].Load(); c != nil && c.ID() == id {
			return true
		}
	}
	return false
}

// Gone says whether id is an address of a group removed (del-node).
func (gv *groupsView) Gone(id string) bool { return gv.isGone(id) }

func (gv *groupsView) isGone(id string) bool {
	gv.goneMu.Lock()
	defer gv.goneMu.Unlock()
	return gv.gone[id]
}

// ForgetGroupNode is CLUSTER FORGET id where id is an address of the last
// group, added since the bootstrap (add-node) and owning no slot again
// (rebalance with its master's weight 0), on the process that brought it
// (one holding group 0 and this group only): redis-cli --cluster del-node
// of that node. It commits the group's removal from the map and removes
// the process from group 0. A FORGET of an address of a group removed
// answers OK, as redis-cli sends it to every address; any other id is not
// handled here.
func (gv *groupsView) ForgetGroupNode(id string) (bool, error) {
	c0 := gv.clusters[0].Load()
	if gv.isGone(id) || c0 == nil || gv.Count()-1 < int(gv.n.Load()) {
		return gv.isGone(id), nil // or no group added
	}
	// The removal may be committed and not applied here yet. The process
	// removed may never apply it: the FORGET that removed the group took
	// it out of group 0 too.
	if err := c0.SlotsFresh(); err != nil {
		if gv.own(id) && c0.Removed() {
			gv.forgot([]string{id})
			return true, nil
		}
		return false, nil
	}
	g := gv.Count() - 1
	if gv.isGone(id) || g < int(gv.n.Load()) {
		return gv.isGone(id), nil
	}
	v := gv.View(g)
	if v == nil {
		return false, nil
	}
	var node cluster.Node
	var ids []string
	for _, n := range v.Nodes() {
		ids = append(ids, n.ID)
		if n.ID == id {
			node = n
		}
	}
	if node.ID == "" {
		return false, nil
	}
	// Its process's addresses are g steps below and h steps above: it
	// must serve no group but 0 and g.
	addr0, err := cluster.ShiftPort(node.Addr, -g*gv.step)
	if err != nil {
		return false, nil
	}
	for h := 1; h < g; h++ {
		addr, _ := cluster.ShiftPort(addr0, h*gv.step)
		if hv := gv.View(h); hv != nil {
			for _, n := range hv.Nodes() {
				if n.Addr == addr {
					return false, nil // a replica of group h too: not the node that brought g
				}
			}
		}
	}
	if len(gv.Ranges(g)) > 0 {
		return true, errors.New("ERR this node's Raft group still owns slots: rebalance with --cluster-weight <its master's id>=0 first")
	}
	if _, err := c0.ChangeSlots(cluster.SlotChange{RemoveGroup: g, Forget: ids}); err != nil {
		return true, err
	}
	for _, n := range c0.Nodes() {
		if n.Addr != addr0 {
			continue
		}
		if n.ID == c0.ID() {
			return true, c0.ForgetSelf()
		}
		return true, c0.Forget(n.ID)
	}
	return true, nil
}
