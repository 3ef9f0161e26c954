package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/delayd/delayd/aof"
)

// The journal's tests drive it as its owner does: an owner with its own
// lock appends records and answers Env (undoing on a failure, as the
// engine reloads), and a test flusher runs the steps the engine's flusher
// runs. Records are opaque bytes here; the engine's tests cover what they
// mean.

const path = "/data/delayd.aof"

type owner struct {
	mu       sync.Mutex
	j        *Journal
	failures []error
	written  []int64
}

func newOwner(t *testing.T, fs aof.FS, fsync string, r Replicator) *owner {
	t.Helper()
	o := &owner{}
	o.j = New(Options{FS: fs, Path: path, Fsync: fsync, Replicator: r}, Env{
		Failed: func(first uint64, err error, fsyncErr bool) bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.failures = append(o.failures, err)
			o.j.Undo(first, err, fsyncErr)
			return o.j.Retrying()
		},
		Written: func(size int64) {
			o.mu.Lock()
			o.written = append(o.written, size)
			o.mu.Unlock()
		},
	})
	if r == nil {
		if err := o.j.Open(0); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// add appends one record under the owner's lock, as a write does.
func (o *owner) add(s string) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.j.Broken() {
		return 0
	}
	return o.j.Append([]byte(s))
}

// flusher runs the flusher's loop until quit closes, then writes what is
// left.
func (o *owner) flusher(quit <-chan struct{}) {
	for {
		select {
		case <-o.j.Kick():
		case <-quit:
			o.j.Write()
			return
		}
		o.j.Write()
	}
}

func records(t *testing.T, fs aof.FS) []string {
	t.Helper()
	var out []string
	if _, err := aof.Replay(fs, path, func(p []byte) error {
		out = append(out, string(p))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGroupCommitSharesFsyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := newOwner(t, aof.SlowSync(fs, time.Millisecond), FsyncAlways, nil)
		before := fs.SyncCount(path)
		quit := make(chan struct{})
		go o.flusher(quit)
		defer close(quit)
		// 100 writers at once, each waiting for its own record to be on
		// disk, as 100 connections under appendfsync always do.
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				if err := o.j.WaitDurable(o.add(fmt.Sprint(i))); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := fs.SyncCount(path) - before; n < 1 || n > 3 {
			t.Fatalf("%d fsyncs for 100 concurrent writes, want them shared (1 to 3)", n)
		}
		if got := len(records(t, fs)); got != 100 {
			t.Fatalf("%d records in the log, want 100", got)
		}
	})
}

// Under always a waiting client leads the commit: no flusher runs here, and
// one wait writes and fsyncs every record pending.
func TestAlwaysWaiterLeadsTheCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := newOwner(t, fs, FsyncAlways, nil)
		before := fs.SyncCount(path)
		t1, t2 := o.add("a"), o.add("b")
		if err := o.j.WaitDurable(t2); err != nil {
			t.Fatal(err)
		}
		if err := o.j.WaitDurable(t1); err != nil {
			t.Fatal(err)
		}
		if got := records(t, fs); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("log holds %q", got)
		}
		if n := fs.SyncCount(path) - before; n != 1 {
			t.Fatalf("%d fsyncs for one commit of two records, want 1", n)
		}
	})
}

// Clients that wait while a commit is in progress share the next one: the
// leader holds the commit through its fsync, and the first of them to run
// after it takes every record they appended meanwhile. A commit that ended
// at the write (as everysec's does) would let each of them lead its own.
func TestAlwaysWaitersShareTheNextFsync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := newOwner(t, aof.SlowSync(fs, time.Millisecond), FsyncAlways, nil)
		quit := make(chan struct{})
		go o.flusher(quit) // woken by nobody here: every writer waits
		defer close(quit)
		before := fs.SyncCount(path)
		lead := make(chan error)
		go func() { lead <- o.j.WaitDurable(o.add("lead")) }()
		synctest.Wait() // the leader is in its fsync
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				if err := o.j.WaitDurable(o.add(fmt.Sprint(i))); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := <-lead; err != nil {
			t.Fatal(err)
		}
		if n := fs.SyncCount(path) - before; n != 2 {
			t.Fatalf("%d fsyncs, want 2: the leader's, then one for the 10 who waited meanwhile", n)
		}
		if got := len(records(t, fs)); got != 11 {
			t.Fatalf("%d records in the log, want 11", got)
		}
	})
}

