package engine

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/wheel"
)

// Options configure an Engine. The zero value is usable: every field has a
// default, applied by New.
type Options struct {
	// Tick is the wheel's level-0 tick in milliseconds (default 1). A job is
	// ready at the end of the tick holding its due time, never before.
	Tick int64
	// MaxPayload bounds one payload in bytes (default 4 MiB; exactly this
	// size is accepted).
	MaxPayload int
	// MaxJobs bounds the jobs held in every state (0: no limit).
	MaxJobs int
	// AckTimeout is the ack timeout in ms of jobs added without one (0: a
	// pop removes the job, at-most-once).
	AckTimeout int64
	// Now returns the current unix time. Tests inject nothing: they run the
	// engine inside testing/synctest, whose fake clock drives time.Now and
	// timers alike. Kept as a seam for tools that replay at a given time.
	Now func() time.Time

	// AppendOnly keeps a log in Dir (file LogFile) and replays it at start.
	AppendOnly bool
	Dir        string
	Fsync      string // FsyncAlways, FsyncEverySec (default) or FsyncNo
	FS         aof.FS // default: the real filesystem
	// Repair cuts a log damaged before its tail at the damage (keeping the
	// rest as *.broken) instead of refusing to start.
	Repair bool
	// RewritePercent starts a background rewrite when the log has grown by
	// this percentage over its size after the last rewrite (0: never), and is
	// at least RewriteMinSize bytes.
	RewritePercent int
	RewriteMinSize int64
	Logger         zerolog.Logger

	keepReservations bool // tests: look at the replayed state before start-up releases them
}

// MaxKey bounds queue names a job can be added to, and MaxPayload the
// payload: together they keep every log record under aof.MaxRecordSize.
const (
	MaxKey     = 16 << 10
	MaxPayload = 64 << 20
)

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.Tick <= 0 {
		o.Tick = 1
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = 4 << 20
	}
	if o.MaxPayload > MaxPayload {
		return fmt.Errorf("max-payload-bytes: %d is over %d, the most one log record holds", o.MaxPayload, MaxPayload)
	}
	if o.MaxJobs < 0 {
		o.MaxJobs = 0
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch o.Fsync {
	case "":
		o.Fsync = FsyncEverySec
	case FsyncAlways, FsyncEverySec, FsyncNo:
	default:
		return fmt.Errorf("appendfsync: %q is not always, everysec or no", o.Fsync)
	}
	if o.AppendOnly && o.Dir == "" {
		o.Dir = "."
	}
	return nil
}

// Job states.
const (
	stateFree uint8 = iota
	stateDelayed
	stateReady
	stateReserved
)

var stateNames = [...]string{"free", "delayed", "ready", "reserved"}

const jobSize = unsafe.Sizeof(job{})

// job is one slab record. It holds no pointers so that millions of them cost
// the garbage collector nothing; links are slot numbers plus one (0 = none).
type job struct {
	due        int64  // unix ms the job became or becomes ready
	data       uint64 // arena ref: client id bytes then payload bytes
	sid        uint64 // server-made id, when idLen == 0
	seq        uint64 // add order, breaks ties between equal due times
	plen       uint32 // payload length
	next, prev uint32 // ready list links; next also chains free slots
	hnext      uint32 // next job with the same index hash
	queue      uint32 // index into Engine.queues
	deliveries uint32
	ackTimeout uint32 // ms; 0: a pop removes the job
	retry      int32  // redeliveries allowed; -1: unlimited
	idLen      uint16 // 0: server-made id in sid
	state      uint8
	hasDL      bool // a dead-letter queue is named in Engine.deadLetters
}

// queue is a named ready list plus the clients blocked on it. It exists while
// it holds a job in any state or a waiter; then it is freed.
type queue struct {
	name                     string
	head, tail               uint32 // ready list, slot+1
	delayed, ready, reserved int
	whead, wtail             *waitLink
	nwait                    int
	live                     bool
	// Counters for DELAY.STATS; like the queue, they go when it empties.
	deliveries, redeliveries, acks, nacks, expired, deadLettered uint64
}

