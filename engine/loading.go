package engine

import "github.com/delayd/delayd/journal"

// ErrLoadAborted is what New returns when Loading.Abort gave up its replay.
var ErrLoadAborted = journal.ErrLoadAborted

// Loading follows New's replay of the log from other goroutines, and can
// stop it (journal.Loading). Pass it in Options.Loading.
type Loading = journal.Loading
