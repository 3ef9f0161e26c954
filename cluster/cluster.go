package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.etcd.io/bbolt"

	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/raftlog"
)

// Config is a node's cluster settings; only main fills it.
type Config struct {
	Dir          string // the node's data dir: node id, Raft log, snapshots
	NodeID       string // empty: the one kept in Dir, or a new one
	BusAddr      string // host:port the Raft transport listens on
	AnnounceAddr string // host:port clients are sent to (MOVED, CLUSTER SLOTS)
	// AnnounceBusAddr is the Raft address other nodes dial (default BusAddr).
	AnnounceBusAddr string
	Bootstrap       bool   // form a new one-node cluster if this node has no state
	Join            string // RESP host:port of a member to ask to add this node
	Password        string // requirepass, for the RESP connections Join and Meet make
	// AckLeader answers writes once the leader applied them, before a
	// majority holds them (Redis's asynchronous replication).
	AckLeader bool
	// ElectionTimeout is Raft's heartbeat and election timeout (default
	// 1 s); the leader's lease is half of it.
	ElectionTimeout time.Duration
	// Fsync is appendfsync's policy for the Raft log: always, everysec
	// (default) or no.
	Fsync string
	// SnapshotThreshold is how many entries since the last snapshot make
	// a new one (default 8192); with SnapshotGrowth, the fewest.
	SnapshotThreshold uint64
	// SnapshotGrowth, a percentage, also waits for the log since the last
	// snapshot to reach that share of the snapshot's size, and
	// SnapshotMinBytes at least (the log rewrite's auto-rewrite-percentage
	// and auto-rewrite-min-size): a snapshot costs O(jobs), so at millions
	// of jobs a count of entries alone had a node snapshotting most of
	// the time. 0: entries alone.
	SnapshotGrowth   int
	SnapshotMinBytes int64
	// Replicas caps the group's voters (--cluster-replicas, with several
	// groups; 0: every node that joins votes, as in a one-group cluster).
	// A node joining a group that has them all is refused, unless the
	// group is Everywhere (group 0, which holds the slot map every node
	// routes by): there it is added as a nonvoter, which applies the log
	// and counts toward no majority.
	Replicas   int
	Everywhere bool
	// MapFresh, for a group other than 0 of a cluster of several groups,
	// returns once this node's slot map is as new as group 0's leader's
	// (Cluster.SlotsFresh of group 0). A new leader waits for it before it
	// takes writes: one routing by an older map (a node just restarted,
	// its group 0 replica behind) would take writes for slots its group
	// gave away, left where no map sends anyone (TestChaosSlotMoves).
	MapFresh func() error
	// TLS secures the bus and the RESP connections nodes make to each
	// other (tls.go); nil: plain.
	TLS    *TLS
	Logger zerolog.Logger
}

// ReplicaWindow is the engine's ReplicaWindow a cluster node runs with:
// two batches in flight, one being replicated while the next gathers.
// Measured in-process (go test -bench ClusterAdd ./cluster, 128 writers):
// 117k adds/s with 1 ms commit waits, against 35k and 3.5 ms unbounded.
const ReplicaWindow = 2

