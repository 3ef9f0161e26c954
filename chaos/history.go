package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind is what an operation of the history asked the server.
type Kind uint8

const (
	KindAdd    Kind = iota + 1 // DELAY.ADD / DELAY.ADDAT with ID: Job is that id
	KindPop                    // DELAY.POP of one key: Job is the id returned, "" for a null reply
	KindAck                    // DELAY.ACK of one id: Count is the reply
	KindNack                   // DELAY.NACK of one id: Count is the reply
	KindCancel                 // DELAY.CANCEL of one id: Count is the reply
)

var kindNames = [...]string{KindAdd: "add", KindPop: "pop", KindAck: "ack", KindNack: "nack", KindCancel: "cancel"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText writes the kind's name, for histories written as JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Outcome is what the client learned about an operation's effect.
type Outcome uint8

const (
	// OK: the server replied; the effect happened once, between Invoke and
	// Return, and the reply (Job, Count) says what it was.
	OK Outcome = iota + 1
	// Fail: the operation certainly had no effect (a refusal before it ran:
	// MOVED, CLUSTERDOWN, a syntax error, a dial that never connected).
	Fail
	// Unknown: it may have had its effect, at any time after Invoke, even
	// after the client gave up (a timeout, a lost connection, TRYAGAIN for a
	// write whose Raft entry may still commit).
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Fail:
		return "fail"
	case Unknown:
		return "unknown"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText writes the outcome's name, for histories written as JSON.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Op is one operation of the history, as one client saw it.
//
// Times are nanoseconds on the history's monotonic clock (History.Now):
// ordering two operations never depends on the wall clock stepping. The
// checker turns them into wall-clock time (the server's due times and
// deadlines are unix milliseconds) through the history's start.
type Op struct {
	Index  int // position in the history, set by Record
	Client int // which client (producer, worker, ...) ran it; zero-based
	Kind   Kind
	Queue  string
	Job    string // the job id (see Kind)
	// Payload: for an add, the payload sent; for a pop, the payload
	// returned. Workload payloads are made by EncodePayload, so a
	// delivery tells its own job's id, due time and ack timeout.
	Payload string
	// Due is unix ms. For an add: the earliest due time the server can
	// give the job (for DELAY.ADD, the wall clock's millisecond at Invoke
	// plus the delay; for DELAY.ADDAT, the time given). For a pop: the due
	// time in the payload returned.
	Due int64
	// AckTimeout is ms: the ACKTIMEOUT of an add, or the one in a popped
	// payload (0: the pop removed the job).
	AckTimeout int64
	// Count is the integer reply of an ack, nack or cancel; for a pop, 1 if
	// it returned a job and 0 if it returned null; for an add, 1 if the
	// server replied the id and 0 if null (a job of that id existed).
	Count   int64
	Invoke  int64 // when the client sent it (History.Now)
	Return  int64 // when the client had its reply, or gave up (Unknown)
	Outcome Outcome
	Err     string // the error seen, for Fail and Unknown
}

// History records the operations of concurrent clients. Safe for
// concurrent use; Record is O(1) amortized.
type History struct {
	start time.Time // carries the monotonic reading Now measures from

	mu  sync.Mutex
	ops []Op
}

// NewHistory starts a history's clock now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the time on the history's monotonic clock, in ns since it began.
// Read it right before sending a command (Invoke) and right after its
// reply (Return).
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Start is the wall-clock time (unix ns) at which the history's clock
// reads 0: an operation at t on it happened at wall time Start()+t.
func (h *History) Start() int64 { return h.start.UnixNano() }

// Record appends op and returns its index.
func (h *History) Record(op Op) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Index = len(h.ops)
	h.ops = append(h.ops, op)
	return op.Index
}

// Ops returns a copy of the operations recorded so far.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// Len is the number of operations recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// WriteJSON writes a history as JSON lines, for reading after a failed
// run: first {"start": unix ns of time 0}, then one op per line. O(n).
func WriteJSON(w io.Writer, start int64, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(map[string]int64{"start": start}); err != nil {
		return err
	}
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// String shows an op the way violations are reported.
func (op Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d client %d %s %s", op.Index, op.Client, op.Kind, op.Queue)
	if op.Job != "" {
		fmt.Fprintf(&b, " %s", op.Job)
	}
	switch op.Kind {
	case KindAdd:
		fmt.Fprintf(&b, " due>=%d ackTimeout=%d", op.Due, op.AckTimeout)
	case KindPop:
		if op.Outcome == OK && op.Count == 0 {
			b.WriteString(" -> null")
		} else if op.Outcome == OK {
			fmt.Fprintf(&b, " (due %d, ackTimeout %d)", op.Due, op.AckTimeout)
		}
	default:
		if op.Outcome == OK {
			fmt.Fprintf(&b, " -> %d", op.Count)
		}
	}
	fmt.Fprintf(&b, " %s [%s, %s]", op.Outcome, fmtNs(op.Invoke), fmtNs(op.Return))
	if op.Err != "" {
		fmt.Fprintf(&b, " (%s)", op.Err)
	}
	return b.String()
}

// fmtNs shows a history time as seconds with microseconds.
func fmtNs(ns int64) string { return fmt.Sprintf("%.6fs", float64(ns)/1e9) }

// Payload is what the workload puts in a job, so that a delivery, on its
// own, says which job it is and when it was due.
type Payload struct {
	UID        string // the job's id, unique in the run
	Due        int64  // unix ms: the earliest due time (see Op.Due)
	AckTimeout int64  // ms
	Pad        int    // filler bytes, for payload size
}

const payloadMagic = "chaos1"

// EncodePayload writes p as "chaos1 uid=U due=D ack=A [pad=xxx]".
func EncodePayload(p Payload) string {
	s := fmt.Sprintf("%s uid=%s due=%d ack=%d", payloadMagic, p.UID, p.Due, p.AckTimeout)
	if p.Pad > 0 {
		s += " pad=" + strings.Repeat("x", p.Pad)
	}
	return s
}

// ErrPayload is the error of ParsePayload for a payload the workload did
// not make: a delivery of it is reported, not trusted.
var ErrPayload = errors.New("chaos: not a workload payload")

// ParsePayload reads what EncodePayload wrote.
func ParsePayload(s string) (Payload, error) {
	f := strings.Fields(s)
	if len(f) < 4 || f[0] != payloadMagic {
		return Payload{}, fmt.Errorf("%w: %.60q", ErrPayload, s)
	}
	var p Payload
	var err error
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Payload{}, fmt.Errorf("%w: %.60q", ErrPayload, s)
		}
		switch k {
		case "uid":
			p.UID = v
		case "due":
			p.Due, err = strconv.ParseInt(v, 10, 64)
		case "ack":
			p.AckTimeout, err = strconv.ParseInt(v, 10, 64)
		case "pad":
			p.Pad = len(v)
		}
		if err != nil {
			return Payload{}, fmt.Errorf("%w: %.60q", ErrPayload, s)
		}
	}
	if p.UID == "" {
		return Payload{}, fmt.Errorf("%w: no uid in %.60q", ErrPayload, s)
	}
	return p, nil
}
