package jobs

// Scratch is a connection's memory for the ids and payloads its pops hand
// out. A pop copies the job out of the engine before the lock is let go;
// without a Scratch that is two allocations (id, payload) per pop, with one
// it is none once the buffer has grown to the connection's usual job. The
// caller must be done with a Delivery (its reply written) before it passes
// the same Scratch to the next pop. The zero value is ready to use.
type Scratch struct{ b []byte }

// ScratchKeep bounds the buffer a Scratch keeps between pops: one big job
// must not pin its size for the life of the connection.
const ScratchKeep = 64 << 10

// Reset readies s for a new pop; a nil s stays nil (allocate per pop).
func (s *Scratch) Reset() {
	if s == nil {
		return
	}
	if cap(s.b) > ScratchKeep {
		s.b = nil
	}
	s.b = s.b[:0]
}

// HoldSID renders server id sid into s (or into its own allocation when s
// is nil) and returns it, as Hold does. Rendered in place: rendered into a
// stack buffer and copied, the copy's 16-byte load waited for the render's
// byte stores to leave the store buffer (a third of Add's own samples).
func (s *Scratch) HoldSID(sid uint64) []byte {
	if s == nil {
		var b [SIDLen]byte
		RenderSID(&b, sid)
		return b[:]
	}
	n := len(s.b)
	s.b = append(s.b, make([]byte, SIDLen)...)
	return RenderSID((*[SIDLen]byte)(s.b[n:]), sid)[:SIDLen:SIDLen]
}

// Hold copies b into s (or into its own allocation when s is nil) and
// returns the copy, with its capacity cut to its length so that an append
// to it can never run into the next copy.
func (s *Scratch) Hold(b []byte) []byte {
	if s == nil {
		return append([]byte(nil), b...)
	}
	n := len(s.b)
	s.b = append(s.b, b...)
	return s.b[n:len(s.b):len(s.b)]
}

// Cap is the memory s keeps between pops.
func (s *Scratch) Cap() int { return cap(s.b) }
