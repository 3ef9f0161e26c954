package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func sampleAppend() *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: 3, ID: []byte("leader-id"), Addr: []byte("127.0.0.1:7000")},
		Term:              10,
		Leader:            []byte("127.0.0.1:7000"),
		PrevLogEntry:      100,
		PrevLogTerm:       4,
		LeaderCommitIndex: 90,
		Entries: []*raft.Log{
			{Index: 101, Term: 4, Type: raft.LogCommand, Data: []byte("\x01batch"), AppendedAt: time.Unix(0, 1795947520629000123)},
			{Index: 102, Term: 5, Type: raft.LogNoop},
			{Index: 103, Term: 5, Type: raft.LogConfiguration, Data: bytes.Repeat([]byte{7}, 300), Extensions: []byte("ext")},
			{Index: 104, Term: 5, Type: raft.LogCommand, Data: []byte{entryMember}, AppendedAt: time.Unix(-5, 0)},
		},
	}
}

func TestFrameRoundTrip(t *testing.T) {
	for _, a := range []*raft.AppendEntriesRequest{
		sampleAppend(),
		{}, // nothing set
		{RPCHeader: raft.RPCHeader{Addr: []byte("a:1")}, Term: 3}, // a heartbeat
	} {
		got, err := decodeEntriesFrame(appendEntriesFrame(nil, a))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("decoded %+v, sent %+v", got, a)
		}
	}
	// An append to a decoded entry's data does not write over the next.
	got, _ := decodeEntriesFrame(appendEntriesFrame(nil, sampleAppend()))
	_ = append(got.Entries[0].Data, "xxxxxxxx"...)
	if got.Entries[1].Index != 102 || string(got.Entries[2].Extensions) != "ext" {
		t.Fatal("an append to an entry's data changed the frame after it")
	}

	for _, c := range []struct {
		err  string
		resp *raft.AppendEntriesResponse
	}{
		{"", &raft.AppendEntriesResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: 3, ID: []byte("f"), Addr: []byte("a:2")}, Term: 10, LastLog: 104, Success: true}},
		{"", &raft.AppendEntriesResponse{Term: 11, LastLog: 7, NoRetryBackoff: true}},
		{"unexpected command", nil},
	} {
		var r raft.AppendEntriesResponse
		body := appendReplyFrame(nil, c.err, c.resp)
		text, err := decodeReplyFrame(body, &r)
		if err != nil || text != c.err {
			t.Fatalf("error text %q, %v; want %q", text, err, c.err)
		}
		want := c.resp
		if want == nil {
			want = &raft.AppendEntriesResponse{}
		}
		if !reflect.DeepEqual(&r, want) {
			t.Fatalf("decoded %+v, sent %+v", r, want)
		}
		// The reply's bytes are its own: the connection reuses the frame.
		for i := range body {
			body[i] = 0xff
		}
		if !reflect.DeepEqual(&r, want) {
			t.Fatal("the decoded reply shares the frame's bytes")
		}
	}
}

func TestFrameDamageRefused(t *testing.T) {
	body := appendEntriesFrame(nil, sampleAppend())
	for n := 0; n < len(body); n++ {
		if _, err := decodeEntriesFrame(body[:n:n]); err == nil {
			t.Fatalf("a frame cut at %d of %d bytes decoded", n, len(body))
		}
	}
	if _, err := decodeEntriesFrame(append(body[:len(body):len(body)], 0)); err == nil {
		t.Fatal("a frame with a byte after its entries decoded")
	}
	// A count of entries the frame cannot hold is refused before anything
	// is allocated for it.
	huge := appendEntriesFrame(nil, &raft.AppendEntriesRequest{})
	huge = append(huge[:len(huge)-1], 0xff, 0xff, 0xff, 0xff, 0x0f)
	if _, err := decodeEntriesFrame(huge); err == nil {
		t.Fatal("a count of 4 billion entries decoded")
	}
	reply := appendReplyFrame(nil, "x", &raft.AppendEntriesResponse{Success: true})
	for n := 0; n < len(reply); n++ {
		if _, err := decodeReplyFrame(reply[:n], &raft.AppendEntriesResponse{}); err == nil {
			t.Fatalf("a reply cut at %d of %d bytes decoded", n, len(reply))
		}
	}
	// Garbage never panics.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.Intn(64))
		rng.Read(b)
		if rng.Intn(2) == 0 && len(b) > 0 {
			b[0] = frameAppend
		}
		decodeEntriesFrame(b)
		decodeReplyFrame(b, &raft.AppendEntriesResponse{})
	}
	// A stream: a length past frameMax, or a body cut short.
	for _, s := range [][]byte{{0}, {0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, {5, 1, 2}} {
		if _, err := readFrame(bufio.NewReader(bytes.NewReader(s)), nil); err == nil || err == io.EOF {
			t.Fatalf("readFrame(% x) = %v", s, err)
		}
	}
}

