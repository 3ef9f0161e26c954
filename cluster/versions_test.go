package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

func framed(recs ...[]byte) []byte {
	var out []byte
	for _, r := range recs {
		out = binary.AppendUvarint(out, uint64(len(r)))
		out = append(out, r...)
	}
	return out
}

func unframe(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			t.Fatalf("bad framing at %x", b)
		}
		out = append(out, b[k:k+int(n)])
		b = b[k+int(n):]
	}
	return out
}

// A batch goes out for version 2 members without the fields version 3
// added, whole units included, and unchanged when it has none of them.
func TestDowngradeLeavesOutVersion3Fields(t *testing.T) {
	plainAdd := (&record.Rec{Op: record.Add, Time: 5, Queue: []byte("q"), ID: []byte("a"), Due: 9, Seq: 1, Payload: []byte("p"),
		Retry: -1, UniqueTTL: 100, Group: []byte("g"), Priority: 3}).Encode(nil)
	deadAdd := &record.Rec{Op: record.Add, Time: 6, Queue: []byte("dlq"), ID: []byte("b"), Due: 6, Seq: 2, Payload: []byte("p"),
		Retry: -1, Flags: record.FlagReady, Origin: &jobs.Origin{Queue: []byte("q"), AckTimeout: 10, Retry: 1}, Reason: []byte("boom")}
	nack := &record.Rec{Op: record.Move, Time: 7, Queue: []byte("q"), ID: []byte("c"), Due: 7, Seq: 3, Deliveries: 1,
		Flags: record.FlagReady, Reason: []byte("try later")}
	cancel := (&record.Rec{Op: record.Cancel, Time: 8, Queue: []byte("q"), ID: []byte("a")}).Encode(nil)

	same := framed(plainAdd, cancel)
	if got, err := downgrade(same, 2); err != nil || &got[0] != &same[0] {
		t.Fatalf("a batch with nothing of version 3 was rewritten (err %v)", err)
	}

	// A unit of two parts, the move with its reason inside.
	body := framed(cancel, nack.Encode(nil))
	cut := len(body) / 2
	batch := framed(deadAdd.Encode(nil), record.AppendUnit(nil, 0, 1, body[:cut]), record.AppendUnit(nil, 1, 0, body[cut:]), plainAdd)
	got, err := downgrade(batch, 2)
	if err != nil {
		t.Fatal(err)
	}
	recs := unframe(t, got)
	if len(recs) < 3 {
		t.Fatalf("%d records out of 4", len(recs))
	}
	want := *deadAdd
	want.Origin, want.Reason = nil, nil
	if !bytes.Equal(recs[0], want.Encode(nil)) {
		t.Errorf("dead-lettered add: %x, want %x", recs[0], want.Encode(nil))
	}
	if !bytes.Equal(recs[len(recs)-1], plainAdd) {
		t.Errorf("the plain add changed: %x", recs[len(recs)-1])
	}
	var whole []byte
	for i, p := range recs[1 : len(recs)-1] {
		part, more, b, err := record.DecodeUnit(p)
		if err != nil || part != uint64(i) || (more == 0) != (i == len(recs)-3) || len(b) > cut {
			t.Fatalf("unit part %d: part %d more %d len %d (cut at %d) err %v", i, part, more, len(b), cut, err)
		}
		whole = append(whole, b...)
	}
	inner := unframe(t, whole)
	wantMove := *nack
	wantMove.Reason = nil
	if len(inner) != 2 || !bytes.Equal(inner[0], cancel) || !bytes.Equal(inner[1], wantMove.Encode(nil)) {
		t.Errorf("the unit's records: %x, want the cancel and %x", inner, wantMove.Encode(nil))
	}
	for _, r := range append(recs[:1:1], inner...) {
		var d record.Rec
		if err := d.Decode(r); err != nil || d.Origin != nil || d.Reason != nil {
			t.Errorf("%x decodes to %+v, %v", r, d, err)
		}
	}

	// A snapshot's end mark is kept.
	snap := record.EndSnap(record.AppendSnap(nil, deadAdd.Encode(nil)))
	if got, err := downgrade(snap, 2); err != nil || got[len(got)-1] != 0 || len(unframe(t, got[:len(got)-1])) != 1 {
		t.Errorf("snapshot downgraded to %x, %v", got, err)
	}

	// A kind version 2 cannot read is never sent (Allows refused it).
	pause := (&record.Rec{Op: record.Pause, Time: 9, Queue: []byte("q"), Flags: 1}).Encode(nil)
	if _, err := downgrade(framed(pause), 2); err == nil {
		t.Error("a pause record was written for version 2 members")
	}
}

