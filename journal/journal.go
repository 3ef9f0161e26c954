// Package journal owns delayd's write-ahead side: the pending batch of
// records and their tickets, group commit to a sink (the append-only log
// file, or in cluster mode a Replicator's proposals), the fsync policies,
// durable waits, what a failed write or fsync leaves behind (the
// disk-full probe, the refusal of writes), and a transaction's unit: its
// records logged as one, in parts if it is big, and gathered on replay.
//
// It knows nothing of jobs or of the engine that owns it. Its owner
// encodes records, appends them in apply order under its own lock
// (Append), and runs the loops that drive the journal's steps (Write,
// Sync, Probe, RunProposer, RunCommitter) on its goroutines: the journal
// starts none. What the journal cannot decide (make the owner's state
// match the log again after a failed write, start a rewrite as the log
// grows) it reports through a small Env of callbacks, as Pebble's commit
// pipeline is built from its commitEnv and knows nothing of its DB.
//
// Group commit: Append adds a record to the pending batch and gives it a
// ticket (its position in the log). A commit takes the whole batch and
// writes it with one write(2) and, under appendfsync always, one fsync,
// then marks every ticket in it durable. A reply waits only for its own
// ticket (WaitDurable), and the next commit starts as soon as the last one
// returns, so throughput holds as writers are added.
//
// Whoever appends a record writes it. A client waiting for its ticket
// commits the pending batch itself when no commit is in progress
// (WaitDurable); the owner's timer goroutine writes what its round logged
// before it sleeps (WriteOwed), and a command whose caller will not wait
// wakes the flusher (Settle). Waking the flusher for a batch its client
// then wrote cost a goroutine hand-off a write, about a tenth of the
// server's CPU at 1,000 jobs/s; under always, the flusher's hand-off and
// the thread switches of its fsync made a request cost 1.5x Redis's CPU at
// -P 1 (1.05x without them). The flusher's one-second tick writes what
// nobody did (a client gone before it waited).
//
// Under everysec and no (inline) a commit is a write, and a waiter that
// finds one in progress (wmu) sleeps until it ends. Under always (leads)
// a commit is a write and an fsync: the first waiter to find none in
// progress leads one (leading), after letting every runnable goroutine
// append first, and the others sleep until it has fsynced, as in
// LevelDB's writer queue and Pebble's commit pipeline. That is Redis's
// event loop, which fsyncs once a turn for every client the turn read: see
// docs/decisions/group-commit.md.
//
// Under appendfsync everysec the fsync is not the flusher's: once a second
// it hands it to the syncer goroutine and goes on writing, as Redis hands
// it to a bio thread. An fsync after a burst of writes takes tens of
// milliseconds, and a write must not wait for it: its reply waits only for
// its write(2). Redis postpones its writes (up to 2 s) while an fsync runs;
// here a reply waits for its write, so the flusher writes at once and,
// past Redis's 2 s, counts the write in aof_delayed_fsync.
//
// A failed write is not applied: aof rolls the file back to its last good
// size, Env.Failed has the owner reload its state from the file under its
// lock (calling Undo, which fails every ticket of the failed batch and any
// given out after it), and writes are refused (Err) until a probe finds the
// disk writable again (a full disk) or for good (a failed fsync).
//
// # Locks
//
// mu guards the pending batch and the tickets; it is held only for O(1)
// work, and the owner takes it (through Append) inside its own lock, never
// the other way round. wmu is held while the log writer is used, smu
// through an fsync, dmu over the durable side and, under always, over
// leading, which a commit holds from taking its batch to marking it
// durable. The order is smu, wmu, the owner's lock, mu, dmu. The owner's
// lock is never taken here: whatever needs it is the owner's, reached
// through Env or done by the owner's loops.
package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/hist"
)

// Fsync policies.
const (
	FsyncAlways   = "always"
	FsyncEverySec = "everysec"
	FsyncNo       = "no"
)