// Cluster is one node of the Raft group: it replicates its engine, answers
// who leads, and changes membership.
type Cluster struct {
	cfg    Config
	id     string
	log    zerolog.Logger
	rp     atomic.Pointer[raft.Raft] // set by Start; clients may ask before
	trans  *tracker
	store  *raftlog.Store        // the Raft log
	stable *raftboltdb.BoltStore // term and vote
	snaps  *raft.FileSnapshotStore
	fsm    *fsm
	eng    *engine.Engine

	leading atomic.Bool // this node leads and its engine takes writes
	nudging atomic.Bool // a nudge check is due (armNudge)
	// snapLooks counts snapshotLoop's looks as they begin: once it moved
	// by two, a whole look came after the caller's writes (tests).
	snapLooks atomic.Int64
	// trailing is Raft's TrailingLogs, raised while a snapshot is sent
	// (keepLog): sends are the sends under way, keepTimer puts it back.
	trailing  uint64
	keepMu    sync.Mutex
	sends     int         // guarded by keepMu
	keepTimer *time.Timer // guarded by keepMu
	// lastLeader is the id of the last leader Raft named, kept while an
	// election runs: CLUSTER NODES shows it failing, as Redis shows the
	// master it lost.
	lastLeader atomic.Pointer[string]
	// cachedMembers is where members' clients connected when this node
	// last ran (memberscache.go): read once at start, used for a member
	// the applied log has not named yet.
	cachedMembers map[string]member
	// With --cluster-ack leader: batches answered but not yet committed,
	// and whether one failed since the last rebuild.
	unacked atomic.Int64
	lost    atomic.Bool
	// relead: a batch failed while Raft may still have this node lead
	// (a leadership transfer in progress refuses every Apply; a transfer
	// that then fails leaves the leader in place). The follow goroutine
	// rebuilds the engine and leads again (releadIfStuck): nothing else
	// would, since Raft sends no leadership change.
	relead chan struct{}

	// restorePath is a backup's snapshot to install once this node leads
	// (backup.go); "" when none waits. Set by Start, read and cleared by
	// the follow goroutine.
	restorePath string

	// OnRoleChange is called (from one goroutine, in order) when this node
	// starts or stops leading; main unblocks blocked clients on false.
	onRole func(leading bool)

	// groups and onSlots: on group 0 of a cluster of several groups, the
	// number the bootstrap split the slots over (the map a snapshot with
	// none stands for) and who hears of each slot map applied;
	// onGroupChange who hears of each group added or removed (slots.go).
	groups        atomic.Int32
	onSlots       func(*SlotMap)
	onGroupChange func(SlotChange)
	// slotCl is the client of group 0's leader at slotAddr that slot
	// changes are sent through from a follower (slots.go).
	slotMu   sync.Mutex
	slotCl   *redis.Client // guarded by slotMu
	slotAddr string        // guarded by slotMu

	gateKick chan struct{} // gateLoop looks now (versions.go)
	// gateMu orders raising the version with adding a member: a node
	// checked against the old version is in the configuration before the
	// version rises, and is asked too.
	gateMu sync.Mutex
	// versionOf asks the node whose clients connect at addr which format
	// version it reads (askVersion; the in-process tests, which run no
	// RESP server, answer for it).
	versionOf func(addr string) (int, error)
	quit      chan struct{}
	wg        sync.WaitGroup
	stopOnce  sync.Once
	meetOnce  sync.Once // a node in no group joins once (meetAlone)

	trailingLogs uint64 // tests: the log kept behind a snapshot, if not 10240
	// onMeet hears of a MEET that joins a node in no group to a cluster of
	// several groups (OnMeetGroups); nil: such a MEET is refused.
	onMeet func(addr string, l Layout)
}