func testFSM() *fsm {
	f := &fsm{c: &Cluster{log: zerolog.Nop()}, members: map[string]member{}}
	f.version.Store(minFormat)
	return f
}

// The gate: a kind of version 3 is refused until the version is raised,
// by entries that only raise it, never past what this binary reads.
func TestVersionGate(t *testing.T) {
	f := testFSM()
	c := f.c
	c.fsm = f
	if err := c.Allows(record.Pause); !errors.Is(err, ErrVersionGate) {
		t.Fatalf("pause at version 2: %v", err)
	}
	if err := c.Allows(record.Requeue); !errors.Is(err, ErrVersionGate) {
		t.Fatalf("requeue at version 2: %v", err)
	}
	if err := c.Allows(record.Add); err != nil {
		t.Fatalf("add at version 2: %v", err)
	}
	if err := f.applyVersion(binary.AppendUvarint(nil, 3)); err != nil || c.Version() != 3 {
		t.Fatalf("raised to 3: version %d, %v", c.Version(), err)
	}
	if err := c.Allows(record.Pause); err != nil {
		t.Fatalf("pause at version 3: %v", err)
	}
	if err := f.applyVersion(binary.AppendUvarint(nil, 2)); err != nil || c.Version() != 3 {
		t.Fatalf("an entry of 2 after 3: version %d, %v", c.Version(), err)
	}
	if err := f.applyVersion(binary.AppendUvarint(nil, FormatVersion+1)); err == nil || c.Version() != 3 {
		t.Fatalf("a version above this binary's: version %d, %v", c.Version(), err)
	}
	if err := f.applyVersion([]byte{0x80}); err == nil {
		t.Fatal("a malformed entry applied")
	}
}

// A snapshot below version 3 is framed as 0.2.0 framed it, byte for byte;
// from 3 on it says its version, and one from a newer delayd is refused.
func TestSnapshotHeaderVersions(t *testing.T) {
	ms, _ := json.Marshal(map[string]member{"n1": {ID: "n1", Addr: "127.0.0.1:1", BusAddr: "127.0.0.1:2"}})
	old := append(binary.AppendUvarint(nil, uint64(len(ms))), ms...) // 0.2.0's Persist
	if got := appendSnapshotHeader(nil, 2, ms, nil); !bytes.Equal(got, old) {
		t.Fatalf("version 2 header %x, 0.2.0 wrote %x", got, old)
	}
	for _, v := range []uint32{2, 3} {
		for _, slots := range [][]byte{nil, []byte(`{"groups":2}`)} {
			b := append(appendSnapshotHeader(nil, v, ms, slots), "engine"...)
			br := bufio.NewReader(bytes.NewReader(b))
			gv, gm, gs, err := readSnapshotHeader(br)
			rest, _ := br.ReadString(0)
			want := slots
			if v < 3 {
				want = nil // no framing to say it is there
			}
			if err != nil || gv != v || !bytes.Equal(gm, ms) || !bytes.Equal(gs, want) || rest != "engine" {
				t.Errorf("version %d, slots %s: read %d %s %s %q %v", v, slots, gv, gm, gs, rest, err)
			}
		}
	}
	// Without a slot map, framing 1 as before.
	if b := appendSnapshotHeader(nil, 3, ms, nil); b[1] != snapshotFraming {
		t.Errorf("framing %d without a slot map", b[1])
	}
	// What 0.2.0 makes of a versioned header: an empty members' JSON, an error.
	var m map[string]member
	if n, _ := binary.Uvarint(appendSnapshotHeader(nil, 3, ms, nil)); n != 0 || json.Unmarshal(nil, &m) == nil {
		t.Fatal("a versioned snapshot would not fail on a 0.2.0 node")
	}
	newer := append([]byte{0}, binary.AppendUvarint(binary.AppendUvarint(nil, snapshotFraming), FormatVersion+1)...)
	if _, _, _, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(newer))); err == nil {
		t.Error("a snapshot of a newer cluster version was read")
	}
	other := append([]byte{0}, binary.AppendUvarint(nil, slotsFraming+1)...)
	if _, _, _, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(other))); err == nil {
		t.Error("a snapshot of another framing was read")
	}
}