// FsyncPolicy checks an appendfsync setting and returns it, or the default
// (everysec) when it is empty.
func FsyncPolicy(s string) (string, error) {
	switch s {
	case "":
		return FsyncEverySec, nil
	case FsyncAlways, FsyncEverySec, FsyncNo:
		return s, nil
	}
	return "", fmt.Errorf("appendfsync: %q is not always, everysec or no", s)
}

var (
	// ErrNotCommitted is a write's answer in cluster mode when its batch
	// did not commit before leadership changed. It was applied on the old
	// leader only, which rebuilds without it; the new leader may still
	// commit it (an entry a leader appended can outlive it), so the client
	// cannot know, and retries: an add without an ID may then be there
	// twice, never lost.
	ErrNotCommitted = errors.New("the write may not have been committed: leadership changed")
	// ErrRewriteRunning is returned by BeginRewrite while one is in progress.
	ErrRewriteRunning = errors.New("Background append only file rewriting already in progress")

	errRewriteAborted = errors.New("a log write failed during the rewrite; it was abandoned")
)

// Options configure a Journal. One of FS (with Path) and Replicator is the
// sink.
type Options struct {
	FS     aof.FS
	Path   string
	Fsync  string // FsyncAlways, FsyncEverySec or FsyncNo
	Logger zerolog.Logger

	// Replicator, in cluster mode, takes the batches the log file would.
	Replicator Replicator
	// Window bounds the batches proposed and not yet committed (0: none).
	Window int

	// SegmentSize is the size past which the active segment of a
	// segmented log rolls (segments.go); 0 never rolls.
	SegmentSize int64
}

// Env is what the journal needs from its owner. Both are called from the
// goroutine that wrote the batch (the owner's flusher, or a client in
// WaitDurable), with none of the journal's locks held.
type Env struct {
	// Failed is told that the write of the batch whose first ticket is
	// first failed with err (fsyncErr: its fsync did, or the writer failed
	// for good). The owner takes its lock, calls Undo, makes its state
	// match the log again, and reports whether the failure may end by
	// itself (Retrying): then the owner's flusher probes the log.
	Failed func(first uint64, err error, fsyncErr bool) (retry bool)
	// Written is told the log's size after each batch written: the owner
	// may start a rewrite.
	Written func(size int64)
	// Linger, if set, returns after a short pause in which the process
	// polled the network: a commit leader under appendfsync always calls
	// it before taking a batch while other clients are writing (lead).
	Linger func()
	// Pause, if set, returns after a short sleep in which the process
	// polled the network (finetimer.Pause): Tail calls it between its
	// slices of work. Unset, Tail only yields (runtime.Gosched).
	Pause func()
	// Now, if set, is Tail's clock for its slices (tests fake it); unset,
	// time.Now.
	Now func() time.Time
}