// Engine owns every job and queue. See the package doc for the locking story.
type Engine struct {
	opts Options

	mu sync.Mutex // guards everything below

	wheel   *wheel.Wheel
	jobs    slab
	free    uint32            // free slot list head, slot+1
	index   map[uint64]uint32 // hash(queue, id) -> first slot+1 of a chain
	seed    maphash.Seed
	arena   arena
	queues  []queue
	byName  map[string]uint32
	qfree   []uint32
	njobs   int
	seq     uint64
	lastSID uint64
	fired   []uint32
	// deadLetters names the dead-letter queue of the few jobs that have one,
	// by slot, rather than spending 8 bytes of every job on it.
	deadLetters map[uint32][]byte
	armed       int64 // deadline the timer goroutine sleeps until, or 0
	// sidLike is set once a client id that reads as a server id is stored:
	// only then can a new server id collide, and need a lookup.
	sidLike bool
	closed  bool
	stats   Stats

	start   time.Time // monotonic base
	startMs int64     // unix ms at start

	j journal // the append-only log, when on

	wake    chan struct{}
	quit    chan struct{} // stops the timer goroutine
	done    chan struct{}
	logQuit chan struct{} // stops the flusher
}

// Stats are counters since start.
type Stats struct {
	Added        uint64
	Delivered    uint64 // every pop, first deliveries and redeliveries
	Redelivered  uint64 // pops of a job delivered before
	Acked        uint64
	Nacked       uint64
	Expired      uint64 // reservations whose ack timeout passed
	DeadLettered uint64
	Dropped      uint64 // out of retries with no dead-letter queue
	Cancelled    uint64
	Fired        uint64 // delayed jobs that became ready
	Requeued     uint64 // deliveries taken back because the client left
	WaitersNow   int
}

// New returns a running engine. With AppendOnly it first replays the log:
// every job comes back with its state and due time, and jobs whose time
// passed while the server was down become ready, in (due time, add order).
// Close stops it.
func New(opts Options) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// Start the monotonic base on a whole wall-clock millisecond, so the
	// engine's milliseconds tick with the wall clock's: a job due at D is
	// ready when the wall clock reads D, not up to a millisecond later.
	now := opts.Now()
	now = now.Add(-time.Duration(now.UnixNano() % int64(time.Millisecond)))
	e := &Engine{
		opts:        opts,
		index:       make(map[uint64]uint32),
		deadLetters: make(map[uint32][]byte),
		seed:        maphash.MakeSeed(),
		byName:      make(map[string]uint32),
		start:       now,
		startMs:     now.UnixMilli(),
		wake:        make(chan struct{}, 1),
		quit:        make(chan struct{}),
		done:        make(chan struct{}),
		logQuit:     make(chan struct{}),
	}
	if opts.AppendOnly {
		if err := e.openLog(); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	if e.wheel == nil {
		e.wheel = wheel.New(opts.Tick, e.startMs)
	}
	e.advanceLocked(e.nowMs())
	if !opts.keepReservations {
		e.releaseReservations() // logs records: before the flusher starts
	}
	e.mu.Unlock()
	if opts.AppendOnly {
		go e.flusher()
	}
	go e.run()
	return e, nil
}

// releaseReservations ends, at start-up, the deliveries the log left
// reserved: the workers that held them were cut off by the restart, so the
// jobs become ready again (in the order they were reserved) rather than wait
// out their ack timeouts. Like an expiry, this ends a delivery.
func (e *Engine) releaseReservations() {
	var held []uint32
	for s := range e.jobs.n {
		if e.jobs.at(s).state == stateReserved {
			held = append(held, uint32(s))
		}
	}
	slices.SortFunc(held, func(a, b uint32) int { return cmp.Compare(e.jobs.at(a).seq, e.jobs.at(b).seq) })
	now := e.nowMs()
	for _, s := range held {
		e.detach(s)
		e.endDelivery(s, now, 0, true)
	}
}

// nowMs is unix milliseconds read from the monotonic clock: a wall-clock step
// after start cannot make a job early or late. Flooring both parts keeps it
// at or before the true time, so a job is never handed out before its due ms.
func (e *Engine) nowMs() int64 {
	return e.startMs + int64(e.opts.Now().Sub(e.start)/time.Millisecond)
}

// laterMs is now plus d milliseconds, rounded up to a whole millisecond: a
// job added 0.4 ms into a millisecond with a delay of 5 ms must not be
// handed out 4.6 ms later. Used for every relative time (delays, ack
// deadlines), so none fires before the client's clock says it should.
func (e *Engine) laterMs(d int64) int64 {
	_, up := e.clock()
	return up + d
}

