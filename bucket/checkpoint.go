package bucket

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"math/bits"
	"os"
	"slices"

	"github.com/delayd/delayd/aof"
)

// The checkpoint: the runs that hold jobs, which of their entries are
// dead (removed, moved or loaded) and where each run's loading stands, the
// next run id, and the log position Pos it covers: a start reads it, opens
// the runs, and replays the log skipping, before Pos, every record of a job
// a run holds. Its file, replaced whole (tmp, fsync, rename, directory
// fsync):
//
//	magic 8, pos's segment u64, pos's offset i64, next id u64,
//	runs u32, drops u32,
//	per run: id u64, n u32, cursor u32, (n+63)/64 u64 words of dead bits,
//	drops u64 each: runs the checkpoint before named and this one does not,
//	CRC-32C u32 of all before it.

var cpMagic = [8]byte{'D', 'L', 'Y', 'B', 'C', 'K', 'P', 1}

// CheckpointPath is the checkpoint's file beside the log at path.
func CheckpointPath(path string) string { return path + ".buckets" }

// Pos is a place in the log: a segment's id and an offset in its file.
// The engine's is the number of the mark record its checkpoint logged, in
// Seg (record.FarMark): when a checkpoint is captured, the records before
// it are not yet written, so no offset names where they end.
type Pos struct {
	Seg uint64
	Off int64
}

// Before says whether p comes before q.
func (p Pos) Before(q Pos) bool { return p.Seg < q.Seg || p.Seg == q.Seg && p.Off < q.Off }

// Checkpoint is the Set's state at a log position, captured under the
// owner's lock, to be written once its frozen buckets are runs and the log
// up to Pos is durable.
type Checkpoint struct {
	Pos    Pos
	NextID uint64
	Runs   []RunState
	Drop   []uint64
	frozen []*Frozen
	runs   map[uint64]*Run // the runs it names that were runs when captured
}

// RunState is a run as a checkpoint names it.
type RunState struct {
	ID        uint64
	N, Cursor int
	Dead      []uint64
}

// Checkpoint freezes the open bucket and captures the state at pos, the
// end of what the owner has logged: every run and frozen bucket with a
// live job, its dead bits copied. O(buckets + their entries / 64).
func (s *Set) Checkpoint(pos Pos) *Checkpoint {
	cp := &Checkpoint{Pos: pos, NextID: s.nextID, frozen: s.Freeze(), runs: map[uint64]*Run{}}
	for _, b := range s.b {
		if b == nil || b.live == 0 {
			continue
		}
		n := b.n
		if b.run != nil {
			n = b.run.N
			cp.runs[b.id] = b.run
		}
		cp.Runs = append(cp.Runs, RunState{ID: b.id, N: n, Cursor: b.cursor, Dead: slices.Clone(b.dead[:(n+63)/64])})
	}
	slices.SortFunc(cp.Runs, func(a, b RunState) int { return cmpInt(a.ID, b.ID) })
	// Every bucket the checkpoint does not name goes once it is installed
	// (Installed), or later if an open bucket reads a payload from it:
	// a start after a crash removes them again. Any bucket in memory that
	// reads from one is frozen now, and written before the checkpoint.
	for slot, b := range s.b {
		if b != nil && b.live == 0 && slot != s.open {
			cp.Drop = append(cp.Drop, b.id)
		}
	}
	for id := range s.merging {
		cp.Drop = append(cp.Drop, id)
	}
	slices.Sort(cp.Drop)
	return cp
}

// Frozen returns the buckets the checkpoint froze: each must be written
// (WriteFrozen) and installed before the checkpoint is written.
func (cp *Checkpoint) Frozen() []*Frozen { return cp.frozen }

