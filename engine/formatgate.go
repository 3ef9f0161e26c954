package engine

// FormatGate is a Replicator that may refuse a record kind some member of
// its group cannot read yet: the cluster's version gate while a rolling
// upgrade runs (docs/decisions/versions.md). Only the kinds a version
// added ask it, before anything changes; the hot paths never do.
type FormatGate interface {
	Allows(op byte) error
}

// gateAllows asks the Replicator, if it gates formats, whether a record
// of kind op may be written now. Called with mu held.
func (e *Engine) gateAllows(op byte) error {
	if g, ok := e.opts.Replicator.(FormatGate); ok {
		return g.Allows(op)
	}
	return nil
}