// clock reads the time once: now floored (nowMs) and rounded up to a whole
// millisecond (what laterMs adds to).
func (e *Engine) clock() (now, up int64) {
	elapsed := e.opts.Now().Sub(e.start)
	now = e.startMs + int64(elapsed/time.Millisecond)
	up = now
	if elapsed%time.Millisecond != 0 {
		up++
	}
	return now, up
}

// Now returns the engine's current unix time in milliseconds.
func (e *Engine) Now() int64 { return e.nowMs() }

// run is the only goroutine the engine starts: it sleeps on one timer until
// the wheel's next deadline, then advances the wheel by elapsed time. With no
// job delayed it sleeps until woken: an idle server does no work.
func (e *Engine) run() {
	defer close(e.done)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		e.mu.Lock()
		e.advanceLocked(e.nowMs())
		dl, ok := e.wheel.NextDeadline()
		e.armed = 0
		if ok {
			e.armed = dl
			t.Reset(e.until(dl))
		}
		e.mu.Unlock()
		select {
		case <-t.C:
		case <-e.wake:
			t.Stop()
		case <-e.quit:
			t.Stop()
			return
		}
	}
}

// until converts a deadline in unix ms to a duration on the monotonic clock.
func (e *Engine) until(ms int64) time.Duration {
	target := e.start.Add(time.Duration(ms-e.startMs) * time.Millisecond)
	return target.Sub(e.opts.Now())
}