func (cp *Checkpoint) encode() []byte {
	b := make([]byte, 0, 40+len(cp.Runs)*16+8*len(cp.Drop)+4)
	b = append(b, cpMagic[:]...)
	b = binary.LittleEndian.AppendUint64(b, cp.Pos.Seg)
	b = binary.LittleEndian.AppendUint64(b, uint64(cp.Pos.Off))
	b = binary.LittleEndian.AppendUint64(b, cp.NextID)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(cp.Runs)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(cp.Drop)))
	for _, r := range cp.Runs {
		b = binary.LittleEndian.AppendUint64(b, r.ID)
		b = binary.LittleEndian.AppendUint32(b, uint32(r.N))
		b = binary.LittleEndian.AppendUint32(b, uint32(r.Cursor))
		for _, w := range r.Dead {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
	}
	for _, id := range cp.Drop {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCheckpoint(b []byte) (*Checkpoint, error) {
	if len(b) < 44 || [8]byte(b[:8]) != cpMagic ||
		binary.LittleEndian.Uint32(b[len(b)-4:]) != crc32.Checksum(b[:len(b)-4], castagnoli) {
		return nil, ErrCorrupt
	}
	b = b[8 : len(b)-4]
	u64 := func() uint64 { v := binary.LittleEndian.Uint64(b); b = b[8:]; return v }
	u32 := func() uint32 { v := binary.LittleEndian.Uint32(b); b = b[4:]; return v }
	cp := &Checkpoint{}
	cp.Pos.Seg = u64()
	cp.Pos.Off = int64(u64())
	cp.NextID = u64()
	nr, nd := int(u32()), int(u32())
	if nr > maxSlots {
		return nil, ErrCorrupt
	}
	for range nr {
		if len(b) < 16 {
			return nil, ErrCorrupt
		}
		r := RunState{ID: u64(), N: int(u32()), Cursor: int(u32())}
		w := (r.N + 63) / 64
		if r.N > maxEntries || r.Cursor > r.N || len(b) < 8*w || r.ID >= cp.NextID {
			return nil, ErrCorrupt
		}
		r.Dead = make([]uint64, w)
		for i := range r.Dead {
			r.Dead[i] = u64()
		}
		cp.Runs = append(cp.Runs, r)
	}
	if len(b) != 8*nd {
		return nil, ErrCorrupt
	}
	for range nd {
		cp.Drop = append(cp.Drop, u64())
	}
	return cp, nil
}

// WriteCheckpoint writes cp, replacing the checkpoint at path whole: tmp,
// fsync, rename, directory fsync. Without the owner's lock, once every
// frozen bucket cp names is a run and the log up to cp.Pos is durable.
func WriteCheckpoint(fs aof.FS, path string, cp *Checkpoint) error {
	name := CheckpointPath(path)
	tmp := name + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(cp.encode())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = aof.Install(fs, tmp, name)
	}
	if err != nil && !errors.Is(err, aof.ErrRenameNotDurable) {
		_ = fs.Remove(tmp)
	}
	return err
}

// Installed tells the Set that cp is on disk: the runs with no live job
// that no bucket in memory reads a payload from, and that cp does not
// name, leave the Set; their ids are returned for RemoveRuns. The owner
// must not run ReadDue or WriteFrozen meanwhile (a run is closed here).
func (s *Set) Installed(cp *Checkpoint) []uint64 {
	s.pos = cp.Pos
	s.named = make(map[uint64]bool, len(cp.Runs))
	for _, r := range cp.Runs {
		s.named[r.ID] = true
	}
	var gone []uint64
	for slot, b := range s.b {
		if b == nil || b.run == nil || b.live > 0 || b.refs > 0 || s.named[b.id] {
			continue
		}
		b.run.Close()
		delete(s.byID, b.id)
		s.b[slot] = nil
		gone = append(gone, b.id)
		if b.back {
			s.dropped = max(s.dropped, b.id)
		}
	}
	return gone
}

// RemoveRuns removes the files of runs ids at path (and of their
// temporaries). Their removal need not be durable: a start removes them
// again (Open).
func RemoveRuns(fs aof.FS, path string, ids []uint64) {
	for _, id := range ids {
		_ = fs.Remove(RunPath(path, id))
		_ = fs.Remove(RunPath(path, id) + ".tmp")
	}
}

// Dropped is the greatest id of a run Installed dropped that a job left
// for memory (Take, Fault): a scan whose last walk began before that run
// was made may have missed the job (Scan).
func (s *Set) Dropped() uint64 { return s.dropped }

// Pos returns the log position the last checkpoint covers (zero: none).
func (s *Set) Pos() Pos { return s.pos }

// Opened returns the live jobs of each queue in the runs Open found: what
// the owner counts in its queues once its replay reaches the checkpoint's
// position (before it, records of those jobs are skipped).
func (s *Set) Opened() map[string]int { return s.opened }

// leftoverMisses is how many consecutive ids past the checkpoint's next
// id Open tries after the last file it found: frozen buckets are given ids
// in order, and one whose write failed leaves a gap.
const leftoverMisses = 16

// warmAhead is how many runs Open's reader may be ahead of the filing.
const warmAhead = 2

// warmRun reads the part of a run a start reads (from its id index to its
// end: 44 B a job) into the page cache, so that a start's reading of one
// run overlaps the filing of the one before (100M far jobs are 4.4 GB to
// read: ~11 s of this machine's disk when the cache is cold). It is only
// a hint: any error leaves the open that follows to find and report it.
func warmRun(fs aof.FS, name string, buf []byte) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() < headerSize+trailerSize {
		return
	}
	var tr [trailerSize]byte
	if _, err := f.ReadAt(tr[:], st.Size()-trailerSize); err != nil {
		return
	}
	for off := int64(binary.LittleEndian.Uint64(tr[24:])); off > 0 && off < st.Size(); off += int64(len(buf)) {
		if _, err := f.ReadAt(buf[:min(int64(len(buf)), st.Size()-off)], off); err != nil {
			return
		}
	}
}