// New opens the node's stores and its Raft transport (listening on the bus
// address), before the engine exists: the engine takes the cluster as its
// Replicator. Start then runs Raft.
func New(cfg Config) (*Cluster, error) {
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = time.Second
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 8192
	}
	if cfg.AnnounceBusAddr == "" {
		cfg.AnnounceBusAddr = cfg.BusAddr
	}
	dir := filepath.Join(cfg.Dir, "raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if old, err := filepath.Glob(filepath.Join(dir, capturePrefix+"*.tmp")); err == nil {
		for _, p := range old {
			os.Remove(p) // a capture a stop cut short
		}
	}
	id, err := nodeID(cfg.Dir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, id: id, log: cfg.Logger.With().Str("node", id[:8]).Logger(), quit: make(chan struct{})}
	// Segments of the AOF's format (raftlog, docs/decisions/raft-log-store.md):
	// raft-boltdb's msgpack and B-tree commit per batch were half of a
	// follower's CPU a request.
	//
	// Fsync follows appendfsync, as the single node's log does: always,
	// every append is on disk before it counts toward a majority (etcd,
	// Consul); everysec (the default), it is written at once and fsynced
	// every second, so an answered write is in the memory of a majority of
	// machines and on their disks within a second (Kafka's acks=all with
	// the OS flushing). The term and vote are always fsynced, in their own
	// file: a node that forgot its vote could vote twice in one term.
	logPath := filepath.Join(dir, "raft.log")
	c.store, err = raftlog.Open(logPath, raftlog.Options{NoSync: cfg.Fsync != "always"})
	if err != nil {
		return nil, fmt.Errorf("raft log %s: %w", logPath, err)
	}
	if err := migrateBolt(dir, c.store, c.log); err != nil {
		c.store.Close()
		return nil, fmt.Errorf("raft log %s: copying %s: %w", logPath, filepath.Join(dir, boltLog), err)
	}
	c.stable, err = raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, "raft-stable.db"),
		BoltOptions: &bbolt.Options{Timeout: 10 * time.Second},
	})
	if err != nil {
		c.store.Close()
		return nil, fmt.Errorf("raft state %s: %w", filepath.Join(dir, "raft-stable.db"), err)
	}
	hl := newHclog(c.log)
	c.snaps, err = raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		c.store.Close()
		return nil, fmt.Errorf("raft snapshots: %w", err)
	}
	c.trans, err = newTracker(cfg.BusAddr, cfg.AnnounceBusAddr, hl, cfg.ElectionTimeout, cfg.TLS)
	if err != nil {
		c.store.Close()
		return nil, fmt.Errorf("cluster bus %s: %w", cfg.BusAddr, err)
	}
	c.fsm = &fsm{c: c, members: make(map[string]member), cacheDir: dir}
	c.fsm.version.Store(minFormat)
	c.trans.framing = func() bool { return c.fsm.version.Load() >= busFramingSince }
	c.trans.member = c.member
	c.trans.self = id
	c.trans.sends = c.keepLog
	c.gateKick = make(chan struct{}, 1)
	c.relead = make(chan struct{}, 1)
	c.versionOf = c.askVersion
	c.cachedMembers = loadMembersCache(dir)
	return c, nil
}

// ID is this node's id.
func (c *Cluster) ID() string { return c.id }

// Start runs Raft over eng (which New's caller created with this cluster as
// its Replicator, as a follower): it restores the last snapshot and the
// log, bootstraps or joins as configured, and follows leadership. onRole is
// called when this node starts (true) or stops (false) leading.
func (c *Cluster) Start(eng *engine.Engine, onRole func(leading bool)) error {
	c.eng, c.onRole = eng, onRole
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.id)
	rc.HeartbeatTimeout = c.cfg.ElectionTimeout
	rc.ElectionTimeout = c.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = c.cfg.ElectionTimeout / 2
	// CommitTimeout paces the empty appends that tell followers the
	// commit index when no entry comes: hashicorp's default, 50 ms. At 5
	// ms an idle group cost its leader 4.4% of a CPU (an idle node of 3
	// groups 5.6%; now 1.3% and 1.45%). Followers learn of the last
	// writes of a burst from armNudge instead, and of a slot change at
	// once (nudgeFollowers).
	rc.CommitTimeout = 50 * time.Millisecond
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.SnapshotThreshold = 4 * c.cfg.SnapshotThreshold // a backstop: snapshotLoop takes them (snapshot.go)
	if c.cfg.SnapshotGrowth > 0 {
		// Raft's own timer counts entries only, and copies the whole state
		// in memory when it fires: leave the snapshots to snapshotLoop.
		rc.SnapshotThreshold = math.MaxUint64 / 2
	}
	rc.SnapshotInterval = 10 * time.Second
	rc.TrailingLogs = 10240
	if c.trailingLogs > 0 {
		rc.TrailingLogs = c.trailingLogs
	}
	c.trailing = rc.TrailingLogs
	rc.Logger = newHclog(c.log)
	notify := make(chan bool, 16)
	rc.NotifyCh = notify
	logs, err := raft.NewLogCache(1024, c.store) // followers catching up read recent entries from memory
	if err != nil {
		return err
	}
	has, err := raft.HasExistingState(c.store, c.stable, c.snaps)
	if err != nil {
		return err
	}
	if err := c.checkRestore(has); err != nil {
		return err
	}
	r, err := raft.NewRaft(rc, c.fsm, logs, c.stable, c.snaps, c.trans)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	c.rp.Store(r)
	c.watchLeader(r)
	if c.cfg.Bootstrap {
		if !has {
			f := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
				Suffrage: raft.Voter, ID: raft.ServerID(c.id), Address: raft.ServerAddress(c.cfg.AnnounceBusAddr),
			}}})
			if err := f.Error(); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
			c.log.Info().Str("bus", c.cfg.AnnounceBusAddr).Msg("cluster bootstrapped: a new one-node group")
		}
	}
	c.wg.Add(1)
	go c.follow(notify)
	if c.cfg.Join != "" {
		c.wg.Add(1)
		go c.joinLoop()
	}
	c.wg.Add(1)
	go c.snapshotLoop()
	c.wg.Add(1)
	go c.gateLoop()
	if c.cfg.Fsync == "everysec" {
		c.wg.Add(1)
		go c.syncLoop()
	}
	return nil
}

