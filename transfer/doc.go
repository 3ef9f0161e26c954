// Package transfer moves jobs between a delayd server and a file: the JSON
// lines of `delayd export` and `delayd import`, one job a line, with
// everything a job carries (id, queue, state, due time, deliveries, options),
// so that an import into another server gives the same jobs. It is a client
// of the RESP protocol, never of the engine: what it reads and writes goes
// through commands any client may send (DELAY.SCAN page by page out,
// DELAY.IMPORT pipelined in), to a single node or a cluster alike
// (docs/decisions/export-import.md).
package transfer
