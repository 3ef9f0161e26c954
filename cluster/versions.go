package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/delayd/delayd/record"
)

// The version gate (docs/decisions/versions.md), as CockroachDB's cluster
// version: a binary reads every format up to its FormatVersion, but writes
// only what the cluster's version allows, and the leader raises that
// version, by a Raft entry every node applies, once every member says it
// reads the next one. The version never goes down.
//
// A format version is a number that each release changing a format on the
// wire or in the Raft data raises:
//
//	1  0.1.0  record ops 1-10
//	2  0.2.0  ops 11-15 (schedules, tombstones, limits), add tail bits 0-3
//	3  0.3.0  ops 16-17 (pause, requeue), add tail bits origin and reason,
//	          the move tail; version entries; snapshots with a version;
//	          with several groups (0.3.0's too), group 0's slot entries
//	          (kind 4) and its snapshots with a map (slotsFraming); the
//	          bus's own framing of AppendEntries (bus.go)
//
// A node tells its format version in CLUSTER INFO (delayd_node_version); a
// node whose CLUSTER INFO says none is a 0.2.0 (or older) node, read as 2.
// 0.1.0 cannot be told from 0.2.0 that way: a 0.1.0 cluster is upgraded to
// 0.2.0 first, or stopped whole and started on this binary.
const (
	FormatVersion   = 3 // what this binary reads, and writes once the cluster's version is raised to it
	minFormat       = 2 // the version of a cluster (or a node) that names none
	entryVersion    = 3 // Raft entry kind: the cluster's version raised, a uvarint
	snapshotFraming = 1 // the framing of a versioned Raft snapshot (appendSnapshotHeader)
	// slotsFraming is framing 1 plus the slot map (slots.go) after the
	// members: written only by a group 0 that holds a map, so one-group
	// clusters keep writing framing 1.
	slotsFraming = 2
)

// opSince is the format version that brought a record kind, for the kinds
// later than 2; every other kind is readable by any member.
var opSince = map[byte]uint32{record.Pause: 3, record.Requeue: 3}

// ErrVersionGate prefixes a write refused because some member could not
// read its record.
var ErrVersionGate = errors.New("not every node of the cluster runs a delayd that reads it yet")

// Version is the cluster's format version (the gate): what the leader
// writes and every member reads.
func (c *Cluster) Version() int { return int(c.fsm.version.Load()) }

// NodeVersion is the format version this binary reads.
func (c *Cluster) NodeVersion() int { return FormatVersion }

// Allows reports whether a record of kind op may be written now
// (engine.FormatGate): a kind newer than the cluster's version is refused
// before anything changes, so no member ever gets a record it cannot read.
func (c *Cluster) Allows(op byte) error {
	need, ok := opSince[op]
	if !ok || c.fsm.version.Load() >= need {
		return nil
	}
	return fmt.Errorf("%w (it writes a %s record, of version %d; the cluster's version is %d until every node runs delayd 0.%d.0 or later: CLUSTER INFO delayd_cluster_version)",
		ErrVersionGate, record.Name(op), need, c.fsm.version.Load(), need)
}

// gateLoop raises the cluster's version while this node leads and the
// version is below this binary's: at once when it starts leading or a node
// joins (gateKick), and every 2 s while a member still runs older. Once it
// is raised, it asks the members every 10 s, to name a node started again
// on an older binary (which fails on the first record it cannot read).
func (c *Cluster) gateLoop() {
	defer c.wg.Done()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	told := map[string]int{} // members named stale, with the version they said
	for tick := 0; ; tick++ {
		select {
		case <-c.quit:
			return
		case <-t.C:
		case <-c.gateKick:
		}
		switch {
		case !c.Writable():
		case c.Version() < FormatVersion:
			c.raiseGate()
		case tick%5 == 0:
			stale := c.staleMembers(c.versionOf)
			for id, v := range stale {
				if told[id] != v {
					c.log.Error().Str("id", id).Int("node_version", v).Int("cluster_version", c.Version()).
						Msg("cluster: a member runs an older delayd than the cluster's version: it cannot read the log; start it on this release")
				}
			}
			told = stale
		}
	}
}