// Close leaves Raft running no more: the node stops answering its peers.
// The engine is closed by its owner afterwards.
func (c *Cluster) Close() error {
	var err error
	c.stopOnce.Do(func() {
		c.slotMu.Lock()
		if c.slotCl != nil {
			c.slotCl.Close()
		}
		c.slotMu.Unlock()
		if r := c.r(); r != nil && r.State() == raft.Leader {
			// A graceful stop hands leadership over at once instead of
			// leaving the others to notice after an election timeout
			// (rolling restarts).
			if err := r.LeadershipTransfer().Error(); err == nil {
				c.log.Info().Msg("cluster: leadership handed over before stopping")
			}
		}
		close(c.quit)
		c.keepMu.Lock()
		if c.keepTimer != nil {
			c.keepTimer.Stop()
		}
		c.keepMu.Unlock()
		if r := c.r(); r != nil {
			err = r.Shutdown().Error()
		}
		c.wg.Wait()
		c.trans.Close()
		c.store.Close()
		c.stable.Close()
	})
	return err
}

// Propose hands one engine batch to Raft (engine.Replicator).
func (c *Cluster) Propose(batch []byte) engine.Proposal {
	if v := c.fsm.version.Load(); v < FormatVersion {
		// Members of an older delayd (downgrade.go); never fails on what
		// the engine makes: if it did, they would fail on it anyway.
		if b, err := downgrade(batch, v); err == nil {
			batch = b
		} else {
			c.log.Error().Err(err).Msg("cluster: a batch could not be written for the cluster's older members")
		}
	}
	data := make([]byte, 0, len(batch)+1)
	data = append(append(data, entryEngine), batch...)
	f := c.r().Apply(data, 0)
	if !c.cfg.AckLeader {
		return watched{f, c}
	}
	// --cluster-ack leader: the reply goes at once, as with Redis's
	// asynchronous replication; the batch is watched here instead, so that
	// a snapshot waits for it and a batch that fails still makes the node
	// rebuild when it steps down.
	c.unacked.Add(1)
	go func() {
		if f.Error() != nil {
			c.lost.Store(true)
			c.batchFailed()
		} else {
			c.armNudge()
		}
		c.unacked.Add(-1)
	}()
	return done{}
}

// watched is a batch's future that tells the follow goroutine when the
// batch failed (batchFailed).
type watched struct {
	raft.ApplyFuture
	c *Cluster
}

func (w watched) Error() error {
	err := w.ApplyFuture.Error()
	if err != nil {
		w.c.batchFailed()
	} else {
		w.c.armNudge()
	}
	return err
}

