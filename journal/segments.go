package journal

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/delayd/delayd/aof"
)

// A segmented log (docs/decisions/segmented-log.md): the owner opens the
// manifest (aof.OpenSegments), replays the segments and hands their ids to
// SetSegments; the journal appends to the last, rolls to a new one when it
// passes Options.SegmentSize (between batches, so a batch never straddles
// two; a unit in parts may, and replay gathers it across them), and drops the oldest when the
// owner's compaction has restated what it held (DropOldest). A rewrite
// installs its file as the next segment and the manifest names it alone.

// segState is the segments' side of the journal.
type segState struct {
	// gmu guards ids, next and every change of the manifest: a roll (under
	// wmu), a rewrite's switch (under wmu and mu), a compaction's drop and
	// the preparation of the next segment (alone). It comes after wmu and
	// mu.
	gmu sync.Mutex
	// ids are the manifest's segments (nil: not segmented, the log is
	// Path): the sealed ones, the active one, and the next one if it is
	// prepared. Guarded by gmu.
	ids []uint64
	// next is the segment the next roll switches to, created and named by
	// the manifest ahead of time (PrepareNext), so that a roll on the
	// writers' path is a switch of files and no fsync. Guarded by gmu.
	next    *aof.Writer
	hasNext atomic.Bool // next != nil
	// active is the id of the segment being appended to (0: not
	// segmented). A record appended now lands in it or in a later one,
	// never an earlier: what the owner notes as a job's home.
	active     atomic.Uint64
	activeSize atomic.Int64 // its size after the last batch written
	sealed     atomic.Int64 // bytes of the segments before the active one
	preparing  atomic.Bool
	rolls      atomic.Uint64
	drops      atomic.Uint64
	fails      atomic.Uint64 // batches undone (Undo), for a compaction to notice
	// retired are rolled segments' writers, not yet fsynced under
	// everysec and no: the next fsync (Sync) fsyncs them before the active
	// one, so nothing of a later segment is made durable by us before
	// them, then closes them. Guarded by wmu.
	retired []*aof.Writer
}

// SetSegments makes the log segmented: ids are the manifest's (the last is
// the one Open appends to) and sealed the bytes of all but the last. Called
// before Open.
func (j *Journal) SetSegments(ids []uint64, sealed int64) {
	j.seg.ids = slices.Clone(ids)
	j.seg.active.Store(ids[len(ids)-1])
	j.seg.sealed.Store(sealed)
}

// Segments returns the ids of the segments up to the active one, oldest
// first (nil: the log is not segmented); a prepared next one is not in it.
func (j *Journal) Segments() []uint64 {
	j.seg.gmu.Lock()
	defer j.seg.gmu.Unlock()
	return slices.Clone(j.segsLocked())
}

// segsLocked is ids without a prepared next segment. Called with gmu held.
func (j *Journal) segsLocked() []uint64 {
	if j.seg.next != nil {
		return j.seg.ids[:len(j.seg.ids)-1]
	}
	return j.seg.ids
}

// Active is the id of the segment being appended to (0: not segmented).
// One atomic load.
func (j *Journal) Active() uint64 { return j.seg.active.Load() }

// SegmentInfo is what INFO shows of the segments.
type SegmentInfo struct {
	Count        int
	Sealed       int64 // bytes of every segment but the active one
	Rolls, Drops uint64
}

// SegmentInfo returns the segments' figures.
func (j *Journal) SegmentInfo() SegmentInfo {
	n := len(j.Segments())
	return SegmentInfo{Count: n, Sealed: j.seg.sealed.Load(), Rolls: j.seg.rolls.Load(), Drops: j.seg.drops.Load()}
}

func (j *Journal) activePath() string {
	if id := j.seg.active.Load(); id != 0 {
		return aof.SegPath(j.opts.Path, id)
	}
	return j.opts.Path
}

// WantNext says the owner must now call PrepareNext (on a goroutine of its
// own: it fsyncs): the active segment is past half of Options.SegmentSize
// and no next one is ready or being made. It says so once until
// PrepareNext ends. A few atomic loads after each batch.
func (j *Journal) WantNext() bool {
	return j.opts.SegmentSize > 0 && j.seg.active.Load() != 0 && !j.seg.hasNext.Load() &&
		j.seg.activeSize.Load() > j.opts.SegmentSize/2 && !j.seg.preparing.Load() &&
		j.seg.preparing.CompareAndSwap(false, true)
}