// staleMembers asks every other member its format version (by ask) and
// returns those below the cluster's, with what they said. A member that
// does not answer is not named: it may be down.
func (c *Cluster) staleMembers(ask func(addr string) (int, error)) map[string]int {
	f := c.r().GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	out := map[string]int{}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == c.id {
			continue
		}
		if v, err := ask(c.memberAddr(string(s.ID))); err == nil && v < c.Version() {
			out[string(s.ID)] = v
		}
	}
	return out
}

// kickGate asks gateLoop to look now.
func (c *Cluster) kickGate() {
	select {
	case c.gateKick <- struct{}{}:
	default:
	}
}

// raiseGate asks every member of the configuration, over RESP, which
// format version it reads, and raises the cluster's to the lowest answer.
// A member that does not answer (down, restarting) holds the gate where it
// is: it may come back on the old binary.
func (c *Cluster) raiseGate() {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	f := c.r().GetConfiguration()
	if f.Error() != nil {
		return
	}
	low := FormatVersion
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == c.id {
			continue
		}
		v, err := c.versionOf(c.memberAddr(string(s.ID)))
		if err != nil {
			c.log.Debug().Err(err).Str("node", string(s.ID)).Msg("cluster: version gate: a member did not say its version")
			return
		}
		low = min(low, v)
	}
	if low <= c.Version() {
		return
	}
	data := binary.AppendUvarint([]byte{entryVersion}, uint64(low))
	if err := c.r().Apply(data, 10*time.Second).Error(); err != nil {
		c.log.Warn().Err(err).Int("version", low).Msg("cluster: raising the cluster's version failed; trying again")
	}
}

// raiseAlone raises the version of a group of this node alone (one just
// bootstrapped, or a single node's data upgraded) before it takes its
// first write, so that a new cluster never refuses what its binary writes.
// Called by a new leader before it leads.
func (c *Cluster) raiseAlone() {
	f := c.r().GetConfiguration()
	if c.Version() >= FormatVersion || f.Error() != nil || len(f.Configuration().Servers) != 1 {
		return
	}
	data := binary.AppendUvarint([]byte{entryVersion}, FormatVersion)
	if err := c.r().Apply(data, 10*time.Second).Error(); err != nil {
		c.log.Warn().Err(err).Msg("cluster: raising the cluster's version failed; the gate loop tries again")
	}
}

// memberAddr is where member id's clients connect, as far as this node
// knows ("" when it does not).
func (c *Cluster) memberAddr(id string) string {
	if m, ok := c.fsm.memberList()[id]; ok && m.Addr != "" {
		return m.Addr
	}
	return c.cachedMembers[id].Addr
}

// askVersion asks the node whose clients connect at addr for its format
// version: CLUSTER INFO's delayd_node_version, or minFormat when it has
// none (a node of 0.2.0 or older).
func (c *Cluster) askVersion(addr string) (int, error) {
	if addr == "" {
		return 0, errors.New("its client address is not known yet")
	}
	cl := c.client(addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := cl.Do(ctx, "CLUSTER", "INFO").Text()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "delayd_node_version:"); ok {
			return strconv.Atoi(v)
		}
	}
	return minFormat, nil
}

// checkJoiner refuses a node that cannot read what the cluster writes: once
// the version is above what an old node reads, an old node asking to join
// is told so, instead of joining and failing on the first record.
func (c *Cluster) checkJoiner(id, addr string) error {
	have := c.Version()
	if have <= minFormat {
		return nil
	}
	v, err := c.versionOf(addr)
	if err != nil {
		return fmt.Errorf("ERR cannot ask node %s at %s which delayd it runs: %v", id, addr, err)
	}
	if v < have {
		c.log.Warn().Str("id", id).Str("addr", addr).Int("node_version", v).Int("cluster_version", have).
			Msg("cluster: a node of an older delayd asked to join; refused")
		return fmt.Errorf("ERR node %s runs an older delayd (format version %d) than this cluster's version %d: "+
			"upgrade it to delayd 0.%d.0 or later before it joins", id, v, have, have)
	}
	return nil
}