// A leader lingers (Env.Linger) only while other clients write: a lone
// writer's commit never waits, and after a batch of several the next
// leader's pause lets the writers that come meanwhile share its fsync.
func TestAlwaysLeaderLingersOnlyAmongWriters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := newOwner(t, aof.SlowSync(fs, time.Millisecond), FsyncAlways, nil)
		lingers := 0
		o.j.env.Linger = func() { lingers++; time.Sleep(100 * time.Microsecond) }
		quit := make(chan struct{})
		// The flusher is woken by nobody here: every writer leads or waits.
		// Its last commit, at quit, may linger too.
		go o.flusher(quit)
		defer func() { close(quit); time.Sleep(time.Millisecond) }()
		if err := o.j.WaitDurable(o.add("alone")); err != nil {
			t.Fatal(err)
		}
		if lingers != 0 {
			t.Fatalf("a lone writer lingered %d times", lingers)
		}
		// A batch of several: the leader's fsync, then the others'.
		lead := make(chan error)
		go func() { lead <- o.j.WaitDurable(o.add("lead")) }()
		synctest.Wait()
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() { o.j.WaitDurable(o.add(fmt.Sprint("a", i))) })
		}
		wg.Wait()
		<-lead
		lingers = 0
		before := fs.SyncCount(path)
		// The next leader lingers; writers that come during its pause join
		// its batch: one fsync for all.
		go func() { lead <- o.j.WaitDurable(o.add("next")) }()
		time.Sleep(50 * time.Microsecond) // inside the leader's pause
		for i := range 5 {
			wg.Go(func() { o.j.WaitDurable(o.add(fmt.Sprint("b", i))) })
		}
		wg.Wait()
		if err := <-lead; err != nil {
			t.Fatal(err)
		}
		if lingers != 1 {
			t.Fatalf("the leader after a batch of 5 lingered %d times, want 1", lingers)
		}
		if n := fs.SyncCount(path) - before; n != 1 {
			t.Fatalf("%d fsyncs, want 1: the writers that came during the pause share the leader's", n)
		}
	})
}

// Under always a record no client waits for (its client left, or asked for
// no reply) is written and fsynced by the flusher: at once when the owner
// says nobody will wait (Settle), else at the next tick.
func TestRunFlusherAlways(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := newOwner(t, fs, FsyncAlways, nil)
		before := fs.SyncCount(path)
		quit := make(chan struct{})
		ended := make(chan struct{})
		go func() {
			o.j.RunFlusher(quit, nil, nil, func() bool { return true })
			close(ended)
		}()
		o.add("a")
		o.j.Settle(false)
		synctest.Wait()
		if got := records(t, fs); len(got) != 1 || fs.SyncCount(path)-before != 1 {
			t.Fatalf("after Settle(false): records %q, fsyncs %d", got, fs.SyncCount(path)-before)
		}
		o.add("b")
		o.j.Settle(true) // said it would wait, and did not
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := records(t, fs); len(got) != 2 || fs.SyncCount(path)-before != 2 {
			t.Fatalf("after a tick: records %q, fsyncs %d", got, fs.SyncCount(path)-before)
		}
		close(quit)
		<-ended
	})
}