// poke makes the timer goroutine re-read the next deadline if due is earlier
// than the one it sleeps until. Called with mu held.
func (e *Engine) poke(due int64) {
	if e.armed != 0 && e.armed <= due {
		return
	}
	e.armed = due
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// advanceLocked moves every job due by now from the wheel to its ready list,
// in (due, add order), serving blocked clients as jobs arrive. O(1) per job
// plus the sort of one batch.
func (e *Engine) advanceLocked(now int64) {
	if dl, ok := e.wheel.NextDeadline(); !ok || dl > now {
		return
	}
	fired := e.wheel.Advance(now, e.fired[:0])
	e.fired = nil // a nested advance (there should be none) gets its own buffer
	for _, h := range fired {
		j := e.jobs.at(h)
		q := &e.queues[j.queue]
		switch j.state {
		case stateDelayed:
			q.delayed--
			e.stats.Fired++
			e.pushReady(h, false)
			e.serve(j.queue)
		case stateReserved:
			// Like an operation in Kafka's purgatory whose timeout passed.
			q.reserved--
			q.expired++
			j.state = stateFree // the wheel already let go of it
			e.stats.Expired++
			e.endDelivery(h, now, 0, false)
		}
	}
	e.fired = fired[:0]
}

// --- slots, ids and the index ------------------------------------------------

func (e *Engine) allocSlot() uint32 {
	if e.free != 0 {
		s := e.free - 1
		e.free = e.jobs.at(s).next
		*e.jobs.at(s) = job{}
		return s
	}
	return e.jobs.add()
}

func (e *Engine) freeSlot(s uint32) {
	j := e.jobs.at(s)
	if j.hasDL {
		delete(e.deadLetters, s)
	}
	e.arena.free(j.data, int(j.idLen)+int(j.plen))
	*j = job{next: e.free}
	e.free = s + 1
}

// idOf returns the job's id; buf backs a server id's rendering.
func (e *Engine) idOf(j *job, buf *[sidLen]byte) []byte {
	if j.idLen == 0 {
		return renderSID(buf, j.sid)
	}
	return e.arena.bytes(j.data, int(j.idLen))
}

func (e *Engine) payloadOf(j *job) []byte {
	if j.plen == 0 {
		return nil
	}
	return e.arena.bytes(j.data, int(j.idLen)+int(j.plen))[j.idLen:]
}

func (e *Engine) hashKey(q uint32, id []byte) uint64 {
	return maphash.Bytes(e.seed, id) ^ (uint64(q)+1)*0x9e3779b97f4a7c15
}

// lookup finds the slot of (q, id). O(1) expected.
func (e *Engine) lookup(q uint32, id []byte) (uint32, bool) {
	var buf [sidLen]byte
	for s := e.index[e.hashKey(q, id)]; s != 0; s = e.jobs.at(s - 1).hnext {
		j := e.jobs.at(s - 1)
		if j.queue == q && bytes.Equal(e.idOf(j, &buf), id) {
			return s - 1, true
		}
	}
	return 0, false
}

func (e *Engine) indexInsert(s uint32, id []byte) {
	h := e.hashKey(e.jobs.at(s).queue, id)
	e.jobs.at(s).hnext = e.index[h]
	e.index[h] = s + 1
}

func (e *Engine) indexDelete(s uint32, id []byte) {
	h := e.hashKey(e.jobs.at(s).queue, id)
	p := e.index[h]
	if p == s+1 {
		if n := e.jobs.at(s).hnext; n != 0 {
			e.index[h] = n
		} else {
			delete(e.index, h)
		}
		return
	}
	for p != 0 {
		pj := e.jobs.at(p - 1)
		if pj.hnext == s+1 {
			pj.hnext = e.jobs.at(s).hnext
			return
		}
		p = pj.hnext
	}
}

// --- queues ------------------------------------------------------------------

// queueFor returns the index of the named queue, creating it when create is
// set. The name is copied only when a queue is created.
func (e *Engine) queueFor(name []byte, create bool) (uint32, bool) {
	if qi, ok := e.byName[string(name)]; ok {
		return qi, true
	}
	if !create {
		return 0, false
	}
	var qi uint32
	if n := len(e.qfree); n > 0 {
		qi = e.qfree[n-1]
		e.qfree = e.qfree[:n-1]
	} else {
		e.queues = append(e.queues, queue{})
		qi = uint32(len(e.queues) - 1)
	}
	e.queues[qi] = queue{name: string(name), live: true}
	e.byName[e.queues[qi].name] = qi
	return qi, true
}

// releaseQueue frees a queue that holds nothing, so an empty queue leaves
// nothing behind.
func (e *Engine) releaseQueue(qi uint32) {
	q := &e.queues[qi]
	if !q.live || q.delayed+q.ready+q.reserved > 0 || q.nwait > 0 {
		return
	}
	delete(e.byName, q.name)
	*q = queue{}
	e.qfree = append(e.qfree, qi)
}

func (e *Engine) pushReady(s uint32, atHead bool) {
	j := e.jobs.at(s)
	q := &e.queues[j.queue]
	j.state = stateReady
	q.ready++
	if atHead {
		j.prev, j.next = 0, q.head
		if q.head != 0 {
			e.jobs.at(q.head - 1).prev = s + 1
		} else {
			q.tail = s + 1
		}
		q.head = s + 1
		return
	}
	j.next, j.prev = 0, q.tail
	if q.tail != 0 {
		e.jobs.at(q.tail - 1).next = s + 1
	} else {
		q.head = s + 1
	}
	q.tail = s + 1
}

func (e *Engine) unlinkReady(s uint32) {
	j := e.jobs.at(s)
	q := &e.queues[j.queue]
	if j.prev != 0 {
		e.jobs.at(j.prev - 1).next = j.next
	} else {
		q.head = j.next
	}
	if j.next != 0 {
		e.jobs.at(j.next - 1).prev = j.prev
	} else {
		q.tail = j.prev
	}
	j.next, j.prev = 0, 0
	q.ready--
}

// detach takes a job out of wherever it is (wheel, ready list, reservation)
// and fixes the counts; the slot stays allocated, in no list (stateFree)
// until the caller places it again.
func (e *Engine) detach(s uint32) {
	j := e.jobs.at(s)
	q := &e.queues[j.queue]
	switch j.state {
	case stateDelayed:
		e.wheel.Remove(s)
		q.delayed--
	case stateReady:
		e.unlinkReady(s)
	case stateReserved:
		e.wheel.Remove(s)
		q.reserved--
	}
	j.state = stateFree
}

// remove deletes a job entirely. O(1).
func (e *Engine) remove(s uint32) {
	var buf [sidLen]byte
	j := e.jobs.at(s)
	qi := j.queue
	e.detach(s)
	e.indexDelete(s, e.idOf(j, &buf))
	e.freeSlot(s)
	e.njobs--
	e.releaseQueue(qi)
}

// --- adding ------------------------------------------------------------------

// AddArgs describe one DELAY.ADD / DELAY.ADDAT.
type AddArgs struct {
	Queue   []byte
	ID      []byte // nil: the server makes one
	Payload []byte
	// Delay in ms from now, or, with At set, the absolute unix ms Due.
	Delay   int64
	At      bool
	Due     int64
	Replace bool
	// AckTimeout in ms; -1: the configured default. 0: a pop removes the
	// job; above 0 a pop reserves it until DELAY.ACK or the timeout.
	AckTimeout int64
	// Retry bounds redeliveries (at most Retry+1 deliveries); -1: unlimited.
	Retry int64
	// DeadLetter names the queue that gets the job when no redelivery is
	// left; nil: the job is dropped (and logged).
	DeadLetter []byte
}

// AddResult is what an add did. Ticket is the log position the reply must
// wait for (0 when nothing was logged).
type AddResult struct {
	ID     []byte // freshly allocated
	Added  bool   // false: the id existed and REPLACE was not given
	Ticket uint64
}

// Add stores a job. An existing id without Replace changes nothing. O(1).
func (e *Engine) Add(a AddArgs) (AddResult, error) {
	if len(a.Payload) > e.opts.MaxPayload {
		return AddResult{}, ErrPayloadTooLarge
	}
	if a.ID != nil && (len(a.ID) == 0 || len(a.ID) > 256) {
		return AddResult{}, ErrBadID
	}
	if len(a.Queue) > MaxKey || len(a.DeadLetter) > MaxKey {
		return AddResult{}, ErrKeyTooLong
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.writable(); err != nil {
		return AddResult{}, err
	}
	now, up := e.clock()
	e.advanceLocked(now) // as replay does before applying the record
	r := rec{op: opAdd, time: now, queue: a.Queue, id: a.ID, due: a.Due, payload: a.Payload,
		ackTimeout: a.AckTimeout, retry: a.Retry, deadLetter: a.DeadLetter}
	if !a.At && a.Delay > 0 {
		r.due = up + a.Delay
	} else if !a.At {
		r.due = now
	}
	if r.ackTimeout < 0 {
		r.ackTimeout = e.opts.AckTimeout
	}
	qi, existed := e.queueFor(a.Queue, false)
	exists := false
	if existed && a.ID != nil {
		var s uint32
		if s, exists = e.lookup(qi, a.ID); exists {
			if !a.Replace {
				return AddResult{}, nil
			}
			if e.jobs.at(s).idLen == 0 { // keep a server-made id in its compact form
				r.id, r.sid = nil, e.jobs.at(s).sid
			}
		}
	}
	if !exists && e.opts.MaxJobs > 0 && e.njobs >= e.opts.MaxJobs {
		return AddResult{}, ErrMaxJobs
	}
	if a.ID == nil {
		r.sid = e.newSID(a.Queue, now)
	}
	e.seq++
	r.seq = e.seq
	// Logged before it is applied: if a waiter takes the job at once, its
	// pop must follow the add in the log.
	res := AddResult{Added: true, Ticket: e.logRec(&r)}
	e.put(&r, a.ID == nil)
	if r.id != nil {
		res.ID = append([]byte(nil), r.id...)
	} else {
		var buf [sidLen]byte
		res.ID = append([]byte(nil), renderSID(&buf, r.sid)...)
	}
	e.stats.Added++
	return res, nil
}

// newSID makes the next server id for a job of the named queue. O(1).
func (e *Engine) newSID(queueName []byte, now int64) uint64 {
	e.lastSID = nextSID(e.lastSID, now)
	if !e.sidLike {
		return e.lastSID
	}
	// A client may have chosen this very string as its own id.
	if qi, ok := e.queueFor(queueName, false); ok {
		var buf [sidLen]byte
		for {
			if _, taken := e.lookup(qi, renderSID(&buf, e.lastSID)); !taken {
				break
			}
			e.lastSID++
		}
	}
	return e.lastSID
}

// put applies an add record: the job is created, or replaced whole if its id
// exists, and scheduled. Live adds and replay both come here, so replay
// rebuilds exactly what was live. fresh says the id was just made, so there
// is nothing to replace. O(1) plus any jobs that fall due.
func (e *Engine) put(r *rec, fresh bool) {
	var buf [sidLen]byte
	id := r.id
	if id == nil {
		id = renderSID(&buf, r.sid)
	} else if !e.sidLike {
		_, e.sidLike = parseSID(id)
	}
	if !fresh {
		if qi, ok := e.queueFor(r.queue, false); ok {
			if s, ok := e.lookup(qi, id); ok {
				e.remove(s)
			}
		}
	}
	qi, _ := e.queueFor(r.queue, true)
	s := e.allocSlot()
	j := e.jobs.at(s)
	j.queue = qi
	j.sid = r.sid
	j.idLen = uint16(len(r.id))
	j.data = e.storeData(r.id, r.payload)
	j.plen = uint32(len(r.payload))
	j.due, j.seq, j.deliveries = r.due, r.seq, r.deliveries
	j.ackTimeout = uint32(min(max(r.ackTimeout, 0), 1<<32-1))
	j.retry = int32(min(max(r.retry, -1), 1<<31-1))
	if r.deadLetter != nil {
		j.hasDL = true
		e.deadLetters[s] = append([]byte(nil), r.deadLetter...)
	}
	e.indexInsert(s, id)
	e.njobs++
	e.lastSID = max(e.lastSID, r.sid)
	e.seq = max(e.seq, r.seq)
	switch {
	case r.flags&flagReserved != 0:
		e.reserveAt(s, r.deadline)
		return
	case r.flags&flagHead != 0:
		e.pushReady(s, true)
	case r.flags&flagReady == 0 && r.due > r.time && e.wheel.Add(s, r.due, r.seq):
		j.state = stateDelayed
		e.queues[qi].delayed++
		e.poke(r.due)
		return
	default:
		// Jobs already due in the wheel became ready before this one.
		e.advanceLocked(r.time)
		e.pushReady(s, false)
	}
	e.serve(qi)
}

func (e *Engine) storeData(id, payload []byte) uint64 {
	if len(id) == 0 {
		return e.arena.alloc(payload)
	}
	if len(payload) == 0 {
		return e.arena.alloc(id)
	}
	// One block for both keeps one ref per job.
	buf := make([]byte, 0, len(id)+len(payload))
	buf = append(append(buf, id...), payload...)
	return e.arena.alloc(buf)
}

// --- removing ----------------------------------------------------------------

// Cancel removes the named jobs of a queue, in any state, and returns how
// many existed and the log ticket to wait for. O(1) per id.
func (e *Engine) Cancel(queueName []byte, ids [][]byte) (int, uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.beginWrite(); err != nil {
		return 0, 0, err
	}
	var ticket uint64
	n := 0
	for _, id := range ids {
		qi, ok := e.queueFor(queueName, false)
		if !ok {
			break // the last job went and the queue with it
		}
		if s, ok := e.lookup(qi, id); ok {
			r := e.recFor(opCancel, s)
			ticket = e.logRec(&r) // encodes r before remove frees the id it aliases
			e.remove(s)
			n++
		}
	}
	e.stats.Cancelled += uint64(n)
	return n, ticket, nil
}

// recFor builds the cancel or pop record of the job in slot s.
func (e *Engine) recFor(op byte, s uint32) rec {
	j := e.jobs.at(s)
	r := rec{op: op, time: e.nowMs(), queue: []byte(e.queues[j.queue].name), sid: j.sid}
	if j.idLen > 0 {
		r.id = e.arena.bytes(j.data, int(j.idLen))
	}
	return r
}

// del applies a cancel or pop record.
func (e *Engine) del(r *rec) {
	var buf [sidLen]byte
	id := r.id
	if id == nil {
		id = renderSID(&buf, r.sid)
	}
	if qi, ok := e.queueFor(r.queue, false); ok {
		if s, ok := e.lookup(qi, id); ok {
			e.remove(s)
		}
	}
}

// --- popping -----------------------------------------------------------------

// Delivery is a job handed to a client: copies, safe after the lock is gone.
// It carries what is needed to put the job back if the client turns out to
// be gone, and the log ticket its reply must wait for.
type Delivery struct {
	Queue      []byte
	ID         []byte
	Payload    []byte
	Due        int64
	Deliveries uint32
	Ticket     uint64
	Reserved   bool // the job waits for DELAY.ACK (it has an ack timeout)
	sid        uint64
	seq        uint64
	ackTimeout uint32
	retry      int32
	deadLetter []byte
}

// Pop takes the first ready job of the first non-empty queue, trying names in
// order, as BLPOP does. O(number of names).
func (e *Engine) Pop(names [][]byte) (Delivery, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.popLocked(names, PopDelay)
}

// PopMode says how a pop takes a job.
type PopMode uint8

const (
	// PopDelay is DELAY.POP: from the head; a job with an ack timeout is
	// reserved until DELAY.ACK.
	PopDelay PopMode = iota
	// PopLeft and PopRight are the list pops (LPOP, BLPOP; RPOP, BRPOP):
	// the job is removed whatever its ack timeout.
	PopLeft
	PopRight
)

func (e *Engine) popLocked(names [][]byte, mode PopMode) (Delivery, bool) {
	if e.closed {
		return Delivery{}, false
	}
	e.advanceLocked(e.nowMs())
	for _, name := range names {
		qi, ok := e.queueFor(name, false)
		if !ok || e.queues[qi].head == 0 {
			continue
		}
		return e.takeFrom(qi, mode), true
	}
	return Delivery{}, false
}

// takeFrom takes the job at the end of qi's ready list that mode pops from.
func (e *Engine) takeFrom(qi uint32, mode PopMode) Delivery {
	q := &e.queues[qi]
	if mode == PopRight {
		return e.take(q.tail-1, true)
	}
	return e.take(q.head-1, mode != PopDelay)
}

// take hands the ready job in slot s to a client: it is reserved if it has
// an ack timeout and the pop is not plain, else removed. Pops are served even
// when the log has failed (they are dropped from it then: after a restart
// such a job is delivered again, never lost).
func (e *Engine) take(s uint32, plain bool) Delivery {
	var buf [sidLen]byte
	j := e.jobs.at(s)
	j.deliveries++
	e.stats.Delivered++
	q := &e.queues[j.queue]
	q.deliveries++
	if j.deliveries > 1 {
		e.stats.Redelivered++
		q.redeliveries++
	}
	d := Delivery{
		Queue:      []byte(e.queues[j.queue].name),
		ID:         append([]byte(nil), e.idOf(j, &buf)...),
		Payload:    append([]byte(nil), e.payloadOf(j)...),
		Due:        j.due,
		Deliveries: j.deliveries,
		sid:        j.sid, // 0 for client ids
		seq:        j.seq,
		ackTimeout: j.ackTimeout,
		retry:      j.retry,
		deadLetter: e.deadLetters[s],
	}
	if j.ackTimeout > 0 && !plain {
		e.unlinkReady(s)
		e.seq++
		j.seq = e.seq
		d.Reserved = true
		r := e.recFor(opReserve, s)
		r.due, r.deliveries, r.seq = e.laterMs(int64(j.ackTimeout)), j.deliveries, j.seq
		e.reserveAt(s, r.due)
		d.Ticket = e.logRec(&r)
		return d
	}
	r := e.recFor(opPop, s)
	d.Ticket = e.logRec(&r) // encodes r before remove frees the id it aliases
	e.remove(s)
	return d
}

// Requeue puts a delivered job back at the head of its ready list: the client
// it was handed to was gone before the reply reached it. If the id was reused
// meanwhile, the newer job wins and the returned job is dropped.
//
// The delivery did not reach a worker, so it does not count as one.
func (e *Engine) Requeue(d Delivery) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.nowMs())
	deliveries := d.Deliveries - 1
	if qi, ok := e.queueFor(d.Queue, false); ok {
		if s, taken := e.lookup(qi, d.ID); taken {
			j := e.jobs.at(s)
			if !d.Reserved || j.state != stateReserved || j.deliveries != d.Deliveries {
				return false // the id now names another job, or this one moved on
			}
			// Still reserved by the delivery that failed: back to the head.
			e.detach(s)
			j.deliveries = deliveries
			r := e.recFor(opMove, s)
			r.due, r.seq, r.deliveries, r.flags = j.due, j.seq, deliveries, flagHead
			e.logRec(&r)
			e.pushReady(s, true)
			e.serve(qi)
			e.stats.Requeued++
			return true
		}
	}
	if d.Reserved {
		return false // acknowledged or expired meanwhile
	}
	r := rec{op: opAdd, time: e.nowMs(), queue: d.Queue, sid: d.sid, due: d.Due,
		seq: d.seq, deliveries: deliveries, flags: flagHead, payload: d.Payload,
		ackTimeout: int64(d.ackTimeout), retry: int64(d.retry), deadLetter: d.deadLetter}
	if d.sid == 0 {
		r.id = d.ID
	}
	e.logRec(&r) // before put, which may hand the job to a waiter
	e.put(&r, false)
	e.stats.Requeued++
	return true
}