// testTracker is a tracker on a free port of 127.0.0.1.
func testTracker(t *testing.T, framing bool) (*tracker, raft.ServerAddress) {
	t.Helper()
	tr, err := newTracker("127.0.0.1:0", "127.0.0.1:0", hclog.NewNullLogger(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.framing = func() bool { return framing }
	t.Cleanup(func() { tr.Close() })
	return tr, raft.ServerAddress(tr.stream.ln.Addr().String())
}

// serveRPCs answers every RPC of trans's consumer with answer, until the
// test ends, and sends what it got on the returned channel.
func serveRPCs(t *testing.T, consumer <-chan raft.RPC, answer func(raft.RPC)) <-chan raft.RPC {
	got := make(chan raft.RPC, 100)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case rpc := <-consumer:
				select {
				case got <- rpc:
				default: // a test that does not look
				}
				answer(rpc)
			case <-done:
				return
			}
		}
	}()
	return got
}

var okAppend = &raft.AppendEntriesResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: 3, ID: []byte("f")}, Term: 10, LastLog: 104, Success: true}

// The transport contract hashicorp/raft's net_transport_test.go checks,
// on both paths: an AppendEntries arrives as sent and its reply comes back,
// errors included; votes, TimeoutNow and snapshots (with their data) go
// through; heartbeats go to the heartbeat handler, not the main loop.
func TestTrackerContract(t *testing.T) {
	for _, framing := range []bool{true, false} {
		t.Run(fmt.Sprintf("framing=%v", framing), func(t *testing.T) {
			leader, _ := testTracker(t, framing)
			follower, addr := testTracker(t, framing)
			got := serveRPCs(t, follower.Consumer(), func(rpc raft.RPC) {
				switch cmd := rpc.Command.(type) {
				case *raft.AppendEntriesRequest:
					if cmd.Term == 99 {
						rpc.Respond(nil, errors.New("unexpected command"))
						return
					}
					rpc.Respond(okAppend, nil)
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Term: cmd.Term, Granted: true}, nil)
				case *raft.TimeoutNowRequest:
					rpc.Respond(&raft.TimeoutNowResponse{}, nil)
				case *raft.InstallSnapshotRequest:
					b, _ := io.ReadAll(rpc.Reader)
					rpc.Respond(&raft.InstallSnapshotResponse{Term: cmd.Term, Success: string(b) == "snapshot bytes"}, nil)
				}
			})

			args := sampleAppend()
			var resp raft.AppendEntriesResponse
			if err := leader.AppendEntries("f", addr, args, &resp); err != nil {
				t.Fatal(err)
			}
			rpc := <-got
			if framing {
				if !reflect.DeepEqual(rpc.Command, args) {
					t.Fatalf("the follower got %+v, sent %+v", rpc.Command, args)
				}
			} else if cmd := rpc.Command.(*raft.AppendEntriesRequest); cmd.Term != 10 || len(cmd.Entries) != 4 {
				t.Fatalf("the follower got %+v", cmd)
			}
			if !reflect.DeepEqual(&resp, okAppend) {
				t.Fatalf("reply %+v, want %+v", resp, okAppend)
			}
			if m, _, ok := leader.peer("f", time.Second); m != 104 || !ok {
				t.Fatalf("match %d, connected %v after a reply; want 104", m, ok)
			}

			bad := sampleAppend()
			bad.Term = 99
			if err := leader.AppendEntries("f", addr, bad, &resp); err == nil || err.Error() != "unexpected command" {
				t.Fatalf("an error reply came back as %v", err)
			}
			<-got

			var vote raft.RequestVoteResponse
			if err := leader.RequestVote("f", addr, &raft.RequestVoteRequest{Term: 12}, &vote); err != nil || !vote.Granted || vote.Term != 12 {
				t.Fatalf("RequestVote: %+v, %v", vote, err)
			}
			<-got
			if err := leader.TimeoutNow("f", addr, &raft.TimeoutNowRequest{}, &raft.TimeoutNowResponse{}); err != nil {
				t.Fatalf("TimeoutNow: %v", err)
			}
			<-got
			var snap raft.InstallSnapshotResponse
			data := strings.NewReader("snapshot bytes")
			if err := leader.InstallSnapshot("f", addr, &raft.InstallSnapshotRequest{Term: 12, LastLogIndex: 500, Size: int64(data.Len())}, &snap, data); err != nil || !snap.Success {
				t.Fatalf("InstallSnapshot: %+v, %v", snap, err)
			}
			<-got
			if m, _, _ := leader.peer("f", time.Second); m != 500 {
				t.Fatalf("match %d after a snapshot to 500", m)
			}

			hb := make(chan raft.RPC, 1)
			follower.SetHeartbeatHandler(func(rpc raft.RPC) {
				hb <- rpc
				rpc.Respond(&raft.AppendEntriesResponse{Term: 12, Success: true}, nil)
			})
			heartbeat := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("l"), Addr: []byte("127.0.0.1:1")}, Term: 12}
			if err := leader.AppendEntries("f", addr, heartbeat, &resp); err != nil || !resp.Success || resp.Term != 12 {
				t.Fatalf("heartbeat: %+v, %v", resp, err)
			}
			select {
			case <-hb:
			default:
				t.Fatal("a heartbeat did not go to the heartbeat handler")
			}
			select {
			case rpc := <-got:
				t.Fatalf("a heartbeat went to the main loop: %+v", rpc.Command)
			default:
			}
		})
	}
}

