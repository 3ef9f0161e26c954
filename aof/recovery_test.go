package aof

import (
	"bytes"
	"encoding/binary"
	"errors"
	iofs "io/fs"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layout is a healthy log and where its records are.
type layout struct {
	data     []byte
	payloads [][]byte
	off      []int64 // offset of each record's header
}

func newLayout(payloads [][]byte) layout {
	l := layout{data: fileHeader(), payloads: payloads}
	for _, p := range payloads {
		l.off = append(l.off, int64(len(l.data)))
		l.data = appendRecord(l.data, p)
	}
	return l
}

// end is the offset just past record i.
func (l layout) end(i int) int64 { return l.off[i] + RecordHeaderSize + int64(len(l.payloads[i])) }

// sizeOf is the size of the log holding the first k records.
func (l layout) sizeOf(k int) int64 {
	if k == 0 {
		return HeaderSize
	}
	return l.end(k - 1)
}

// recordsBefore counts the records that end at or before off.
func (l layout) recordsBefore(off int64) int {
	k := 0
	for k < len(l.off) && l.end(k) <= off {
		k++
	}
	return k
}

// corruption is one damaged log and what recovery must make of it.
type corruption struct {
	name    string
	data    []byte
	records int   // records Replay passes to fn
	size    int64 // Result.Size: good bytes (for corruption, the offset named)
	corrupt bool  // damage before the tail: *CorruptError at size, nothing cut
	reason  error // for corrupt rows
}

func (l layout) clone() []byte { return slices.Clone(l.data) }

// corruptions returns the table: torn tails that Replay cuts with a warning,
// and damage before the tail that it refuses (etcd's repair_test, as a table).
func corruptions(l layout) []corruption {
	n := len(l.payloads)
	last, mid := n-1, n/2
	torn := func(name string, data []byte, records int) corruption {
		return corruption{name: name, data: data, records: records, size: l.sizeOf(records)}
	}
	bad := func(name string, data []byte, at int, reason error) corruption {
		return corruption{name: name, data: data, records: at, size: l.off[at], corrupt: true, reason: reason}
	}
	mutate := func(f func(b []byte)) []byte { b := l.clone(); f(b); return b }
	setLen := func(i int, v uint32) []byte {
		return mutate(func(b []byte) { binary.LittleEndian.PutUint32(b[l.off[i]:], v) })
	}

	rows := []corruption{
		torn("healthy", l.clone(), n),
		torn("cut at a record boundary", l.data[:l.off[last]], n-1),
		torn("zero-filled space after the last record", append(l.clone(), make([]byte, 4096)...), n),
		torn("a partial header after the last record", append(l.clone(), 9, 0, 0), n),
		torn("a bad checksum on the last record", mutate(func(b []byte) { b[l.end(last)-1] ^= 0x10 }), n-1),
		torn("a bad checksum on the last record, then zeros", append(mutate(func(b []byte) { b[l.off[last]+5] ^= 1 }), make([]byte, 100)...), n-1),
		torn("a huge length on the last record", setLen(last, 0xfffffff0), n-1),
		torn("a length past the end on the last record", setLen(last, uint32(len(l.payloads[last])+1)), n-1),
		bad("a flipped bit in the middle record's payload", mutate(func(b []byte) { b[l.off[mid]+RecordHeaderSize+7] ^= 4 }), mid, ErrChecksum),
		bad("a flipped bit in the middle record's checksum", mutate(func(b []byte) { b[l.off[mid]+6] ^= 0x80 }), mid, ErrChecksum),
		bad("a flipped low bit in the middle record's length", mutate(func(b []byte) { b[l.off[mid]] ^= 1 }), mid, ErrChecksum),
		bad("a flipped high bit in the middle record's length", mutate(func(b []byte) { b[l.off[mid]+3] ^= 0x40 }), mid, ErrBadLength),
		bad("a huge length in the middle", setLen(mid, 0xfffffff0), mid, ErrBadLength),
		bad("a length in the middle that runs into the last record", setLen(mid, uint32(l.end(last)-l.off[mid]-RecordHeaderSize-3)), mid, ErrChecksum),
		bad("a zero length in the middle", setLen(mid, 0), mid, ErrZeroFill),
		bad("a bad checksum on the second to last record", mutate(func(b []byte) { b[l.end(last-1)-1] ^= 1 }), last-1, ErrChecksum),
		{name: "zero-filled space, then a good record", data: appendRecord(append(l.clone(), make([]byte, 64)...), []byte("late")),
			records: n, size: int64(len(l.data)), corrupt: true, reason: ErrZeroFill},
	}

	// A torn write: the last record cut at every byte.
	for c := l.off[last] + 1; c < l.end(last); c++ {
		rows = append(rows, torn("last record cut at +"+strconv.FormatInt(c-l.off[last], 10), l.data[:c], n-1))
	}

	// A zeroed 4 KiB page: the disk lost one write-back.
	const page = 4096
	tailPage := (int64(len(l.data)) - 1) / page * page
	rows = append(rows, torn("a zeroed 4 KiB page at the tail",
		mutate(func(b []byte) { clear(b[tailPage:]) }), l.recordsBefore(tailPage)))
	if midPage := int64(page); l.end(last) >= 3*page {
		k := l.recordsBefore(midPage)
		reason := ErrChecksum // the page starts inside record k
		if l.off[k] >= midPage {
			reason = ErrZeroFill // the page starts at record k's header
		}
		rows = append(rows, bad("a zeroed 4 KiB page in the middle", mutate(func(b []byte) { clear(b[midPage : midPage+page]) }), k, reason))
	}

	// The header.
	for c := 1; c < HeaderSize; c++ {
		rows = append(rows, corruption{name: "header cut at " + strconv.Itoa(c), data: l.data[:c]})
	}
	rows = append(rows,
		corruption{name: "empty file"},
		corruption{name: "only zeros", data: make([]byte, 3000)},
		corruption{name: "header only", data: l.data[:HeaderSize], size: HeaderSize},
		corruption{name: "bad magic", data: mutate(func(b []byte) { b[0] = 'X' }), corrupt: true, reason: ErrBadMagic},
		corruption{name: "unknown version", data: mutate(func(b []byte) { b[4] = 2 }), corrupt: true, reason: ErrBadVersion},
		corruption{name: "a short file that is not ours", data: []byte("GIF8"), corrupt: true, reason: ErrBadMagic},
	)
	return rows
}

// recoveryLayout is a log of 24 records, large enough for a zeroed page in
// the middle, with a short last record.
func recoveryLayout() layout {
	rng := rand.New(rand.NewPCG(1, 2))
	ps := randPayloads(rng, 24, 200, 900)
	ps[len(ps)-1] = []byte("the last record, short enough to cut at every byte")
	return newLayout(ps)
}

// TestRecovery runs every corruption through Replay, then Repair, then Replay
// and more writes: torn tails are cut with the good prefix kept; damage before
// the tail is refused with the file and offset named, and Repair cuts there,
// keeping exactly the cut bytes in .broken.
func TestRecovery(t *testing.T) {
	l := recoveryLayout()
	for _, c := range corruptions(l) {
		t.Run(c.name, func(t *testing.T) {
			const path = "/data/appendonly.aof"
			fs := NewMemFS()
			if c.data != nil {
				fs.WriteFile(path, c.data)
			}
			got, res, err := replayAll(fs, path)
			samePayloads(t, got, l.payloads[:c.records])
			after, _ := fs.ReadFile(path)

			if c.corrupt {
				var ce *CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || !errors.Is(err, c.reason) {
					t.Fatalf("Replay error = %v, want a *CorruptError matching ErrCorrupt and %v", err, c.reason)
				}
				if ce.Path != path || ce.Offset != c.size || res.Size != c.size {
					t.Fatalf("CorruptError{%s, %d}, Result.Size %d; want offset %d", ce.Path, ce.Offset, res.Size, c.size)
				}
				msg := err.Error()
				for _, s := range []string{path, "offset " + strconv.FormatInt(c.size, 10), "--repair"} {
					if !strings.Contains(msg, s) {
						t.Errorf("error %q does not mention %q", msg, s)
					}
				}
				if !bytes.Equal(after, c.data) {
					t.Fatal("Replay changed a corrupt log")
				}
			} else {
				if err != nil {
					t.Fatalf("Replay: %v", err)
				}
				want := Result{Records: c.records, Size: c.size, TornBytes: int64(len(c.data)) - c.size}
				if len(c.data) == 0 {
					want = Result{}
				}
				if res != want {
					t.Fatalf("Result = %+v, want %+v", res, want)
				}
				if !bytes.Equal(after, c.data[:c.size]) {
					t.Fatalf("file is %d bytes after Replay, want the %d good bytes", len(after), c.size)
				}
			}

			// Repair the original bytes: the cut is where Replay stopped (or
			// nothing, on a healthy log), and .broken keeps what was cut.
			if c.data != nil {
				fs.WriteFile(path, c.data)
			}
			cut, err := Repair(fs, path)
			if err != nil {
				t.Fatalf("Repair: %v", err)
			}
			if cut != min(c.size, int64(len(c.data))) {
				t.Fatalf("Repair cut at %d, want %d", cut, c.size)
			}
			broken, berr := fs.ReadFile(path + BrokenSuffix)
			if cut == int64(len(c.data)) {
				if !errors.Is(berr, iofs.ErrNotExist) {
					t.Fatalf("Repair of a healthy log left %s (%v)", path+BrokenSuffix, berr)
				}
			} else if !bytes.Equal(broken, c.data[cut:]) {
				t.Fatalf(".broken holds %d bytes, want the %d cut bytes", len(broken), len(c.data)-int(cut))
			}

			// Whatever happened, the log now replays cleanly and takes writes.
			got, res, err = replayAll(fs, path)
			if err != nil || res.TornBytes != 0 || res.Records != c.records {
				t.Fatalf("Replay after Repair: %+v, %v; want %d records, nothing torn", res, err, c.records)
			}
			w, err := OpenAppend(fs, path, res.Size)
			if err != nil {
				t.Fatal(err)
			}
			more := [][]byte{[]byte("after repair 1"), []byte("after repair 2")}
			for _, p := range more {
				w.Append(p)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, _, err = replayAll(fs, path)
			if err != nil {
				t.Fatal(err)
			}
			samePayloads(t, got, append(slices.Clone(l.payloads[:c.records]), more...))
		})
	}
}

// TestRepairKeepsEarlierBroken checks that a second repair does not overwrite
// the bytes the first one kept.
func TestRepairKeepsEarlierBroken(t *testing.T) {
	const path = "/d/log"
	l := recoveryLayout()
	fs := NewMemFS()
	fs.WriteFile(path+BrokenSuffix, []byte("from last time"))
	data := l.clone()
	data[l.off[3]+9] ^= 1
	fs.WriteFile(path, data)
	if _, err := Repair(fs, path); err != nil {
		t.Fatal(err)
	}
	old, _ := fs.ReadFile(path + BrokenSuffix)
	kept, err := fs.ReadFile(path + BrokenSuffix + ".1")
	if string(old) != "from last time" || err != nil || !bytes.Equal(kept, data[l.off[3]:]) {
		t.Fatalf(".broken = %q, .broken.1 = %d bytes (%v)", old, len(kept), err)
	}
}

// TestReplayCallbackError: an error from fn stops Replay and comes back as is.
func TestReplayCallbackError(t *testing.T) {
	const path = "/d/log"
	l := recoveryLayout()
	fs := NewMemFS()
	fs.WriteFile(path, l.data)
	stop := errors.New("stop")
	calls := 0
	res, err := Replay(fs, path, func([]byte) error {
		if calls++; calls == 3 {
			return stop
		}
		return nil
	})
	if err != stop || res.Records != 2 || res.Size != l.off[2] {
		t.Fatalf("Replay = %+v, %v; want 2 records and the callback's error", res, err)
	}
	if after, _ := fs.ReadFile(path); !bytes.Equal(after, l.data) {
		t.Fatal("Replay changed the file")
	}
}

func TestReplayMissingFile(t *testing.T) {
	res, err := Replay(NewMemFS(), "/nope", func([]byte) error { t.Fatal("fn called"); return nil })
	if res != (Result{}) || err != nil {
		t.Fatalf("Replay of a missing file = %+v, %v", res, err)
	}
	if cut, err := Repair(NewMemFS(), "/nope"); cut != 0 || err != nil {
		t.Fatalf("Repair of a missing file = %d, %v", cut, err)
	}
}

// TestReplayProgress: progress sees the first record's offset, then offsets
// that grow by at least 1 MiB, each a record boundary with every record
// before it already passed to fn; an error from it stops Replay as is.
func TestReplayProgress(t *testing.T) {
	const path = "/d/log"
	payloads := randPayloads(rand.New(rand.NewPCG(1, 2)), 3000, 1000, 3000) // about 6 MiB
	fs := NewMemFS()
	writeLog(t, fs, path, payloads)
	data, _ := fs.ReadFile(path)
	bounds := map[int64]int{} // record boundary -> records before it
	for off, i := int64(HeaderSize), 0; i <= len(payloads); i++ {
		bounds[off] = i
		if i < len(payloads) {
			off += RecordHeaderSize + int64(len(payloads[i]))
		}
	}
	var offs []int64
	seen := 0
	res, err := ReplayProgress(fs, path, func([]byte) error { seen++; return nil }, func(off, size int64) error {
		if size != int64(len(data)) {
			t.Fatalf("progress size %d, want %d", size, len(data))
		}
		if n, ok := bounds[off]; !ok || n != seen {
			t.Fatalf("progress at %d: a record boundary after %d records? (boundary %v, %d records seen)", off, n, ok, seen)
		}
		offs = append(offs, off)
		return nil
	})
	if err != nil || res.Records != len(payloads) {
		t.Fatalf("ReplayProgress = %+v, %v", res, err)
	}
	if len(offs) < 5 || len(offs) > 7 || offs[0] != HeaderSize {
		t.Fatalf("progress offsets %v: want the header's end, then about one per MiB of %d bytes", offs, len(data))
	}
	for i := 1; i < len(offs); i++ {
		if offs[i]-offs[i-1] < readChunk {
			t.Fatalf("progress offsets %v: closer than 1 MiB", offs)
		}
	}

	stop := errors.New("stop")
	calls := 0
	res, err = ReplayProgress(fs, path, nil, func(off, size int64) error {
		if calls++; calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || res.Size != offs[1] || res.Records != bounds[offs[1]] {
		t.Fatalf("ReplayProgress stopped by progress = %+v, %v; want %d records, size %d and its error", res, err, bounds[offs[1]], offs[1])
	}
	if after, _ := fs.ReadFile(path); !bytes.Equal(after, data) {
		t.Fatal("ReplayProgress changed the file")
	}

	if _, err := ReplayProgress(NewMemFS(), "/nope", nil, func(int64, int64) error {
		t.Fatal("progress called for a missing log")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
