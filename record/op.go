package record

// The op-byte space: every record kind, in one place. The op is a record's
// first byte and never changes meaning: a new kind takes the next free op
// and adds a case to Rec.Encode and Rec.Decode, a row to Kinds, a golden
// record (record_test.go), a registration in the engine
// (engine/features.go) and the format version that brought it
// (cluster/versions.go), since a release before it reads it as ErrNewer.
// Ops 18 to 254 are free. 255 opens the segmented log's manifest
// (aof.ManifestOp) and is never a record: a release before segments reads
// the manifest, named as its one log file was, as ErrNewer and refuses it.
//
// Layouts: every record but tomb and unit starts with op, time (varint,
// unix ms) and queue (bytes); idkind id follows where shown: idkind 0 is a
// server id (uvarint), 1 a client id (bytes, 1 to 256 of them). Integers
// are varints unless shown as uvarints; bytes are a uvarint length then
// the bytes.
const (
	// add: op time queue idkind id due seq deliveries flags payload
	// acktimeout retry deadletter deadline [ext]: a job, whole (ext: the
	// optional tail, see extUnique).
	Add byte = 1
	// cancel: op time queue idkind id: the job is deleted (also ACK).
	Cancel byte = 2
	// pop: op time queue idkind id: a pop that deleted the job.
	Pop byte = 3
	// meta: op time queue(empty) 0 lastSID seq: the first record of a
	// rewritten log.
	Meta byte = 4
	// reserve: op time queue idkind id deadline deliveries seq: a pop with
	// an ack timeout, or TOUCH. In Rec, the deadline is Due.
	Reserve byte = 5
	// move: op time queue idkind id due seq deliveries flags [bits reason]:
	// a NACK, or a delivery taken back (see moveReason).
	Move byte = 6
	// del: op time queue: DEL, every job of the queue.
	Del byte = 7
	// unit: op part more body: a transaction, framed by AppendUnit and
	// DecodeUnit, not a Rec (see the package comment).
	Unit byte = 8
	// lmove: op time queue idkind id dst idkind id seq flags: LMOVE and
	// its kin, a ready job to Dst under the id DSID or DID.
	LMove byte = 9
	// flush: op time queue(empty): FLUSHDB, FLUSHALL.
	Flush byte = 10
	// schedule: op time queue 1 name expr zone every payload acktimeout
	// retry deadletter misfire start end since last count: a schedule's
	// whole state (Sched). The name is the client id.
	Schedule byte = 11
	// unschedule: op time queue 1 name.
	Unschedule byte = 12
	// fire: op time queue 1 name firetime seq: a schedule fired (firetime
	// in Due, seq the job's add order).
	Fire byte = 13
	// tomb: op time key end: a unique id's tombstone (key, a uvarint hash
	// of (queue, id), in SID; end, varint unix ms, in Due).
	Tomb byte = 14
	// limit: op time queue concurrency rate per groupconcurrency
	// (uvarints): a name's flow limit, set outright; all zero is OFF.
	Limit byte = 15
	// pause: op time queue paused: paused one byte, 1 paused, 0 resumed
	// (in Flags).
	Pause byte = 16
	// requeue: op time queue idkind id dst idkind id seq acktimeout retry
	// deadletter: a dead-lettered job back to work.
	Requeue byte = 17
)

// Kind names one record kind.
type Kind struct {
	Op   byte
	Name string
}

// Kinds is every record kind, by op. A row here is a promise that
// Rec.Encode and Rec.Decode handle the kind (record's tests check it) and
// that the engine registers how it applies and rewrites it (the engine's
// tests check that).
var Kinds = []Kind{
	{Add, "add"},
	{Cancel, "cancel"},
	{Pop, "pop"},
	{Meta, "meta"},
	{Reserve, "reserve"},
	{Move, "move"},
	{Del, "del"},
	{Unit, "unit"},
	{LMove, "lmove"},
	{Flush, "flush"},
	{Schedule, "schedule"},
	{Unschedule, "unschedule"},
	{Fire, "fire"},
	{Tomb, "tomb"},
	{Limit, "limit"},
	{Pause, "pause"},
	{Requeue, "requeue"},
}

// Name is the name of op's kind, "" for an op no kind has.
func Name(op byte) string {
	for _, k := range Kinds {
		if k.Op == op {
			return k.Name
		}
	}
	return ""
}
