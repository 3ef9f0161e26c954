package main

import (
	"context"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/resp"
)

// Groups that start after the process did (docs/decisions/add-node.md):
// redis-cli --cluster add-node meets a node in no group with a cluster of
// several groups; that node joins group 0 and adds a group of its own to
// the slot map, owning no slot, which rebalance then fills. Every process
// applying the add starts the group if it is one of its hosts, else a view
// of it read from one that is.

// groupRunner starts this process's groups at run time, as main's start-up
// loop does at start: one added to the map, or the view of one added.
type groupRunner struct {
	ccfg  cluster.Config
	dopts commands.Options
	ropts resp.Options
	cfg   config
	gv    *groupsView
	log   zerolog.Logger

	// Adds group 0 applied, not yet acted on: its apply must not wait for a
	// group to start.
	qmu   sync.Mutex
	queue []cluster.SlotChange
	kick  chan struct{}

	mu      sync.Mutex
	groups  []*group       // every group started, group 0 first
	layout  cluster.Layout // as the groups file says
	started bool           // start-up is over: adds are acted on
	stopped bool           // the process stops: no group starts
	// bootstrapped is set once this process started a group it added.
	bootstrapped atomic.Bool
}

func newGroupRunner(ccfg cluster.Config, dopts commands.Options, ropts resp.Options, cfg config, gv *groupsView,
	l cluster.Layout, log zerolog.Logger) *groupRunner {
	return &groupRunner{ccfg: ccfg, dopts: dopts, ropts: ropts, cfg: cfg, gv: gv, layout: l, log: log,
		kick: make(chan struct{}, 1)}
}

