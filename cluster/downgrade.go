package cluster

import (
	"encoding/binary"
	"fmt"

	"github.com/delayd/delayd/record"
)

// Writing for older members. While the cluster's version is below 3, the
// leader's batches and snapshots go out as a 0.2.0 node reads them: the
// fields version 3 added to the add and move records (a dead letter's
// origin, a failure reason) are left out. They tell a job's past (DELAY.GET,
// the dashboard, DELAY.REQUEUE's default target), never whether or when it
// runs: while the cluster is mixed, followers (and this leader, after a
// rebuild) do without them, and lose no job. The kinds version 3 added are
// refused before they are made (Cluster.Allows), so nothing else needs
// leaving out. It costs a decode of every add and move while the version is
// low, and one atomic load per batch once it is raised.

// downgrade returns the records of b (each a uvarint length then the
// record; a snapshot's end mark, a zero length, is kept) as a node of
// format version v reads them, b itself when none had to change.
func downgrade(b []byte, v uint32) ([]byte, error) {
	if v >= FormatVersion {
		return b, nil
	}
	out, changed, err := downgradeFramed(nil, b, v)
	if err != nil || !changed {
		return b, err
	}
	return out, nil
}

// downgradeFramed appends the records of b, downgraded to version v, to
// out and says whether any changed.
func downgradeFramed(out, b []byte, v uint32) ([]byte, bool, error) {
	changed := false
	var unit []byte // the body of a unit whose commit is not read yet
	partMax := 0
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false, record.ErrBad
		}
		p := b[k : k+int(n)]
		b = b[k+int(n):]
		if n == 0 {
			out = append(out, 0) // a snapshot's end mark
			continue
		}
		if p[0] == record.Unit {
			part, more, body, err := record.DecodeUnit(p)
			if err != nil {
				return nil, false, err
			}
			if part == 0 {
				unit, partMax = unit[:0], len(body)
			}
			unit = append(unit, body...)
			if more == 1 {
				continue
			}
			inner, ch, err := downgradeFramed(nil, unit, v)
			if err != nil {
				return nil, false, err
			}
			changed = changed || ch
			out = appendUnitParts(out, inner, max(partMax, 1))
			continue
		}
		if need := opSince[p[0]]; need > v {
			return nil, false, fmt.Errorf("a %s record, which a version %d member cannot read", record.Name(p[0]), v)
		}
		rec, ch, err := downgradeRec(p, v)
		if err != nil {
			return nil, false, err
		}
		changed = changed || ch
		out = binary.AppendUvarint(out, uint64(len(rec)))
		out = append(out, rec...)
	}
	return out, changed, nil
}

// downgradeRec returns record p without the fields a version v node does
// not read, p itself when it has none. A field a later version adds to a
// kind older members read is left out here, under its version.
func downgradeRec(p []byte, v uint32) ([]byte, bool, error) {
	if v >= 3 || (p[0] != record.Add && p[0] != record.Move) {
		return p, false, nil
	}
	var r record.Rec
	if err := r.Decode(p); err != nil {
		return nil, false, err
	}
	if r.Origin == nil && len(r.Reason) == 0 {
		return p, false, nil
	}
	r.Origin, r.Reason = nil, nil
	return r.Encode(nil), true, nil
}

// appendUnitParts appends body as a unit, framed records of parts of at
// most partMax bytes (the size the engine cut it at: the downgraded body
// is never longer), the last one the commit.
func appendUnitParts(out, body []byte, partMax int) []byte {
	for part := uint64(0); ; part++ {
		n := min(len(body), partMax)
		more := byte(0)
		if n < len(body) {
			more = 1
		}
		rec := record.AppendUnit(nil, part, more, body[:n])
		out = binary.AppendUvarint(out, uint64(len(rec)))
		out = append(out, rec...)
		body = body[n:]
		if more == 0 {
			return out
		}
	}
}