// batchFailed asks the follow goroutine to check whether this node still
// leads with an engine ahead of the log (releadIfStuck). It never blocks:
// one request pending is enough.
func (c *Cluster) batchFailed() {
	select {
	case c.relead <- struct{}{}:
	default:
	}
}

// done is a proposal answered at once.
type done struct{}

func (done) Error() error { return nil }

// settled is the engine's Settled plus, with --cluster-ack leader, no
// batch still uncommitted or lost.
func (c *Cluster) settled() bool {
	return c.eng.Settled() && c.unacked.Load() == 0 && !c.lost.Load()
}

// follow applies leadership changes in order.
func (c *Cluster) follow(notify <-chan bool) {
	defer c.wg.Done()
	// retry: this node is Raft's leader but does not take writes (a
	// barrier that failed, a batch that did not commit); tried again
	// until it leads or Raft says it no longer does.
	var retry <-chan time.Time
	for {
		select {
		case <-c.quit:
			return
		case lead := <-notify:
			retry = nil
			if lead && !c.becomeLeader() {
				retry = time.After(releadPause)
			} else if !lead {
				c.stepDown()
			}
		case <-c.relead:
			if !c.releadIfStuck() {
				retry = time.After(releadPause)
			}
		case <-retry:
			retry = nil
			if !c.releadIfStuck() {
				retry = time.After(releadPause)
			}
		}
	}
}

// releadPause is the wait between tries to lead again: a leadership
// transfer ends within an election timeout, by a new leader (Raft then
// says so) or by giving up.
const releadPause = 100 * time.Millisecond

// releadIfStuck makes a node that Raft still has lead but whose engine
// cannot take writes lead again: a batch that did not commit (hashicorp/raft
// refuses every Apply while a leadership transfer runs, and a transfer to a
// peer that died fails and leaves this node leader) left the engine ahead
// of the log and refusing writes, which only a rebuild ends; a barrier that
// failed left it not leading at all. Without this the group answered
// CLUSTERDOWN until its next election, which a healthy leader never has
// (TestChaosSlotMoves with a kill every other move: the balancer's
// hand-over to a node just killed). It reports false to be called again.
func (c *Cluster) releadIfStuck() bool {
	r := c.r()
	if r == nil || r.State() != raft.Leader {
		return true // a follower: Raft's notification steps it down
	}
	if c.leading.Load() && !c.eng.ReplFailed() && !c.lost.Load() {
		return true
	}
	c.log.Warn().Msg("leader: a batch did not commit or the barrier failed; rebuilding the engine from the log and leading again")
	c.stepDown()
	return c.becomeLeader()
}

// becomeLeader waits until every entry of earlier terms is applied (the
// barrier), then lets the engine lead: its clock runs, jobs due meanwhile
// become ready, writes are taken. It reports false when Raft still has
// this node lead but it could not take writes yet (the barrier failed):
// the follow goroutine tries again.
func (c *Cluster) becomeLeader() bool {
	start := time.Now()
	if err := c.r().Barrier(10 * time.Second).Error(); err != nil {
		c.log.Warn().Err(err).Msg("new leader: the barrier failed; trying again while Raft has this node lead")
		return c.r().State() != raft.Leader
	}
	if c.r().State() != raft.Leader {
		return true
	}
	if c.restorePath != "" {
		if err := c.restorePending(); err != nil {
			// Taking writes on an empty state would hide the backup.
			c.log.Error().Err(err).Msg("cluster: the restore failed; this node stops")
			go c.Close()
			return true
		}
	}
	if !c.mapFresh() {
		return true // no longer leads (Raft says so) or stopping
	}
	// After a restore: its snapshot holds no version, the entry after it does.
	c.raiseAlone()
	f := c.fsm
	f.mu.Lock()
	if !c.settled() {
		f.rebuildLocked()
	}
	f.ownTerm = c.r().CurrentTerm()
	c.eng.Lead()
	c.leading.Store(true)
	f.mu.Unlock()
	c.log.Info().Uint64("term", f.ownTerm).Dur("took_ms", time.Since(start)).Msg("leading: this node takes writes")
	if c.onRole != nil {
		c.onRole(true)
	}
	c.announceSelf()
	c.seedSlots()
	c.kickGate()
	return true
}