// added is group 0's OnGroupChange: it runs in group 0's apply.
func (r *groupRunner) added(ch cluster.SlotChange) {
	r.qmu.Lock()
	r.queue = append(r.queue, ch)
	r.qmu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// startedUp hands the runner the groups main's start-up loop started and
// the layout it ended with, and acts on adds from then on, until ctx ends.
// Adds applied during the start (group 0 replaying its log) wait for it:
// the loop may be starting the same group from the file.
func (r *groupRunner) startedUp(ctx context.Context, groups []*group, l cluster.Layout) {
	r.mu.Lock()
	r.groups = append(r.groups, groups...)
	if l.Total() >= r.layout.Total() {
		r.layout = l
	}
	r.started = true
	r.mu.Unlock()
	go func() {
		for {
			r.qmu.Lock()
			q := r.queue
			r.queue = nil
			r.qmu.Unlock()
			for _, ch := range q {
				if ch.RemoveGroup != 0 {
					r.remove(ctx, ch)
				} else {
					r.start(ch)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-r.kick:
			}
		}
	}()
}

// stop makes the runner start nothing more, and returns every group
// started, for the process to stop.
func (r *groupRunner) stop() []*group {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	return append([]*group(nil), r.groups...)
}

// start acts on an add: starts group ch.AddGroup if this process is one of
// its hosts (bootstrapping it if the first), else views it. An add
// applied again (group 0 replays its log at a restart) finds it done.
func (r *groupRunner) start(ch cluster.SlotChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := ch.AddGroup
	c0 := r.gv.clusters[0].Load()
	if r.stopped || c0 == nil || r.gv.clusters[g].Load() != nil || r.gv.remote[g].Load() != nil {
		return
	}
	glog := r.log.With().Int("group", g).Logger()
	host := slices.Index(ch.Hosts, c0.ID())
	join := cluster.NotHeld
	switch {
	case host < 0:
		r.gv.remote[g].Store(&remoteGroup{g: g})
		glog.Info().Strs("hosts", ch.Hosts).Msg("cluster: a group was added; this node holds no replica of it")
	default:
		join = ch.First
		if host == 0 {
			join = ""
		}
		gr, err := r.startGroup(g, join)
		if err != nil {
			// The group runs on its other hosts, one replica short; this
			// process shows it as it shows a group it does not hold.
			glog.Error().Err(err).Msg("cluster: starting a group added to the map failed")
			r.gv.remote[g].Store(&remoteGroup{g: g})
			join = cluster.NotHeld
			break
		}
		r.groups = append(r.groups, gr)
		if host == 0 {
			r.bootstrapped.Store(true)
		}
		glog.Info().Bool("bootstrap", host == 0).Str("via", ch.First).Msg("cluster: a group was added; this node holds a replica")
	}
	r.layout.SetJoin(g, join)
	if err := cluster.WriteLayout(r.cfg.Dir, r.layout); err != nil {
		glog.Error().Err(err).Msg("cluster: writing the groups file failed (the map in group 0's log still has the group)")
	}
}

// removeGrace is how long a removed group's addresses still answer:
// redis-cli --cluster del-node sends the group's other addresses REPLICATE
// and FORGET after the first FORGET removed it, then the node RESET.
const removeGrace = 5 * time.Second

// remove acts on a group's removal (del-node): its members' ids are
// forgotten (a FORGET of them answers OK), and, after removeGrace, this
// process stops running it or viewing it, and deletes its directory: a
// group added later under the same number starts empty.
func (r *groupRunner) remove(ctx context.Context, ch cluster.SlotChange) {
	g := ch.RemoveGroup
	r.gv.forgot(ch.Forget)
	r.log.Info().Int("group", g).Msg("cluster: a group was removed from the map; stopping it here in a moment")
	select {
	case <-ctx.Done():
		return
	case <-time.After(removeGrace):
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.gv.Count() > g {
		return // added again meanwhile
	}
	r.gv.remote[g].Store(nil)
	for i, gr := range r.groups {
		if gr.g != g || gr.clu == nil || r.gv.clusters[g].Load() != gr.clu {
			continue
		}
		r.gv.clusters[g].Store(nil)
		r.gv.disps[g].Store(nil)
		gr.srv.Close(time.Second)
		gr.eng.Stop()
		gr.clu.Close()
		if err := gr.eng.Close(); err != nil {
			r.log.Warn().Err(err).Int("group", g).Msg("cluster: closing a removed group's engine")
		}
		r.groups = slices.Delete(r.groups, i, i+1)
		if err := os.RemoveAll(cluster.GroupDir(r.cfg.Dir, g)); err != nil {
			r.log.Warn().Err(err).Int("group", g).Msg("cluster: deleting a removed group's directory")
		}
		break
	}
	if len(r.layout.Join) > g {
		r.layout.Join = r.layout.Join[:g]
		if err := cluster.WriteLayout(r.cfg.Dir, r.layout); err != nil {
			r.log.Error().Err(err).Msg("cluster: writing the groups file failed")
		}
	}
	r.log.Info().Int("group", g).Msg("cluster: a removed group stopped")
}

// startGroup starts group g whole (the start-up loop's steps for one
// group): its Cluster, dispatcher and listener, its engine, its Raft,
// bootstrapped when join is "". Under r.mu.
func (r *groupRunner) startGroup(g int, join string) (*group, error) {
	base := r.ccfg
	base.Bootstrap = join == ""
	gr, err := startGroupFront(base, r.dopts, r.ropts, r.cfg, r.gv, g, join, r.log)
	if err != nil {
		return nil, err
	}
	if err := startGroupRaft(gr, r.cfg, r.log); err != nil {
		r.gv.clusters[g].Store(nil)
		r.gv.disps[g].Store(nil)
		gr.srv.Close(time.Second)
		gr.clu.Close()
		if gr.eng != nil {
			gr.eng.Stop()
			gr.eng.Close()
		}
		return nil, err
	}
	gr.disp.SetEngine(gr.eng)
	return gr, nil
}

// met is group 0's OnMeetGroups, on a node in no group met into a cluster
// of several groups: before group 0 joins, it learns how the bootstrap
// split the slots (l.Groups groups), takes none of the groups (each has its
// replicas, or will), and, once group 0 gave it the map, adds a group of
// its own.
func (r *groupRunner) met(addr string, l cluster.Layout) {
	c0 := r.gv.clusters[0].Load()
	c0.SetGroups(l.Groups)
	c0.HoldReplicas(r.cfg.ClusterReplicas, true)
	r.gv.setMap(l.Groups, nil)
	r.mu.Lock()
	r.layout = cluster.Layout{Groups: l.Groups}
	r.layout.SetJoin(0, c0JoinOf(l, addr))
	for g := 1; g < l.Total(); g++ {
		r.layout.SetJoin(g, cluster.NotHeld)
		r.gv.remote[g].Store(&remoteGroup{g: g})
	}
	if err := cluster.WriteLayout(r.cfg.Dir, r.layout); err != nil {
		r.log.Error().Err(err).Msg("cluster: writing the groups file failed")
	}
	r.mu.Unlock()
	r.log.Info().Int("groups", l.Total()).Str("via", addr).Msg("cluster: met by a cluster of several groups: joining group 0, then adding a group of this node's")
	go r.addOwnGroup(c0)
}

func c0JoinOf(l cluster.Layout, addr string) string {
	if len(l.Join) > 0 && l.Join[0] != "" {
		return l.Join[0]
	}
	return addr
}

// addOwnGroup commits the add of this node's group once group 0 applied
// the map: the next group number, hosted here first and on the
// --cluster-replicas - 1 other processes that hold fewest groups. A
// refused add (the map grew meanwhile) is made again on the new map.
func (r *groupRunner) addOwnGroup(c0 *cluster.Cluster) {
	for attempt := 0; ; attempt++ {
		time.Sleep(500 * time.Millisecond)
		r.mu.Lock()
		stopped := r.stopped
		r.mu.Unlock()
		if stopped || r.bootstrapped.Load() {
			return
		}
		m := c0.Slots()
		if m == nil {
			continue // not in group 0 yet, or its map not applied
		}
		ch := cluster.SlotChange{AddGroup: m.Groups(), Hosts: r.pickHosts(c0)}
		first, err := cluster.ShiftPort(r.ccfg.AnnounceAddr, ch.AddGroup*r.cfg.ClusterGroupPortStep)
		if err != nil {
			r.log.Error().Err(err).Msg("cluster: no address for a group of this node's")
			return
		}
		ch.First = first
		if _, err = c0.ChangeSlots(ch); err == nil {
			r.log.Info().Int("group", ch.AddGroup).Strs("hosts", ch.Hosts).Msg("cluster: added a group of this node's to the slot map")
			return
		}
		if attempt%10 == 0 {
			r.log.Info().Err(err).Int("group", ch.AddGroup).Msg("cluster: adding a group of this node's failed; retrying")
		}
		time.Sleep(2 * time.Second) // a change answered late may yet apply (bootstrapped)
	}
}

// pickHosts is this process, then up to --cluster-replicas - 1 other
// members of group 0 (every other with 0), those holding fewest groups
// first (CLUSTER GROUPS), then by id: a process that does not answer is
// not picked.
func (r *groupRunner) pickHosts(c0 *cluster.Cluster) []string {
	type cand struct {
		id   string
		held int
	}
	var cs []cand
	for _, n := range c0.Nodes() {
		if n.ID == c0.ID() || n.Addr == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		l, err := c0.AskLayout(ctx, n.Addr)
		cancel()
		if err != nil {
			continue
		}
		held := 0
		for _, a := range l.Join {
			if a != "" {
				held++
			}
		}
		cs = append(cs, cand{n.ID, held})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].held != cs[j].held {
			return cs[i].held < cs[j].held
		}
		return cs[i].id < cs[j].id
	})
	if k := r.cfg.ClusterReplicas - 1; r.cfg.ClusterReplicas > 0 && len(cs) > k {
		cs = cs[:k]
	}
	hosts := []string{c0.ID()}
	for _, c := range cs {
		hosts = append(hosts, c.id)
	}
	return hosts
}

// groupEngine is a group's engine, a follower of its Raft log (which is
// the durability: no append-only file).
func groupEngine(cfg config, log zerolog.Logger, clu *cluster.Cluster) (*engine.Engine, error) {
	return engine.New(engine.Options{
		Tick:          cfg.Tick,
		FineTimer:     true,
		MaxPayload:    cfg.MaxPayloadBytes,
		MaxJobs:       cfg.MaxJobs,
		AckTimeout:    cfg.AckTimeout,
		Logger:        log,
		Replicator:    clu,
		Follower:      true,
		ReplicaWindow: cluster.ReplicaWindow,
	})
}

// startGroupRaft makes gr's engine and runs its Raft over it.
func startGroupRaft(gr *group, cfg config, log zerolog.Logger) error {
	var err error
	if gr.eng, err = groupEngine(cfg, log, gr.clu); err != nil {
		return err
	}
	return gr.clu.Start(gr.eng, func(leading bool) {
		if !leading {
			// As Redis answers clients blocked on a master that becomes a
			// replica: their libraries retry elsewhere.
			gr.disp.UnblockAll(commands.ErrUnblockedRole)
		}
	})
}