// Under everysec and no a waiting client writes the batch itself: no
// flusher runs here, and every wait still returns with its record written.
func TestInlineWaiterWritesItsBatch(t *testing.T) {
	for _, fsync := range []string{FsyncEverySec, FsyncNo} {
		t.Run(fsync, func(t *testing.T) {
			fs := aof.NewMemFS()
			o := newOwner(t, fs, fsync, nil)
			syncs := fs.SyncCount(path) // opening the log may fsync it
			t1, t2 := o.add("a"), o.add("b")
			if !o.j.Owed() {
				t.Fatal("records pending with no writer woken are not owed")
			}
			if err := o.j.WaitDurable(t2); err != nil {
				t.Fatal(err)
			}
			if err := o.j.WaitDurable(t1); err != nil {
				t.Fatal(err)
			}
			if got := records(t, fs); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("log holds %q", got)
			}
			if fs.SyncCount(path) != syncs {
				t.Fatal("an inline write fsynced: that is the syncer's (everysec) or nobody's (no)")
			}
		})
	}
}

// A failed write fails its batch and every ticket after it, refuses writes,
// and a probe that succeeds ends it (a full disk).
func TestFailedWriteIsUndoneUntilAProbeSucceeds(t *testing.T) {
	fs := aof.NewMemFS()
	o := newOwner(t, fs, FsyncNo, nil)
	if err := o.j.WaitDurable(o.add("kept")); err != nil {
		t.Fatal(err)
	}
	full := errors.New("no space left on device")
	fs.Inject(aof.Fault{Op: aof.OpWrite, Path: path, Err: full, Sticky: true})
	t1 := o.add("lost1")
	t2 := o.add("lost2")
	if err := o.j.WaitDurable(t2); !errors.Is(err, full) {
		t.Fatalf("wait for a failed write: %v", err)
	}
	if err := o.j.WaitDurable(t1); !errors.Is(err, full) {
		t.Fatalf("wait for the first record of a failed batch: %v", err)
	}
	if len(o.failures) != 1 || !errors.Is(o.j.Err(), full) || !o.j.Retrying() {
		t.Fatalf("failures %v, Err %v, Retrying %v", o.failures, o.j.Err(), o.j.Retrying())
	}
	if o.add("refused") != 0 {
		t.Fatal("a record appended while writes are refused got a ticket")
	}
	if ok, stop := o.j.Probe([]byte("probe")); ok || stop {
		t.Fatalf("probe of a full disk: ok %v stop %v", ok, stop)
	}
	fs.ClearFaults()
	if ok, _ := o.j.Probe([]byte("probe")); !ok {
		t.Fatal("probe failed once the disk had room")
	}
	o.mu.Lock()
	resumed := o.j.Resume()
	o.mu.Unlock()
	if !resumed || o.j.Err() != nil {
		t.Fatalf("Resume %v, Err %v", resumed, o.j.Err())
	}
	if err := o.j.WaitDurable(o.add("after")); err != nil {
		t.Fatal(err)
	}
	if got := records(t, fs); !slices.Equal(got, []string{"kept", "probe", "after"}) {
		t.Fatalf("log holds %q", got)
	}
}

// A failed fsync is never retried: the kernel may have dropped the pages.
func TestFailedFsyncRefusesWritesForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := newOwner(t, fs, FsyncAlways, nil)
		quit := make(chan struct{})
		go o.flusher(quit)
		defer close(quit)
		fs.Inject(aof.Fault{Op: aof.OpSync, Path: path})
		if err := o.j.WaitDurable(o.add("a")); !errors.Is(err, aof.ErrInjected) {
			t.Fatalf("wait for a record whose fsync failed: %v", err)
		}
		if o.j.Err() == nil || o.j.Retrying() {
			t.Fatalf("Err %v, Retrying %v: want refused for good", o.j.Err(), o.j.Retrying())
		}
	})
}