// Journal is the pending batch, its sink, and the tickets' durability.
type Journal struct {
	opts Options
	env  Env
	// inline says a client waiting for its record (WaitDurable) writes
	// the pending batch itself when no write is in progress, instead of
	// waking the flusher and sleeping until it has written: two goroutine
	// hand-offs fewer for each reply that waits for the log. It is off
	// under appendfsync always, whose waiters lead commits that hold
	// through their fsync (leads), and in cluster mode, where batches go
	// to consensus.
	inline bool
	// leads says a client waiting for its record under appendfsync always
	// commits the pending batch (a write and an fsync) itself when no
	// commit is in progress: it leads the group commit (lead).
	leads bool
	// slowSync says the last commit's fsync took over rawSyncMax: the next
	// one parks in the poller whatever its batch. Used by the leader only.
	slowSync bool
	// lastBatch is how many tickets the last commit under appendfsync
	// always held: more than one says others are writing (lead,
	// commitSync). Used by the leader only.
	lastBatch uint64

	wmu sync.Mutex  // held while the log writer is used (a batch's writer, rewrite switch)
	log *aof.Writer // guarded by wmu to use; replaced under wmu and mu
	// owed says records are pending that no writer has been woken for
	// (inline only): a client that waits for them writes them itself, and
	// whoever appended records no client waits for wakes the flusher
	// (Settle, WriteOwed). Set under mu, cleared when a batch is taken.
	owed  atomic.Bool
	spare []byte // guarded by wmu: the batch buffer not in use (double buffering)
	// rspare is cluster mode's spare: the last batch proposed, whose array
	// the next pend reuses (Propose copies what it keeps). Guarded by mu.
	rspare    []byte
	dirty     atomic.Bool // written since the last fsync began (everysec)
	wantProbe atomic.Bool // a write failed outside the flusher: it must probe the log
	// smu is held through an fsync and through the closing of a log, so a
	// rewrite's switch never closes the log an fsync is using (that fsync
	// failed and was taken for a disk error). It comes before wmu and is
	// never taken with wmu or mu held: the switch closes the old log after
	// it lets go of both, so a slow fsync delays the switch, never a write.
	smu chanLock
	// syncStart is when the background fsync (appendfsync everysec) in
	// flight began, in Unix ns, or 0: the flusher starts one only when none
	// runs, and counts the writes it makes while one has run over 2 s.
	syncStart atomic.Int64
	// broken is the log failure that refuses writes (nil: none). It is
	// set only by Undo and Break, which the owner calls under its lock, so
	// a write it applies either sees it (Err) or was appended before it.
	broken atomic.Pointer[error]

	mu        sync.Mutex
	pend      []byte // guarded by mu: records, each as uvarint length then bytes
	pendFirst uint64 // guarded by mu
	ticket    uint64 // guarded by mu: last ticket given out
	proposing bool   // guarded by mu: cluster mode, a batch left pend and is not yet in flight
	// retry says broken came from a write that was rolled back (a full
	// disk): the flusher probes the log and clears broken once a write and
	// an fsync succeed. An fsync failure is never retried. Guarded by mu.
	retry     bool
	rewriting bool // guarded by mu
	// aborted is set when a log write fails during a rewrite: its tail then
	// holds writes that were undone, so the rewrite must not be installed.
	aborted bool   // guarded by mu
	rwTail  []byte // guarded by mu: records logged since the rewrite's snapshot began

	kick chan struct{}

	dmu     sync.Mutex
	dcond   *sync.Cond
	durable uint64      // guarded by dmu
	failed  [][2]int64  // guarded by dmu: ticket ranges whose write failed
	lastErr error       // guarded by dmu
	leading bool        // guarded by dmu: a commit is in progress (leads)
	info    Info        // guarded by dmu, but its Rewriting and Broken
	fsyncs  hist.Counts // guarded by dmu: every fsync's duration, µs

	repl replState
	seg  segState
	comp compState
	pay  payloads
}

// New returns a journal writing to opts' sink; a log file is opened by
// Open once the owner has replayed it.
func New(opts Options, env Env) *Journal {
	j := &Journal{opts: opts, env: env, kick: make(chan struct{}, 1)}
	j.inline = opts.Fsync != FsyncAlways && opts.Replicator == nil
	j.leads = opts.Fsync == FsyncAlways && opts.Replicator == nil
	j.dcond = sync.NewCond(&j.dmu)
	if opts.Replicator != nil {
		j.repl.inflight = make(chan inflight, 1024)
		j.repl.pmu = make(chan struct{}, 1)
	}
	return j
}

// Open opens the log file for appending at size, the end of what replay
// read (a torn tail past it is cut): the last segment of a segmented log
// (SetSegments), else the file at Path.
func (j *Journal) Open(size int64) error {
	w, err := aof.OpenAppend(j.opts.FS, j.activePath(), size)
	if err != nil {
		return err
	}
	j.log = w
	j.seg.activeSize.Store(w.Size())
	j.info.BaseSize = j.seg.sealed.Load() + w.Size()
	j.info.Size = j.info.BaseSize
	return nil
}