// At the cluster's version nothing is left out.
func TestDowngradeAtTheVersionIsNone(t *testing.T) {
	nack := (&record.Rec{Op: record.Move, Time: 7, Queue: []byte("q"), ID: []byte("c"), Reason: []byte("r")}).Encode(nil)
	pause := (&record.Rec{Op: record.Pause, Time: 9, Queue: []byte("q"), Flags: 1}).Encode(nil)
	b := framed(nack, pause)
	if got, err := downgrade(b, FormatVersion); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("downgraded to the binary's own version: %x, %v", got, err)
	}
}

// A node put back under a cluster of a newer delayd (a fake next version
// here) stops taking part at the first entry it cannot read, rather than
// go on with a state that is no longer the group's.
func TestOlderNodeStopsOnNewerEntries(t *testing.T) {
	// The leader applies a version entry as every node does (it stops
	// first, here); an engine batch it made, it applied when it made it.
	for _, c := range []struct {
		name      string
		entry     []byte
		leaderToo bool
	}{
		{"a version entry past this binary's", binary.AppendUvarint([]byte{entryVersion}, FormatVersion+1), true},
		{"a record kind this binary does not know", append([]byte{entryEngine}, framed([]byte{200, 2, 1, 'q'})...), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			nodes := startGroup(t, 2)
			leader := leaderOf(t, nodes)
			var follower *testNode
			for _, n := range nodes {
				if n != leader {
					follower = n
				}
			}
			waitFor(t, 10*time.Second, "the follower in the group", func() bool { return follower.c.r().LastIndex() >= leader.c.r().LastIndex() })
			if err := leader.c.r().Apply(c.entry, 5*time.Second).Error(); err != nil {
				t.Fatal(err)
			}
			stops := follower
			if c.leaderToo {
				stops = leader
			}
			waitFor(t, 10*time.Second, "the node to stop", func() bool { return stops.c.r().State() == raft.Shutdown })
			if !c.leaderToo && leader.c.r().State() == raft.Shutdown {
				t.Error("the leader stopped on its own batch")
			}
		})
	}
}

// What a leader pays per batch while the cluster's version is below its
// own: a batch of 128 plain adds (decoded, none rewritten), and one of 128
// NACKs with reasons (each rewritten).
func BenchmarkDowngrade(b *testing.B) {
	var plain, reasons [][]byte
	for i := range 128 {
		id := []byte{'j', byte(i)}
		plain = append(plain, (&record.Rec{Op: record.Add, Time: 5, Queue: []byte("queue"), ID: id, Due: 9, Seq: uint64(i),
			Payload: make([]byte, 64), Retry: -1}).Encode(nil))
		reasons = append(reasons, (&record.Rec{Op: record.Move, Time: 7, Queue: []byte("queue"), ID: id, Due: 7, Seq: uint64(i),
			Deliveries: 1, Flags: record.FlagReady, Reason: []byte("connection refused")}).Encode(nil))
	}
	for _, c := range []struct {
		name  string
		batch []byte
	}{{"adds", framed(plain...)}, {"nacks-with-reasons", framed(reasons...)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.batch)))
			for b.Loop() {
				if _, err := downgrade(c.batch, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Once the version is raised, a member that says an older one (started
// again on an older binary) is named; one that does not answer is not.
func TestStaleMembersNamed(t *testing.T) {
	nodes := startGroup(t, 3)
	leader := leaderOf(t, nodes)
	waitFor(t, 10*time.Second, "the version raised", func() bool { return leader.c.Version() == FormatVersion })
	var old, down string
	for _, n := range nodes {
		if n == leader {
			continue
		}
		waitFor(t, 10*time.Second, "the members' addresses", func() bool { return leader.c.memberAddr(n.c.ID()) != "" })
		if old == "" {
			old = n.c.ID()
		} else {
			down = n.c.ID()
		}
	}
	says := map[string]func() (int, error){
		leader.c.memberAddr(old):  func() (int, error) { return minFormat, nil },
		leader.c.memberAddr(down): func() (int, error) { return 0, errors.New("connection refused") },
	}
	got := leader.c.staleMembers(func(addr string) (int, error) { return says[addr]() })
	if len(got) != 1 || got[old] != minFormat {
		t.Fatalf("stale members %v, want only %s at %d", got, old, minFormat)
	}
}
