// Package commands is delayd's command table and dispatcher: one row per
// command (name, arity, flags, synopsis, handler), checked once for arity and
// auth before any handler runs. Handlers parse and validate arguments, call
// the engine, and shape replies through the Writer the resp package gives
// them. Redis's exact error wording lives here, so clients map our errors to
// their usual exceptions; the DELAY.* commands' options go through one
// parser (options.go) whose errors keep Redis's prefix and name the word.
//
// Until main publishes the engine (SetEngine, once the log is loaded), every
// command not flagged Loading gets Redis's LOADING error; flagged handlers
// run with engineFor returning nil.
//
// Blocking commands do not block here: a handler that must wait sets
// Client.Block, and the connection loop in resp waits on it while it watches
// the socket, because only the connection can notice a client that leaves.
//
// Around every handler the dispatcher lets observers see the command
// (observe.go): client tracking remembers the keys a read names before it
// reads (tracking.go), SLOWLOG times it, MONITOR streams it. Messages to
// other connections (invalidations, MONITOR lines) go through Client.Conn,
// which never blocks, since the engine's change hook runs under its lock.
package commands