// applyVersion applies a version entry: the cluster's version only rises.
func (f *fsm) applyVersion(b []byte) error {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) {
		return errors.New("cluster: malformed version entry")
	}
	if v > FormatVersion {
		// Never raised without this node saying it reads it: this binary
		// was put back under a cluster of a newer one.
		return fmt.Errorf("cluster: the cluster's version is %d, above the %d this delayd reads: run a newer delayd", v, FormatVersion)
	}
	if old := f.raise(uint32(v)); old < uint32(v) {
		f.c.log.Info().Uint64("version", v).Uint32("was", old).Msg("cluster: the cluster's version was raised: every node reads its formats")
	}
	return nil
}

// tooOld stops this node on an entry its binary cannot read (a newer
// delayd's: the cluster's version rose past it, and it was rolled back):
// applying the rest would diverge from the group, so it takes no further
// part, as a failed rebuild does, and says what to run.
func (f *fsm) tooOld(err error, index uint64) error {
	f.c.log.Error().Err(err).Uint64("index", index).Int("node_version", FormatVersion).
		Msg("cluster: the cluster's log holds what a newer delayd wrote; this node stops taking part: start it with that delayd")
	go f.c.Close()
	return err
}

// raise sets the version to at least v and returns what it was.
func (f *fsm) raise(v uint32) uint32 {
	for {
		old := f.version.Load()
		if old >= v || f.version.CompareAndSwap(old, v) {
			return old
		}
	}
}

// A versioned snapshot starts with a zero, where the members' header of
// an unversioned one (0.2.0's) starts with its non-zero length: then the
// framing (uvarint), the cluster's version (uvarint), and the members'
// header as before; framing 2 adds the slot map's (a uvarint length, then
// the map as slotsJSON writes it). An older node reading one fails on an
// empty header, and cannot get one: it is written only once the version
// is 3. A snapshot of version 2 holds no slot map (group 0's leader writes
// the map again, slots.go).
func appendSnapshotHeader(dst []byte, version uint32, members, slots []byte) []byte {
	if version >= 3 {
		framing := uint64(snapshotFraming)
		if len(slots) > 0 {
			framing = slotsFraming
		}
		dst = append(dst, 0)
		dst = binary.AppendUvarint(dst, framing)
		dst = binary.AppendUvarint(dst, uint64(version))
	}
	dst = binary.AppendUvarint(dst, uint64(len(members)))
	dst = append(dst, members...)
	if version >= 3 && len(slots) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(slots)))
		dst = append(dst, slots...)
	}
	return dst
}

// readSnapshotHeader reads what appendSnapshotHeader wrote: the cluster's
// version (minFormat for an unversioned snapshot), the members' JSON and
// the slot map's (nil when it holds none).
func readSnapshotHeader(br *bufio.Reader) (version uint32, members, slots []byte, err error) {
	version = minFormat
	framing := uint64(0)
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return 0, nil, nil, err
	}
	if n == 0 {
		if framing, err = binary.ReadUvarint(br); err != nil {
			return 0, nil, nil, err
		}
		if framing != snapshotFraming && framing != slotsFraming {
			return 0, nil, nil, fmt.Errorf("snapshot framing %d is newer than this delayd reads: run a newer delayd", framing)
		}
		v, err := binary.ReadUvarint(br)
		if err != nil {
			return 0, nil, nil, err
		}
		if v > FormatVersion {
			return 0, nil, nil, fmt.Errorf("the snapshot's cluster version %d is above the %d this delayd reads: run a newer delayd", v, FormatVersion)
		}
		version = uint32(v)
		if n, err = binary.ReadUvarint(br); err != nil {
			return 0, nil, nil, err
		}
	}
	if members, err = readSized(br, n); err != nil {
		return 0, nil, nil, err
	}
	if framing == slotsFraming {
		if n, err = binary.ReadUvarint(br); err != nil {
			return 0, nil, nil, err
		}
		if slots, err = readSized(br, n); err != nil {
			return 0, nil, nil, err
		}
	}
	return version, members, slots, nil
}

func readSized(br *bufio.Reader, n uint64) ([]byte, error) {
	if n > 64<<20 {
		return nil, errors.New("too large")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, err
	}
	return b, nil
}