// mapFresh waits, for a group other than 0, until this node routes by a
// slot map as new as group 0's leader's (Config.MapFresh), trying again
// while it leads; false if it stopped leading first. Writes get TRYAGAIN
// meanwhile.
func (c *Cluster) mapFresh() bool {
	if c.cfg.MapFresh == nil {
		return true
	}
	for i := 0; ; i++ {
		err := c.cfg.MapFresh()
		if err == nil {
			return c.r().State() == raft.Leader
		}
		if c.r().State() != raft.Leader {
			return false
		}
		if i == 30 {
			// Not at once: at a cluster's start group 0 often elects
			// its leader after the other groups.
			c.log.Warn().Err(err).Msg("new leader: still waiting for the slot map of group 0 before taking writes")
		}
		select {
		case <-c.quit:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stepDown makes the engine a follower. Writes in flight fail (their
// replies say TRYAGAIN); if any batch did not commit, the engine holds
// effects the group may never have, and is rebuilt from the committed log.
func (c *Cluster) stepDown() {
	if !c.leading.Swap(false) {
		c.eng.Follow()
		return
	}
	c.eng.Follow()
	if c.onRole != nil {
		c.onRole(false)
	}
	c.eng.Drain()
	for c.unacked.Load() > 0 {
		time.Sleep(time.Millisecond) // raft fails them all on leadership loss
	}
	f := c.fsm
	f.mu.Lock()
	if !c.settled() {
		f.rebuildLocked()
	}
	f.mu.Unlock()
	c.log.Info().Msg("following: no longer the leader")
}

func (c *Cluster) r() *raft.Raft { return c.rp.Load() }

// watchLeader keeps the id of each leader Raft names in lastLeader. The
// observer does not block Raft: a change it drops is followed by the next.
func (c *Cluster) watchLeader(r *raft.Raft) {
	ch := make(chan raft.Observation, 16)
	r.RegisterObserver(raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			select {
			case <-c.quit:
				return
			case o := <-ch:
				if id := string(o.Data.(raft.LeaderObservation).LeaderID); id != "" {
					c.lastLeader.Store(&id)
				}
			}
		}
	}()
}

// syncLoop fsyncs the Raft log every second (appendfsync everysec).
func (c *Cluster) syncLoop() {
	defer c.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
			if err := c.store.Sync(); err != nil {
				c.log.Error().Err(err).Msg("cluster: fsync of the raft log failed")
			}
		}
	}
}

// Writable reports whether this node leads and takes writes.
func (c *Cluster) Writable() bool {
	r := c.r()
	return r != nil && c.leading.Load() && r.State() == raft.Leader
}

// Term is the current Raft term.
func (c *Cluster) Term() uint64 {
	if r := c.r(); r != nil {
		return r.CurrentTerm()
	}
	return 0
}

// LastIndex is the last index of this node's Raft log.
func (c *Cluster) LastIndex() uint64 {
	if r := c.r(); r != nil {
		return r.LastIndex()
	}
	return 0
}

// WaitReplicas waits until n followers hold the log up to index.
func (c *Cluster) WaitReplicas(index uint64, n int, timeout time.Duration) int {
	return c.trans.waitReplicas(c.id, index, n, timeout, c.quit)
}

// Leader is the node that takes writes now: another node Raft names leader,
// or this one once it serves (Writable). A node Raft has just elected is
// not yet the leader here: until its barrier is applied it answers
// CLUSTERDOWN, so it must not tell clients it is the master.
func (c *Cluster) Leader() (Node, bool) {
	for _, n := range c.Nodes() {
		if n.Leader {
			return n, true
		}
	}
	return Node{}, false
}

// LastLeader is the other node that led last while none leads now: the
// master an election is replacing. ok is false when a leader is known, when
// this node led last, or when no leader was seen since this node started.
func (c *Cluster) LastLeader() (Node, bool) {
	if _, ok := c.Leader(); ok {
		return Node{}, false
	}
	id := c.lastLeader.Load()
	if id == nil || *id == c.id {
		return Node{}, false
	}
	for _, n := range c.Nodes() {
		if n.ID == *id {
			return n, true
		}
	}
	return Node{}, false
}

// Self is this node.
func (c *Cluster) Self() Node {
	for _, n := range c.Nodes() {
		if n.Self {
			return n
		}
	}
	return Node{ID: c.id, Addr: c.cfg.AnnounceAddr, BusAddr: c.cfg.AnnounceBusAddr, Self: true, Connected: true}
}

// Nodes lists every member of the Raft configuration, leader first, with
// the client address each announced.
func (c *Cluster) Nodes() []Node {
	if c.r() == nil { // still loading
		return []Node{{ID: c.id, Addr: c.cfg.AnnounceAddr, BusAddr: c.cfg.AnnounceBusAddr, Self: true, Connected: true}}
	}
	_, leaderID := c.r().LeaderWithID()
	var servers []raft.Server
	if f := c.r().GetConfiguration(); f.Error() == nil {
		servers = f.Configuration().Servers
	}
	members := c.fsm.memberList()
	iLead := c.r().State() == raft.Leader
	var out []Node
	seen := false
	for _, s := range servers {
		id := string(s.ID)
		n := Node{ID: id, BusAddr: string(s.Address), Voter: s.Suffrage == raft.Voter, Self: id == c.id}
		if m, ok := members[id]; ok {
			n.Addr = m.Addr
		} else if m, ok := c.cachedMembers[id]; ok {
			n.Addr = m.Addr
		}
		if n.Self {
			n.Addr, seen = c.cfg.AnnounceAddr, true
		}
		n.Leader = id == string(leaderID) && leaderID != "" && (!n.Self || c.Writable())
		if n.Leader {
			n.ConfigEpoch = c.r().CurrentTerm()
		}
		switch {
		case n.Self:
			n.Connected = true
			n.Match = c.r().LastIndex()
		case iLead:
			n.Match, n.LastHeard, n.Connected = c.trans.peer(id, c.cfg.ElectionTimeout)
		case n.Leader:
			n.Connected = time.Since(c.r().LastContact()) < 2*c.cfg.ElectionTimeout
			n.Match = c.r().LastIndex() // at least what this node holds
		default:
			// A follower does not hear from the other followers: it shows
			// them up, and as far along as itself, rather than failed or
			// empty (CLUSTER SLOTS drops failed nodes, SHARDS calls an empty
			// replica loading, and rueidis skips both).
			n.Connected = true
			n.Match = c.r().LastIndex()
		}
		if n.Addr == "" {
			continue // a member that has not said where its clients go yet
		}
		out = append(out, n)
	}
	if !seen {
		out = append(out, Node{ID: c.id, Addr: c.cfg.AnnounceAddr, BusAddr: c.cfg.AnnounceBusAddr, Self: true, Connected: true})
	}
	// Leader first, then by id: a stable order for CLUSTER NODES and SLOTS.
	for i := range out {
		if out[i].Leader && i > 0 {
			out[0], out[i] = out[i], out[0]
		}
	}
	return out
}

// nodeID returns the node's id: the one given, else the one kept in dir,
// else a new random one (40 hex digits, as Redis's), which is kept.
func nodeID(dir, given string) (string, error) {
	path := filepath.Join(dir, "node-id")
	if given != "" {
		return given, os.WriteFile(path, []byte(given+"\n"), 0o644)
	}
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var raw [20]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	return id, os.WriteFile(path, []byte(id+"\n"), 0o644)
}