// HasLog says whether the sink is a log file (not a Replicator).
func (j *Journal) HasLog() bool { return j.log != nil }

// Err is the log failure that refuses writes, or nil. One atomic load.
func (j *Journal) Err() error {
	if p := j.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// Broken reports whether writes are refused. One atomic load: the owner
// checks it before encoding a record.
func (j *Journal) Broken() bool { return j.broken.Load() != nil }

// Append adds one encoded record to the pending batch and returns its
// ticket. The owner calls it in apply order, under its own lock. O(len(b)).
func (j *Journal) Append(b []byte) uint64 {
	j.mu.Lock()
	j.ticket++
	t := j.ticket
	j.appendLocked(b, t)
	j.mu.Unlock()
	return t
}

// appendLocked appends one record to the pending batch (and to a running
// rewrite's tail). Called with mu held.
func (j *Journal) appendLocked(b []byte, ticket uint64) {
	if len(j.pend) == 0 {
		j.pendFirst = ticket
		if j.inline || j.leads {
			j.owed.Store(true)
		} else {
			j.Wake()
		}
	}
	j.pend = binary.AppendUvarint(j.pend, uint64(len(b)))
	j.pend = append(j.pend, b...)
	if j.rewriting {
		j.rwTail = binary.AppendUvarint(j.rwTail, uint64(len(b)))
		j.rwTail = append(j.rwTail, b...)
	}
}

// Ticket is the last ticket given out (0 on a nil Journal: the log is off).
func (j *Journal) Ticket() uint64 {
	if j == nil {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ticket
}

// Settle is called after each command. willWait says its caller waits for
// the command's ticket, and so writes what is pending itself (WaitDurable);
// otherwise records the command made (a read that fired expiries, say)
// wake the flusher.
func (j *Journal) Settle(willWait bool) {
	if !willWait && j.owed.Load() {
		j.Wake()
	}
}

// WriteOwed writes what the caller's round appended if no writer was woken
// for it: the owner's timer goroutine, before it sleeps. Under always it
// wakes the flusher instead: the timer does not wait for an fsync.
func (j *Journal) WriteOwed() {
	if !j.owed.Load() {
		return
	}
	if j.inline {
		j.TryWrite()
	} else if j.leads {
		j.Wake()
	}
}

// Owed says records are pending that no writer was woken for.
func (j *Journal) Owed() bool { return j.owed.Load() }

// Kick is the channel the flusher waits on: a batch is waiting for it.
func (j *Journal) Kick() <-chan struct{} { return j.kick }

// Wake wakes the flusher.
func (j *Journal) Wake() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// TryWrite writes the pending batch from the calling goroutine if no write
// is in progress, and wakes the flusher if one is: its batch may have been
// taken before the caller's records.
func (j *Journal) TryWrite() {
	if !j.wmu.TryLock() {
		j.Wake()
		return
	}
	if j.commit() {
		j.wantProbe.Store(true) // the flusher probes a full disk
		j.Wake()
	}
}

// Write writes the pending batch (the flusher's step), under always once
// the commit in progress, if any, has ended. It reports whether a failed
// write wants the log probed, now or by a writer before it.
func (j *Journal) Write() (probe bool) {
	if j.leads {
		j.dmu.Lock()
		for j.leading {
			j.dcond.Wait()
		}
		j.leading = true
		j.dmu.Unlock()
		return j.lead() || j.wantProbe.Swap(false)
	}
	j.wmu.Lock()
	return j.commit() || j.wantProbe.Swap(false)
}

// lead commits the pending batch under appendfsync always; the caller set
// leading. It first lets the requests on their way join the batch: a
// commit costs one fsync however many records it holds, so the records
// that join this batch rather than the next are its throughput.
//
// A Gosched lets every goroutine already runnable append its record: with
// one P (a server pinned to one CPU) and no yield the batch was often the
// leader's own record alone. But the connections whose requests arrived
// during the last fsync are not runnable yet: the runtime polls the
// network only once no goroutine is, and the leader, back from its
// Gosched, is. So while other clients are writing (the last batch held
// more than one record) the leader lingers instead (Env.Linger: a pause
// on a timerfd read through the poller, whose expiry the same poll
// reports with those connections), as PostgreSQL's commit_delay waits
// only while commit_siblings other transactions are active. A lone
// client never waits for anyone. commit clears leading.
func (j *Journal) lead() (probe bool) {
	if j.env.Linger != nil && j.lastBatch > 1 {
		j.env.Linger()
	} else {
		runtime.Gosched()
	}
	j.wmu.Lock()
	return j.commit()
}

// commit writes the pending batch to the log, then marks its tickets
// durable (or failed). The caller holds wmu, which commit lets go once the
// batch is written: wmu is held from taking the batch until it is written,
// so a rewrite's switch (which takes wmu, then mu) never finds a batch in
// flight: every record is either written to the old log before the switch,
// or still pending, and so in the rewrite's tail. It reports whether a
// failed write wants the log probed (a full disk).
func (j *Journal) commit() (probe bool) {
	j.mu.Lock()
	batch, first, last := j.pend, j.pendFirst, j.ticket
	j.pend, j.spare = j.spare[:0], batch // double buffer: never the same array
	j.owed.Store(false)
	j.mu.Unlock()
	if len(batch) == 0 {
		j.wmu.Unlock()
		j.endLead()
		return false
	}
	fsyncErr, err := j.rollIfFull()
	if err == nil {
		eachRecord(batch, j.log.Append)
		err = j.log.Flush()
	}
	j.seg.activeSize.Store(j.log.Size())
	size := j.seg.sealed.Load() + j.log.Size()
	j.wmu.Unlock()
	j.dmu.Lock()
	j.info.Size = size
	j.dmu.Unlock()
	if err == nil {
		j.dirty.Store(true)
		if j.opts.Fsync == FsyncAlways {
			err = j.commitSync(last - first + 1)
			j.dirty.Store(false)
			fsyncErr = err != nil
		} else if s := j.syncStart.Load(); s != 0 {
			j.noteDelayedFsync(s)
		}
	}
	if err != nil {
		j.opts.Logger.Error().Err(err).Str("file", j.opts.Path).Msg("append-only log write failed: the writes in flight get an error and are undone; writes are refused")
		// The commit ends after the owner has undone it: no other
		// commit runs while its state is reloaded.
		retry := j.env.Failed(first, err, fsyncErr)
		j.endLead()
		return retry
	}
	j.dmu.Lock()
	j.durable = max(j.durable, last) // a rewrite may have covered more
	j.leading = false
	j.dmu.Unlock()
	j.dcond.Broadcast()
	j.env.Written(size)
	return false
}

// endLead ends a commit that marked nothing durable.
func (j *Journal) endLead() {
	if !j.leads {
		return
	}
	j.dmu.Lock()
	j.leading = false
	j.dmu.Unlock()
	j.dcond.Broadcast()
}

// rawSyncMax is the longest commit fsync after which the next one may
// still be made holding the P (aof.Writer.SyncRaw). A longer one says
// the disk is stalling: the next fsync parks in the poller, so the
// server's other goroutines run meanwhile and a stall holds them up for no
// more than the one fsync that found it.
const rawSyncMax = 10 * time.Millisecond

// rawSyncBatch is, with several Ps, the most tickets a batch may hold for
// its fsync to hold its P. A bigger batch says the server is busy, and the
// work waiting for the P (the next batch's requests) is worth running
// during the fsync: at -P 16, with batches of hundreds, holding the P cost
// a quarter of the throughput, as much as the hand-off cost at -P 1, with
// batches of 10 to 50, where holding it saved it.
const rawSyncBatch = 64

// commitSync fsyncs a commit's batch of n tickets under appendfsync
// always.
//
// With one P (a server pinned to one CPU), while others write (this batch
// or the last held more than one ticket) the fsync goes through AIO and
// the leader parks in the poller (aof.Writer.SyncPolled): the P reads and
// applies the requests that come during the fsync, so when it ends the
// next batch is already appended and its leader writes it at once.
// Redis's event loop blocks in its fdatasync and reads nothing meanwhile;
// holding the only P did the same, and -P 1 with 50 clients ran at 0.85x
// to 0.92x Redis's ZADD (docs/decisions/group-commit.md). A lone writer
// has nothing to overlap: its fsync holds the P (SyncRaw), which saves the
// AIO round (a submit, the kernel worker's switch, the eventfd's wake-up).
//
// With several Ps the other Ps read the next batch while this one holds
// its P through the fsync, so the AIO round buys nothing and cost 0.6x to
// 0.7x of the throughput at -P 1 unpinned: the fsync holds the P for
// batches of up to rawSyncBatch tickets.
//
// Either way, after a fsync over rawSyncMax the next one parks.
func (j *Journal) commitSync(n uint64) error {
	var raw bool
	if runtime.GOMAXPROCS(0) == 1 {
		raw = n == 1 && j.lastBatch <= 1
	} else {
		raw = n <= rawSyncBatch
	}
	j.lastBatch = n
	took, err := j.sync(raw && !j.slowSync)
	j.slowSync = took > rawSyncMax
	return err
}

// WaitDurable blocks until the record with this ticket is in the log (and
// on disk under appendfsync always), or committed in cluster mode. It
// returns the failure if its write failed (ErrNotCommitted in cluster
// mode), in which case the write was not applied. Ticket 0 returns at once.
func (j *Journal) WaitDurable(ticket uint64) error {
	if ticket == 0 {
		return nil
	}
	j.dmu.Lock()
	defer j.dmu.Unlock()
	for j.durable < ticket {
		if j.leads && !j.leading {
			j.leading = true
			j.dmu.Unlock()
			if j.lead() {
				j.wantProbe.Store(true) // the flusher probes a full disk
				j.Wake()
			}
			j.dmu.Lock()
			continue
		}
		if j.inline {
			j.dmu.Unlock()
			j.TryWrite()
			j.dmu.Lock()
			if j.durable >= ticket {
				break
			}
		}
		j.dcond.Wait()
	}
	for _, f := range j.failed {
		if int64(ticket) >= f[0] && int64(ticket) <= f[1] {
			if j.opts.Replicator != nil {
				return ErrNotCommitted
			}
			return j.lastErr
		}
	}
	return nil
}

// Close closes the log file; the owner's flusher has written and synced
// everything (Write, SyncIfDirty) and stopped.
func (j *Journal) Close() error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	for _, w := range j.seg.retired {
		w.Sync() // normally done: the flusher's last fsync took them first
	}
	j.closeRetired()
	j.closePayloads()
	j.seg.gmu.Lock()
	if j.seg.next != nil {
		j.seg.next.Close()
		j.seg.next = nil
		j.seg.hasNext.Store(false)
	}
	j.seg.gmu.Unlock()
	if j.log == nil {
		return nil
	}
	return j.log.Close()
}

// eachRecord calls fn for each length-prefixed record in buf.
func eachRecord(buf []byte, fn func([]byte)) {
	for len(buf) > 0 {
		n, k := binary.Uvarint(buf)
		fn(buf[k : k+int(n)])
		buf = buf[k+int(n):]
	}
}

// chanLock is a mutex made of a channel: a goroutine waiting for it is
// durably blocked for testing/synctest, as one waiting on a sync.Mutex is
// not (a test holding an fsync would otherwise hang its bubble's clock
// while the rewrite's switch waits to close the log).
type chanLock struct {
	once sync.Once
	c    chan struct{}
}

func (l *chanLock) Lock() {
	l.once.Do(func() { l.c = make(chan struct{}, 1) })
	l.c <- struct{}{}
}

func (l *chanLock) Unlock() { <-l.c }
