package aof

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// A segmented log (docs/decisions/segmented-log.md) is a manifest and the
// segments it names, all beside each other in one directory:
//
//	delayd.aof          the manifest: a log file of one record, ManifestOp then the segment ids in order
//	delayd.aof.<id>     a segment: a log file of the format above
//
// Segments are replayed in the manifest's order, each as Replay reads one
// file. The manifest is the commit point of every change to the set: it
// is written to path+ManifestTempSuffix, fsynced, renamed over path and the
// directory fsynced (WriteManifest), so a crash leaves the old set or the
// new one. A segment not named by it is a leftover of a change a crash cut
// short (a roll's next segment, a compaction's dropped one, a rewrite's
// installed one) and OpenSegments removes it.
//
// The manifest keeps the log's old name on purpose: a release that knows
// only one file reads the manifest as a log whose first record is of a
// kind it does not know, and refuses to start, even with --repair (which
// cuts only damage), rather than start empty beside the segments.

// ManifestOp is the first byte of the manifest's record: no record kind
// takes it (record/op.go), so a release before segments refuses the file.
const ManifestOp = 0xFF

// ManifestTempSuffix names the manifest being written.
const ManifestTempSuffix = ".manifest.tmp"

// manifestVersion is the manifest record's layout: ManifestOp, version,
// count, then each id, all uvarints after the op.
const manifestVersion = 1

// SegPath is the name of segment id of the log whose manifest is path.
func SegPath(path string, id uint64) string { return path + "." + strconv.FormatUint(id, 10) }

// ErrManifest is a manifest that does not check out, or names a segment
// that is not there: the log is refused whole (nothing a repair of one
// file can fix).
var ErrManifest = errors.New("aof: the segment manifest is damaged or names a missing segment")

func encodeManifest(ids []uint64) []byte {
	b := []byte{ManifestOp}
	b = binary.AppendUvarint(b, manifestVersion)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = binary.AppendUvarint(b, id)
	}
	return b
}

// ReadManifest reads the manifest at path. legacy says path is a log of
// an earlier release (one file, no manifest): its first record is not a
// manifest's, or it holds none. A missing path returns an error matching
// fs.ErrNotExist.
func ReadManifest(fs FS, path string) (ids []uint64, legacy bool, err error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	// A legacy log may be gigabytes: read its header and first record only.
	head := make([]byte, HeaderSize+RecordHeaderSize+1)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, false, fmt.Errorf("aof: read %s: %w", path, err)
	}
	head = head[:n]
	if n < len(head) || head[HeaderSize+RecordHeaderSize] != ManifestOp {
		return nil, true, nil
	}
	size := binary.LittleEndian.Uint32(head[HeaderSize:])
	if size > 1<<20 {
		return nil, false, fmt.Errorf("%w: %s: a %d-byte record", ErrManifest, path, size)
	}
	rec := make([]byte, RecordHeaderSize+int(size))
	if _, err := f.ReadAt(rec, HeaderSize); err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrManifest, path, err)
	}
	payload := rec[RecordHeaderSize:]
	if !bytes.Equal(head[:4], magic[:]) || recordCRC(rec[:4], payload) != binary.LittleEndian.Uint32(rec[4:]) {
		return nil, false, fmt.Errorf("%w: %s: checksum", ErrManifest, path)
	}
	p := payload[1:]
	next := func() uint64 {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			err = fmt.Errorf("%w: %s: cut short", ErrManifest, path)
			return 0
		}
		p = p[k:]
		return v
	}
	if v := next(); err == nil && v != manifestVersion {
		return nil, false, fmt.Errorf("%w: %s: version %d (a newer delayd wrote it)", ErrManifest, path, v)
	}
	count := next()
	for i := uint64(0); err == nil && i < count; i++ {
		id := next()
		if err == nil && (id == 0 || len(ids) > 0 && id <= ids[len(ids)-1]) {
			err = fmt.Errorf("%w: %s: ids out of order", ErrManifest, path)
		}
		ids = append(ids, id)
	}
	if err == nil && (len(p) != 0 || len(ids) == 0) {
		err = fmt.Errorf("%w: %s: bad length", ErrManifest, path)
	}
	if err != nil {
		return nil, false, err
	}
	return ids, false, nil
}

// WriteManifest replaces the manifest at path with one naming ids, in that
// order, atomically and durably. Cost: one small write, two fsyncs and a
// rename. On ErrRenameNotDurable the new manifest is in place but a crash
// may bring the old one back.
func WriteManifest(fs FS, path string, ids []uint64) error {
	tmp := path + ManifestTempSuffix
	w, err := Create(fs, tmp)
	if err != nil {
		return err
	}
	w.Append(encodeManifest(ids))
	err = w.Flush()
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = Install(fs, tmp, path)
	}
	if err != nil && !errors.Is(err, ErrRenameNotDurable) {
		_ = fs.Remove(tmp)
	}
	return err
}

// OpenSegments makes path the manifest of a segmented log and returns its
// segment ids, oldest first; the last is the one to append to. A missing
// log starts as segment 1, empty; a log of an earlier release becomes
// segment 1 as it is (renamed, never copied). Leftovers of a change a crash
// cut short are removed. Every step is crash-safe: a crash anywhere leaves
// a directory this function opens again to the same records.
func OpenSegments(fs FS, path string) ([]uint64, error) {
	ids, legacy, err := ReadManifest(fs, path)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		// A new log, or an upgrade cut short after its rename: segment 1
		// then holds the old log, and becomes the manifest's.
		first := SegPath(path, 1)
		if _, serr := fs.Stat(first); errors.Is(serr, iofs.ErrNotExist) {
			w, err := OpenAppend(fs, first, 0) // header, fsync, directory fsync
			if err != nil {
				return nil, err
			}
			w.Close()
		}
		ids = []uint64{1}
		if err := WriteManifest(fs, path, ids); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case legacy:
		// Rename, then the manifest: between them, path is missing and
		// segment 1 exists, which the case above finishes.
		if err := fs.Rename(path, SegPath(path, 1)); err != nil {
			return nil, err
		}
		if err := fs.SyncDir(filepath.Dir(path)); err != nil {
			return nil, err
		}
		ids = []uint64{1}
		if err := WriteManifest(fs, path, ids); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		if _, err := fs.Stat(SegPath(path, id)); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrManifest, SegPath(path, id), err)
		}
	}
	removeLeftovers(fs, path, ids)
	return ids, nil
}

// removeLeftovers removes the segments a crash left outside the manifest:
// after the last (a roll's, a rewrite's), before the first (dropped by a
// compaction or a rewrite), and a manifest or rewrite half written. Their
// removal need not be durable: a crash brings them back to be removed again.
func removeLeftovers(fs FS, path string, ids []uint64) {
	last := ids[len(ids)-1]
	for id := last + 1; ; id++ {
		if fs.Remove(SegPath(path, id)) != nil {
			break
		}
	}
	for id := ids[0] - 1; id > 0; id-- {
		if fs.Remove(SegPath(path, id)) != nil {
			break
		}
	}
	_ = fs.Remove(path + ManifestTempSuffix)
	_ = fs.Remove(path + TempSuffix)
}

// SegmentsSize is the bytes of the segments ids of the log at path.
func SegmentsSize(fs FS, path string, ids []uint64) (int64, error) {
	var n int64
	for _, id := range ids {
		st, err := fs.Stat(SegPath(path, id))
		if err != nil {
			return 0, err
		}
		n += st.Size()
	}
	return n, nil
}