// Open returns the Set the checkpoint at o.Path names: each run opened and
// checked, the index rebuilt from its live entries (44 bytes read a job).
// Files a crash left outside the checkpoint (runs written after it, runs
// it dropped, temporaries) are removed: their jobs are in the log after
// its position. No checkpoint is an empty Set. A checkpoint or run that
// does not check out is an error: the jobs it holds are nowhere else.
func Open(o Options) (*Set, error) {
	s := New(o)
	cp, err := readCheckpoint(o.FS, o.Path)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		cp = &Checkpoint{NextID: 1}
	case err != nil:
		return nil, err
	}
	s.nextID, s.pos = cp.NextID, cp.Pos
	live := 0
	for _, rs := range cp.Runs {
		live += rs.N
		for _, w := range rs.Dead {
			live -= bits.OnesCount64(w)
		}
	}
	s.x.presize(live)
	s.opened = map[string]int{}
	var (
		f    filer
		sids []uint64
		locs []uint32
	)
	// The runs' tails are read from disk by a goroutine up to warmAhead
	// runs ahead, while this one files the ids of the one before.
	ahead, stop := make(chan struct{}, warmAhead), make(chan struct{})
	defer close(stop)
	go func() {
		buf := make([]byte, 1<<20)
		for _, rs := range cp.Runs {
			select {
			case ahead <- struct{}{}:
			case <-stop:
				return
			}
			warmRun(o.FS, RunPath(o.Path, rs.ID), buf)
		}
	}()
	for slot, rs := range cp.Runs {
		<-ahead
		b := &bucket{id: rs.ID, dead: rs.Dead, cursor: rs.Cursor}
		perQ := map[uint32]int{}
		sids, locs = sids[:0], locs[:0]
		r, err := OpenRun(o.FS, o.Path, rs.ID, func(pos int, e Sorted) {
			if int(e.Index) < rs.N && !b.isDead(e.Index) {
				sids, locs = append(sids, e.SID), append(locs, packLoc(slot, e.Index))
				b.live++
				perQ[e.Queue]++
			}
		})
		if err == nil {
			s.x.fileAll(&f, sids, locs)
		}
		if err == nil && r.N != rs.N {
			r.Close()
			err = fmt.Errorf("%w: run %d holds %d jobs, the checkpoint says %d", ErrCorrupt, rs.ID, r.N, rs.N)
		}
		if err != nil {
			s.closeRuns()
			return nil, err
		}
		b.run, b.n = r, r.N
		for qn, n := range perQ {
			s.opened[r.Names[qn]] += n
		}
		s.b[slot] = b
		s.byID[rs.ID] = slot
		s.named[rs.ID] = true
		s.jobs += int64(b.live)
	}
	RemoveRuns(o.FS, o.Path, cp.Drop)
	for id, miss := cp.NextID, 0; miss < leftoverMisses; id++ {
		e1, e2 := o.FS.Remove(RunPath(o.Path, id)), o.FS.Remove(RunPath(o.Path, id)+".tmp")
		if e1 != nil && e2 != nil {
			miss++
		} else {
			miss = 0
		}
	}
	_ = o.FS.Remove(CheckpointPath(o.Path) + ".tmp")
	return s, nil
}