// A rewrite's new log holds its snapshot and then every record appended
// since BeginRewrite, written or still pending when it switched.
func TestRewriteTakesTheTail(t *testing.T) {
	fs := aof.NewMemFS()
	o := newOwner(t, fs, FsyncNo, nil)
	o.j.WaitDurable(o.add("old"))
	if err := o.j.BeginRewrite(); err != nil {
		t.Fatal(err)
	}
	if err := o.j.BeginRewrite(); !errors.Is(err, ErrRewriteRunning) {
		t.Fatalf("a second rewrite: %v", err)
	}
	o.j.WaitDurable(o.add("written"))
	pending := o.add("pending")
	started := time.Now()
	rw, err := o.j.Create(started)
	if err != nil {
		t.Fatal(err)
	}
	rw.Append([]byte("snapshot"))
	if err := rw.Install(); err != nil {
		t.Fatal(err)
	}
	o.j.Finish(started, nil)
	if err := o.j.WaitDurable(pending); err != nil {
		t.Fatal(err)
	}
	if got := records(t, fs); !slices.Equal(got, []string{"snapshot", "written", "pending"}) {
		t.Fatalf("log holds %q", got)
	}
	if in := o.j.Info(); in.Rewriting || in.Rewrites != 1 || in.BaseSize != in.Size {
		t.Fatalf("after the rewrite: %+v", in)
	}
}

// fakeRepl commits or fails each proposal when the test says.
type fakeRepl struct {
	mu    sync.Mutex
	props []*fakeProp
}

type fakeProp struct {
	batch []byte
	done  chan struct{}
	err   error
}

func (p *fakeProp) Error() error { <-p.done; return p.err }

func (r *fakeRepl) Propose(b []byte) Proposal {
	b = bytes.Clone(b) // the journal gathers the next batch in its array
	p := &fakeProp{batch: b, done: make(chan struct{})}
	r.mu.Lock()
	r.props = append(r.props, p)
	r.mu.Unlock()
	return p
}

func (r *fakeRepl) answer(err error) int {
	r.mu.Lock()
	props := r.props
	r.props = nil
	r.mu.Unlock()
	for _, p := range props {
		p.err = err
		close(p.done)
	}
	return len(props)
}

// In cluster mode a ticket is durable when its batch commits; a batch that
// fails fails its tickets and every later one until Rebuilt, which also
// fails what was pending for the state being dropped.
func TestReplicatedTickets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeRepl{}
		o := newOwner(t, nil, FsyncEverySec, r)
		quit := make(chan struct{})
		done := make(chan struct{})
		go o.j.RunProposer(quit)
		go func() { o.j.RunCommitter(); close(done) }()
		defer func() { close(quit); r.answer(nil); <-done }()

		t1 := o.add("a")
		synctest.Wait()
		r.answer(nil)
		if err := o.j.WaitDurable(t1); err != nil {
			t.Fatal(err)
		}
		if !o.j.Settled() {
			t.Fatal("not settled with every batch committed")
		}
		t2 := o.add("b")
		synctest.Wait()
		t3 := o.add("c")
		synctest.Wait()
		lost := errors.New("leadership lost")
		r.answer(lost)
		for _, tk := range []uint64{t2, t3} {
			if err := o.j.WaitDurable(tk); !errors.Is(err, ErrNotCommitted) {
				t.Fatalf("ticket %d: %v, want ErrNotCommitted", tk, err)
			}
		}
		if !o.j.ReplFailed() || o.j.Settled() {
			t.Fatal("a failed batch left the journal settled")
		}
		t4 := o.add("d") // proposed nothing: answered ErrNotCommitted
		synctest.Wait()
		if err := o.j.WaitDurable(t4); !errors.Is(err, ErrNotCommitted) {
			t.Fatalf("a batch after the failure: %v", err)
		}
		o.j.Rebuilt()
		if o.j.ReplFailed() {
			t.Fatal("still failed after Rebuilt")
		}
		t5 := o.add("e")
		synctest.Wait()
		r.answer(nil)
		if err := o.j.WaitDurable(t5); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFsyncPolicy(t *testing.T) {
	for in, want := range map[string]string{"": FsyncEverySec, FsyncAlways: FsyncAlways, FsyncEverySec: FsyncEverySec, FsyncNo: FsyncNo} {
		if got, err := FsyncPolicy(in); err != nil || got != want {
			t.Fatalf("FsyncPolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := FsyncPolicy("sometimes"); err == nil || err.Error() != `appendfsync: "sometimes" is not always, everysec or no` {
		t.Fatalf("FsyncPolicy(sometimes): %v", err)
	}
}

// The flusher's tick writes records nobody waited for and hands everysec's
// fsync to the syncer; closing quit writes the rest and ends both loops.
func TestRunFlusherEverySec(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := newOwner(t, fs, FsyncEverySec, nil)
		before := fs.SyncCount(path)
		quit := make(chan struct{})
		req, done := make(chan struct{}, 1), make(chan struct{})
		go o.j.RunSyncer(req, done, func(err error) { t.Error(err) })
		ended := make(chan struct{})
		go func() {
			o.j.RunFlusher(quit, req, done, func() bool { return true })
			close(ended)
		}()
		o.add("a")
		o.j.Settle(false) // nobody waits: the record is owed to the flusher
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := records(t, fs); len(got) != 1 || fs.SyncCount(path) == before {
			t.Fatalf("after a tick: records %q, fsyncs %d", got, fs.SyncCount(path)-before)
		}
		o.add("b")
		close(quit)
		<-ended
		<-done
		if got := records(t, fs); len(got) != 2 {
			t.Fatalf("after quit: records %q", got)
		}
	})
}