// --- reading -----------------------------------------------------------------

// JobInfo is what DELAY.GET shows.
type JobInfo struct {
	ID, Queue, Payload []byte
	State              string
	Due                int64
	Deliveries         uint32
	AckDeadline        int64 // 0 unless reserved
}

// Get returns a job's fields. O(1).
func (e *Engine) Get(queueName, id []byte) (JobInfo, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return JobInfo{}, false
	}
	s, ok := e.lookup(qi, id)
	if !ok {
		return JobInfo{}, false
	}
	j := e.jobs.at(s)
	info := JobInfo{
		ID:         append([]byte(nil), id...),
		Queue:      append([]byte(nil), queueName...),
		Payload:    append([]byte(nil), e.payloadOf(j)...),
		State:      stateNames[j.state],
		Due:        j.due,
		Deliveries: j.deliveries,
	}
	if j.state == stateReserved {
		info.AckDeadline, _ = e.wheel.Due(s)
	}
	return info, true
}

// QueueStats counts a queue's jobs by state, and what happened to them while
// the queue existed.
type QueueStats struct {
	Delayed, Ready, Reserved int

	Deliveries, Redeliveries, Acks, Nacks, Expired, DeadLettered uint64
}

// QueueStats returns the counts of one queue (zeros when it does not exist).
func (e *Engine) QueueStats(queueName []byte) QueueStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return QueueStats{}
	}
	q := &e.queues[qi]
	return QueueStats{Delayed: q.delayed, Ready: q.ready, Reserved: q.reserved,
		Deliveries: q.deliveries, Redeliveries: q.redeliveries, Acks: q.acks, Nacks: q.nacks,
		Expired: q.expired, DeadLettered: q.deadLettered}
}