func (s *Set) closeRuns() {
	for _, b := range s.b {
		if b != nil && b.run != nil {
			b.run.Close()
		}
	}
	s.x.reset()
}

// Close closes the runs and frees the index and the buckets in memory
// (no WriteFrozen may be running). The Set is not used after.
func (s *Set) Close() {
	s.closeRuns()
	for slot, b := range s.b {
		if b != nil && b.run == nil {
			s.free(slot)
		}
	}
	s.open = -1
}

func readCheckpoint(fs aof.FS, path string) (*Checkpoint, error) {
	f, err := fs.OpenFile(CheckpointPath(path), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	cp, err := decodeCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, CheckpointPath(path))
	}
	return cp, nil
}

// Each calls f for every job live in cp's runs as of cp, without the
// owner's lock: what a backup, a rewrite or a Raft snapshot writes of the
// far jobs, consistent with the owner's state at cp.Pos. Each run is read
// through once, in order (its sorted entries, then its data), f sees its
// jobs in the order of its data: by due (by the order they entered it, in
// a run of the first format). cp's frozen buckets must be
// installed, and no checkpoint installed meanwhile (it may close a run).
// The Job's slices are f's only until it returns.
func (cp *Checkpoint) Each(f func(j *Job) error) error {
	for _, fz := range cp.frozen {
		if fz.run != nil {
			cp.runs[fz.id] = fz.run
		}
	}
	for _, rs := range cp.Runs {
		r := cp.runs[rs.ID]
		if r == nil {
			return fmt.Errorf("bucket: run %d of the checkpoint is not written", rs.ID)
		}
		if err := r.each(rs.Dead, f); err != nil {
			return err
		}
	}
	return nil
}

// each calls f for the jobs of r whose bit in dead is clear, in the order
// of its data: the sorted section read whole (32 B a job, into memory in
// the data's order), then the data section streamed.
func (r *Run) each(dead []uint64, f func(j *Job) error) error {
	byIndex := make([]Sorted, r.N) // by place in data: sorted, or index order (the first format)
	const chunk = 2048
	var ss []Sorted
	k := 0
	for from := 0; from < r.N; from += chunk {
		var err error
		if ss, err = r.ReadSorted(from, min(from+chunk, r.N), ss[:0]); err != nil {
			return err
		}
		for _, e := range ss {
			if int(e.Index) >= r.N || int(e.Queue) >= len(r.Names) {
				return fmt.Errorf("%w: run %d: sorted entry %+v", ErrCorrupt, r.ID, e)
			}
			if r.inOrder {
				byIndex[k] = e
			} else {
				byIndex[e.Index] = e
			}
			k++
		}
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r.f, headerSize, r.byAt-headerSize), 1<<16)
	var buf []byte
	var j Job
	for i := range r.N {
		hl, err1 := binary.ReadUvarint(br)
		pl, err2 := binary.ReadUvarint(br)
		if err1 != nil || err2 != nil || hl+pl > uint64(r.byAt) {
			return fmt.Errorf("%w: run %d: job %d's framing", ErrCorrupt, r.ID, i)
		}
		var hdr [2 * binary.MaxVarintLen64]byte
		hn := binary.PutUvarint(hdr[:], hl)
		hn += binary.PutUvarint(hdr[hn:], pl)
		buf = slices.Grow(buf[:0], int(hl+pl)+4)[:hl+pl+4]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("%w: run %d: job %d: %w", ErrCorrupt, r.ID, i, err)
		}
		c := crc32.Update(crc32.Checksum(hdr[:hn], castagnoli), castagnoli, buf[:hl+pl])
		if c != binary.LittleEndian.Uint32(buf[hl+pl:]) {
			return fmt.Errorf("%w: run %d: job %d's data", ErrCorrupt, r.ID, i)
		}
		e := byIndex[i]
		if x := e.Index; dead[x>>6]&(1<<(x&63)) != 0 {
			continue
		}
		j = Job{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: r.Names[e.Queue], Head: buf[:hl:hl], Payload: buf[hl : hl+pl : hl+pl]}
		if err := f(&j); err != nil {
			return err
		}
	}
	return nil
}