// holdRepl keeps each batch as Propose got it and holds Propose on a gate,
// so a test can add records while a batch is being proposed.
type holdRepl struct {
	gate   chan struct{}
	mu     sync.Mutex
	got    []string // each batch's records, joined by commas
	arrays []*byte  // each batch's array
	torn   int      // batches whose bytes changed while Propose held them
}

func (r *holdRepl) Propose(b []byte) Proposal {
	in := bytes.Clone(b)
	<-r.gate
	var recs []string
	for p := in; len(p) > 0; {
		n, k := binary.Uvarint(p)
		recs = append(recs, string(p[k:k+int(n)]))
		p = p[k+int(n):]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !bytes.Equal(in, b) {
		r.torn++
	}
	r.got = append(r.got, strings.Join(recs, ","))
	r.arrays = append(r.arrays, unsafe.SliceData(b))
	return committed{}
}

type committed struct{}

func (committed) Error() error { return nil }

// Writes made while a batch is proposed gather in another array, and the
// proposed batch's array is reused only once Propose returned: no batch
// changes under its replicator, and a warm leader's batches reuse two
// arrays.
func TestProposedBatchesReuseTwoArrays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &holdRepl{gate: make(chan struct{})}
		o := newOwner(t, nil, FsyncEverySec, r)
		quit := make(chan struct{})
		done := make(chan struct{})
		go o.j.RunProposer(quit)
		go func() { o.j.RunCommitter(); close(done) }()
		o.add("a")
		synctest.Wait() // the proposer holds [a] in Propose
		var want []string
		prev := "a"
		for i := range 6 {
			// While [prev] is held, the next batch gathers.
			next := []string{fmt.Sprint("b", i), fmt.Sprint("c", i)}
			for _, s := range next {
				o.add(s)
			}
			r.gate <- struct{}{} // [prev] returns; the proposer takes next
			synctest.Wait()
			want = append(want, prev)
			prev = strings.Join(next, ",")
		}
		r.gate <- struct{}{}
		want = append(want, prev)
		close(quit)
		<-done
		r.mu.Lock()
		defer r.mu.Unlock()
		if !slices.Equal(r.got, want) || r.torn != 0 {
			t.Fatalf("batches %q (%d torn), want %q", r.got, r.torn, want)
		}
		for i := 3; i < len(r.arrays); i++ {
			if r.arrays[i] != r.arrays[i-2] {
				t.Fatalf("batch %d is in a new array, not in batch %d's", i, i-2)
			}
		}
	})
}
