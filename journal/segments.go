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
// passes Options.SegmentSize (between batches, so a batch, and so a
// transaction's unit, never straddles two), and drops the oldest when the
// owner's compaction has restated what it held (DropOldest). A rewrite
// installs its file as the next segment and the manifest names it alone.

// segState is the segments' side of the journal.
type segState struct {
	// gmu guards ids and every change of the manifest: a roll (under wmu),
	// a rewrite's switch (under wmu and mu), a compaction's drop (alone).
	// It comes after wmu and mu.
	gmu sync.Mutex
	ids []uint64 // guarded by gmu; nil: not segmented, the log is Path
	// active is the id of the segment being appended to (0: not
	// segmented). A record appended now lands in it or in a later one,
	// never an earlier: what the owner notes as a job's home.
	active atomic.Uint64
	sealed atomic.Int64 // bytes of the segments before the active one
	rolls  atomic.Uint64
	drops  atomic.Uint64
	fails  atomic.Uint64 // batches undone (Undo), for a compaction to notice
	// retired are rolled segments' writers, fsynced, kept open until no
	// fsync can be using them (closed under smu). Guarded by wmu.
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

// Segments returns the ids of the segments, oldest first (nil: the log is
// not segmented).
func (j *Journal) Segments() []uint64 {
	j.seg.gmu.Lock()
	defer j.seg.gmu.Unlock()
	return slices.Clone(j.seg.ids)
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
	j.seg.gmu.Lock()
	n := len(j.seg.ids)
	j.seg.gmu.Unlock()
	return SegmentInfo{Count: n, Sealed: j.seg.sealed.Load(), Rolls: j.seg.rolls.Load(), Drops: j.seg.drops.Load()}
}

func (j *Journal) activePath() string {
	if id := j.seg.active.Load(); id != 0 {
		return aof.SegPath(j.opts.Path, id)
	}
	return j.opts.Path
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

// roll seals the active segment (fsynced, whatever the policy, so that
// only the last segment can ever have a torn tail), creates the next one
// durably, and names it in the manifest: a crash before the manifest
// leaves a segment no manifest names, which the next open removes. Called
// with wmu held, between batches. Cost: three fsyncs, one rename, once per
// SegmentSize.
func (j *Journal) roll() (fatal bool, err error) {
	old := j.log
	if err := old.Sync(); err != nil {
		return true, fmt.Errorf("seal segment: %w", err)
	}
	j.seg.gmu.Lock()
	defer j.seg.gmu.Unlock()
	id := j.seg.ids[len(j.seg.ids)-1] + 1
	path := aof.SegPath(j.opts.Path, id)
	w, err := aof.OpenAppend(j.opts.FS, path, 0) // header, fsync, directory fsync
	if err != nil {
		_ = j.opts.FS.Remove(path)
		return false, err
	}
	ids := append(slices.Clone(j.seg.ids), id)
	if err := aof.WriteManifest(j.opts.FS, j.opts.Path, ids); err != nil {
		if !errors.Is(err, aof.ErrRenameNotDurable) {
			w.Close()
			_ = j.opts.FS.Remove(path)
			return false, err
		}
		fatal = true // named, but a crash may forget it: go on with it, refuse writes
	}
	j.mu.Lock()
	j.log = w
	j.mu.Unlock()
	j.seg.ids = ids
	j.seg.sealed.Add(old.Size())
	j.seg.active.Store(id)
	j.seg.retired = append(j.seg.retired, old)
	j.seg.rolls.Add(1)
	j.opts.Logger.Info().Uint64("segment", id).Int64("sealed_bytes", old.Size()).Msg("log segment rolled")
	if fatal {
		return true, fmt.Errorf("roll to segment %d: %w", id, aof.ErrRenameNotDurable)
	}
	return false, nil
}

// closeRetired closes the rolled segments' writers. Called with smu and
// wmu held.
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
	if len(j.seg.ids) < 2 || j.seg.ids[0] != id {
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
	dropped, j.seg.ids = j.seg.ids, []uint64{id}
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