// A rolling upgrade: a leader of an older release sends msgpack to a node
// of this one, and this one, until the group's version says every member
// reads frames, sends msgpack to an older node.
func TestTrackerMixedVersions(t *testing.T) {
	newer, newAddr := testTracker(t, false)
	serveRPCs(t, newer.Consumer(), func(rpc raft.RPC) { rpc.Respond(okAppend, nil) })
	older, olderAddr := oldTransport(t)
	serveRPCs(t, older.Consumer(), func(rpc raft.RPC) { rpc.Respond(okAppend, nil) })

	var resp raft.AppendEntriesResponse
	if err := older.AppendEntries("n", newAddr, sampleAppend(), &resp); err != nil || !resp.Success {
		t.Fatalf("older leader to newer follower: %+v, %v", resp, err)
	}
	if err := newer.AppendEntries("o", olderAddr, sampleAppend(), &resp); err != nil || !resp.Success {
		t.Fatalf("newer leader (gate below 3) to older follower: %+v, %v", resp, err)
	}
	// An older node started again on a member after the version rose
	// closes a connection of frames unanswered: the same append goes again
	// in msgpack, and so do the next ones for a while, without a failure
	// (Raft's backoff would keep a node back on this release waiting).
	newer.framing = func() bool { return true }
	now := time.Unix(1000, 0)
	newer.now = func() time.Time { return now }
	for i := 0; i < 3; i++ {
		resp = raft.AppendEntriesResponse{}
		if err := newer.AppendEntries("o", olderAddr, sampleAppend(), &resp); err != nil || !resp.Success {
			t.Fatalf("append %d to an older node after the version rose: %+v, %v", i, resp, err)
		}
	}
	if !newer.msgpackOnly(olderAddr) {
		t.Fatal("a peer that refused frames is sent frames again at once")
	}
	now = now.Add(fallbackFor)
	if newer.msgpackOnly(olderAddr) {
		t.Fatalf("frames not tried again after %v", fallbackFor)
	}
	// A node of this release is sent frames: its connection answers.
	if err := newer.AppendEntries("n", newAddr, sampleAppend(), &resp); err != nil || newer.msgpackOnly(newAddr) {
		t.Fatalf("append to a node that reads frames: %v, msgpack only %v", err, newer.msgpackOnly(newAddr))
	}
}