// Pair is an id and a payload.
type Pair struct{ ID, Payload []byte }

// Peek returns up to count ready jobs from the head of a queue, not removed.
// O(count).
func (e *Engine) Peek(queueName []byte, count int) []Pair {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.nowMs())
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return nil
	}
	var out []Pair
	var buf [sidLen]byte
	for s := e.queues[qi].head; s != 0 && len(out) < count; s = e.jobs.at(s - 1).next {
		j := e.jobs.at(s - 1)
		out = append(out, Pair{
			ID:      append([]byte(nil), e.idOf(j, &buf)...),
			Payload: append([]byte(nil), e.payloadOf(j)...),
		})
	}
	return out
}

// Exists reports whether a queue holds a job in any state.
func (e *Engine) Exists(queueName []byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return false
	}
	q := &e.queues[qi]
	return q.delayed+q.ready+q.reserved > 0
}

// Info is a snapshot for INFO and DBSIZE.
type Info struct {
	Jobs, Queues             int // queues holding at least one job
	Delayed, Ready, Reserved int
	Waiters                  int
	MemoryBytes              int64 // slabs, arena and index, approximately
	PayloadBytes             int64
	Stats
}

// Info returns a snapshot of counts. O(queues).
func (e *Engine) Info() Info {
	e.mu.Lock()
	defer e.mu.Unlock()
	in := Info{Jobs: e.njobs, Stats: e.stats}
	for i := range e.queues {
		q := &e.queues[i]
		if !q.live {
			continue
		}
		if q.delayed+q.ready+q.reserved > 0 {
			in.Queues++
		}
		in.Delayed += q.delayed
		in.Ready += q.ready
		in.Reserved += q.reserved
	}
	in.Waiters = e.stats.WaitersNow // clients, not client-key pairs
	// The wheel's slab grows with the job slab; its node is about 32 bytes.
	in.MemoryBytes = e.jobs.bytes() + int64(e.jobs.n)*32 + e.arena.footprint() +
		int64(len(e.index))*16 + int64(cap(e.queues))*int64(unsafe.Sizeof(queue{}))
	in.PayloadBytes = e.arena.inUse
	return in
}

// Stop refuses new writes and pops, resolves every blocked client with a
// null reply, and stops the timer. The log stays open so that connections
// still finishing (and jobs handed back by clients that left) are logged;
// Close ends it.
func (e *Engine) Stop() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	for i := range e.queues {
		q := &e.queues[i]
		for l := q.whead; l != nil; l = q.whead {
			e.resolve(l.w, false)
		}
	}
	e.mu.Unlock()
	close(e.quit)
	<-e.done
}

// Close stops the engine and flushes and fsyncs the log, whatever the fsync
// policy, then closes it.
func (e *Engine) Close() error {
	e.Stop()
	if e.j.log == nil {
		return nil
	}
	select {
	case <-e.logQuit:
		return nil // already closed
	default:
	}
	close(e.logQuit)
	<-e.j.done
	e.j.wmu.Lock()
	defer e.j.wmu.Unlock()
	return e.j.log.Close()
}