// PrepareNext creates the segment the next roll switches to and names it
// in the manifest, durably, off the writers' path: an empty segment at the
// manifest's end replays as nothing, and the active one stays where writes
// go until the roll.
func (j *Journal) PrepareNext() {
	defer j.seg.preparing.Store(false)
	j.seg.gmu.Lock()
	defer j.seg.gmu.Unlock()
	if j.seg.next != nil || j.seg.ids == nil {
		return
	}
	id := j.seg.ids[len(j.seg.ids)-1] + 1
	w, err := j.createSegment(id)
	if err != nil {
		j.opts.Logger.Warn().Err(err).Uint64("segment", id).Msg("preparing the next log segment failed; the roll will make it")
		return
	}
	j.seg.next = w
	j.seg.hasNext.Store(true)
}

// createSegment creates segment id durably and names it at the manifest's
// end. Called with gmu held. A failure leaves the manifest as it was, or,
// if only its directory fsync failed, naming an empty segment (what a
// crash may forget, and a roll then names again).
func (j *Journal) createSegment(id uint64) (*aof.Writer, error) {
	path := aof.SegPath(j.opts.Path, id)
	w, err := aof.OpenAppend(j.opts.FS, path, 0) // header, fsync, directory fsync
	if err != nil {
		_ = j.opts.FS.Remove(path)
		return nil, err
	}
	ids := append(slices.Clone(j.seg.ids), id)
	if err := aof.WriteManifest(j.opts.FS, j.opts.Path, ids); err != nil {
		w.Close()
		if errors.Is(err, aof.ErrRenameNotDurable) {
			j.seg.ids = ids // named now: the next one must come after it
		} else {
			_ = j.opts.FS.Remove(path)
		}
		return nil, err
	}
	j.seg.ids = ids
	return w, nil
}

// rollIfFull rolls to a new segment when the active one has passed
// Options.SegmentSize. Called by commit with wmu held, before it appends
// its batch. fatal says the failure may not be retried.
func (j *Journal) rollIfFull() (fatal bool, err error) {
	if j.opts.SegmentSize <= 0 || j.seg.active.Load() == 0 || j.log.Size() < j.opts.SegmentSize {
		return false, nil
	}
	return j.roll()
}