func oldTransport(t *testing.T) (*raft.NetworkTransport, raft.ServerAddress) {
	t.Helper()
	tr, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 3, 2*time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, tr.LocalAddr()
}

// An AppendEntries longer than a frame goes in msgpack, whole.
func TestTrackerFrameTooLarge(t *testing.T) {
	leader, _ := testTracker(t, true)
	follower, addr := testTracker(t, true)
	got := serveRPCs(t, follower.Consumer(), func(rpc raft.RPC) { rpc.Respond(okAppend, nil) })
	defer func(m uint64) { frameMax = m }(frameMax)
	frameMax = 100
	var resp raft.AppendEntriesResponse
	if err := leader.AppendEntries("f", addr, sampleAppend(), &resp); err != nil || !resp.Success {
		t.Fatalf("an append longer than a frame: %+v, %v", resp, err)
	}
	if a := (<-got).Command.(*raft.AppendEntriesRequest); len(a.Entries) != 4 || len(a.Entries[2].Data) != 300 {
		t.Fatalf("the follower got %d entries", len(a.Entries))
	}
	leader.pmu.Lock()
	idle := len(leader.pool[addr])
	leader.pmu.Unlock()
	if idle != 1 {
		t.Fatalf("%d idle connections of frames after a refused frame, want the one kept", idle)
	}
	if err := leader.AppendEntries("f", addr, &raft.AppendEntriesRequest{Term: 1}, &resp); err != nil {
		t.Fatalf("a short append after it: %v", err)
	}
}

// Appends from several goroutines (Raft's heartbeat and replication, and
// several followers) share at most maxPool connections to a peer, and each
// gets its own reply.
func TestTrackerConcurrentAppends(t *testing.T) {
	leader, _ := testTracker(t, true)
	follower, addr := testTracker(t, true)
	serveRPCs(t, follower.Consumer(), func(rpc raft.RPC) {
		a := rpc.Command.(*raft.AppendEntriesRequest)
		rpc.Respond(&raft.AppendEntriesResponse{Term: a.Term, LastLog: a.PrevLogEntry + uint64(len(a.Entries)), Success: true}, nil)
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				a := sampleAppend()
				a.Term = uint64(g*1000 + i + 1)
				var r raft.AppendEntriesResponse
				if err := leader.AppendEntries("f", addr, a, &r); err != nil {
					errs <- err
					return
				}
				if r.Term != a.Term || r.LastLog != 104 {
					errs <- fmt.Errorf("sent term %d, the reply says %d", a.Term, r.Term)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	leader.pmu.Lock()
	idle := len(leader.pool[addr])
	leader.pmu.Unlock()
	if idle < 1 || idle > maxPool {
		t.Fatalf("%d idle connections kept, want 1 to %d", idle, maxPool)
	}
}

// Close stops both paths: appends fail, a leader's connection being served
// is closed before Close returns, a second Close does nothing.
func TestTrackerClose(t *testing.T) {
	leader, _ := testTracker(t, true)
	follower, addr := testTracker(t, true)
	serveRPCs(t, follower.Consumer(), func(rpc raft.RPC) { rpc.Respond(okAppend, nil) })
	var resp raft.AppendEntriesResponse
	if err := leader.AppendEntries("f", addr, sampleAppend(), &resp); err != nil {
		t.Fatal(err)
	}
	follower.Close()
	follower.Close()
	follower.pmu.Lock()
	open := len(follower.open)
	follower.pmu.Unlock()
	if open != 0 {
		t.Fatalf("%d connections still open after Close", open)
	}
	if err := leader.AppendEntries("f", addr, sampleAppend(), &resp); err == nil {
		t.Fatal("an append to a closed transport succeeded")
	}
	leader.Close()
	if err := leader.AppendEntries("f", addr, sampleAppend(), &resp); !errors.Is(err, raft.ErrTransportShutdown) {
		t.Fatalf("an append from a closed transport: %v", err)
	}
}