// Roll seals the active segment and starts a new one now, whatever its
// size: a compaction's first step when only one segment holds the log.
func (j *Journal) Roll() error {
	if j.seg.active.Load() == 0 {
		return errors.New("the log is not segmented")
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	_, err := j.roll()
	return err
}

// roll switches appending to the next segment: the prepared one if
// PrepareNext made it (a switch of files, nothing else), else one made now
// (two fsyncs for the file, two for the manifest). The old segment is
// fsynced by the next Sync, before the new one. Called with wmu held,
// between batches, so a batch never straddles two segments.
func (j *Journal) roll() (fatal bool, err error) {
	j.seg.gmu.Lock()
	defer j.seg.gmu.Unlock()
	w, id := j.seg.next, j.seg.ids[len(j.seg.ids)-1]
	if w == nil {
		id++
		if w, err = j.createSegment(id); err != nil {
			return errors.Is(err, aof.ErrRenameNotDurable), err
		}
	}
	j.seg.next = nil
	j.seg.hasNext.Store(false)
	old := j.log
	j.mu.Lock()
	j.log = w
	j.mu.Unlock()
	j.seg.sealed.Add(old.Size())
	j.seg.active.Store(id)
	j.seg.activeSize.Store(w.Size())
	j.seg.retired = append(j.seg.retired, old)
	j.seg.rolls.Add(1)
	j.opts.Logger.Info().Uint64("segment", id).Int64("sealed_bytes", old.Size()).Msg("log segment rolled")
	return false, nil
}

// syncRetired fsyncs the rolled segments' writers and closes them: what
// an fsync of the active segment must come after. Called with smu held
// (no other fsync can be using them), not wmu.
func (j *Journal) syncRetired(ws []*aof.Writer) error {
	for i, w := range ws {
		if err := w.SyncPolled(); err != nil {
			j.wmu.Lock()
			j.seg.retired = append(ws[i:], j.seg.retired...) // fsynced again by the next Sync, which fails too: the writer's error is sticky
			j.wmu.Unlock()
			return err
		}
		w.Close()
	}
	return nil
}

// closeRetired closes the rolled segments' writers without an fsync: the
// log is closing or was replaced by a rewrite. Called with smu and wmu
// held.
func (j *Journal) closeRetired() {
	for _, w := range j.seg.retired {
		w.Close()
	}
	j.seg.retired = nil
}

// DropOldest removes segment id, which must be the oldest and not the
// active one, from the manifest and then from the disk. The owner calls it
// once every record it needs of that segment is restated in a later one
// and fsynced. Takes no lock a write waits for: the manifest's fsyncs are
// under gmu alone.
func (j *Journal) DropOldest(id uint64) error {
	j.seg.gmu.Lock()
	if len(j.seg.ids) < 2 || j.seg.ids[0] != id || id >= j.seg.active.Load() {
		j.seg.gmu.Unlock()
		return fmt.Errorf("segment %d is not the oldest sealed one", id)
	}
	path := aof.SegPath(j.opts.Path, id)
	st, err := j.opts.FS.Stat(path)
	if err == nil {
		err = aof.WriteManifest(j.opts.FS, j.opts.Path, j.seg.ids[1:])
	}
	if err != nil && !errors.Is(err, aof.ErrRenameNotDurable) {
		j.seg.gmu.Unlock()
		return err
	}
	j.seg.ids = slices.Clone(j.seg.ids[1:])
	if st != nil {
		j.seg.sealed.Add(-st.Size())
	}
	j.seg.drops.Add(1)
	j.seg.gmu.Unlock()
	if err != nil {
		// The new manifest may not survive a crash; the file must, for
		// the old manifest names it.
		return err
	}
	j.forget(id)
	return j.opts.FS.Remove(path)
}

// installSegment makes the rewrite's file the log's only segment: renamed
// to the next id, then named alone by the manifest (the commit point).
// Called by Install with wmu and mu held. It returns the ids the new
// manifest dropped, for the caller to remove once it lets go of the locks.
func (j *Journal) installSegment(tmp string) (dropped []uint64, err error) {
	j.seg.gmu.Lock()
	defer j.seg.gmu.Unlock()
	id := j.seg.ids[len(j.seg.ids)-1] + 1
	path := aof.SegPath(j.opts.Path, id)
	if err := aof.Install(j.opts.FS, tmp, path); err != nil {
		_ = j.opts.FS.Remove(path)
		return nil, err
	}
	err = aof.WriteManifest(j.opts.FS, j.opts.Path, []uint64{id})
	if err != nil && !errors.Is(err, aof.ErrRenameNotDurable) {
		_ = j.opts.FS.Remove(path)
		return nil, err
	}
	if j.seg.next != nil {
		j.seg.next.Close() // its file is among the dropped
		j.seg.next = nil
		j.seg.hasNext.Store(false)
	}
	dropped, j.seg.ids = j.seg.ids, []uint64{id}
	j.pay.gen.Add(1) // before rewriting ends: a record tailed before names a segment that is gone
	for _, d := range dropped {
		j.forget(d)
	}
	j.seg.sealed.Store(0)
	j.seg.active.Store(id)
	return dropped, err
}

// removeSegments removes dropped segments' files, oldest first, so that
// what a crash leaves of them is a run just below the first id (which
// aof.OpenSegments removes). Called with no lock held.
func (j *Journal) removeSegments(ids []uint64) {
	for _, id := range ids {
		_ = j.opts.FS.Remove(aof.SegPath(j.opts.Path, id))
	}
}

// Failures counts the batches whose write failed and were undone since
// start: a compaction that saw it change knows some of its records may be
// missing.
func (j *Journal) Failures() uint64 { return j.seg.fails.Load() }

// Rebase makes the log's size now its base, what the automatic rewrite's
// percentage is of: a compaction round's end, as a rewrite's.
func (j *Journal) Rebase() {
	size, _ := j.Sizes()
	j.dmu.Lock()
	j.info.BaseSize = size
	j.dmu.Unlock()
}
