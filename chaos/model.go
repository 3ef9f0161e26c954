package chaos

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check covers a sample of queues on which the
// workload keeps to a subset of the API where a delay queue is a plain
// FIFO, so that a sequential model exists that needs no clock:
//
//   - every job is added with delay 0 and ACKTIMEOUT 0, so it joins the
//     tail of the ready list at once and a pop removes it for good;
//   - pops are DELAY.POP of that one queue, cancels DELAY.CANCEL of one id;
//   - ids are unique, so an add of a new id always appends.
//
// The model's state is the ready list, an ordered list of ids. add(id)
// appends (or, if id is present, changes nothing and must have replied
// null); pop() returns the head and removes it, or returns null on an
// empty list; cancel(id) removes id and returns 1, or returns 0.
//
// Unknown outcomes follow porcupine's convention for a timed-out call: its
// return time is after every other return (as if infinity) and the model
// accepts any output, applying the effect the call would have had at its
// linearization point. Linearized at the very end it changes nothing
// anyone saw, which is how "never happened" is expressed; linearized
// earlier, it is the write that landed after its client gave up.
//
// A blocking pop that returned null is linearized at some instant inside
// its call at which the list was empty: weaker than what the server
// promises (empty throughout its wait), so sound.
//
// Caveat: a pop whose client gives up while the server is alive may have
// its job put back at the head of the list (SPEC: a job handed to a client
// that is gone goes back to the head), which no sequential FIFO allows
// once another pop has seen the list without it. The sampled workload
// therefore waits for replies longer than any fault lasts, so its pops
// end Unknown only when the server itself failed them.

// fifoIn is one call on a sampled queue.
type fifoIn struct {
	kind Kind
	id   string // add, cancel
}

// fifoOut is its reply.
type fifoOut struct {
	unknown bool
	id      string // pop: the id returned, "" for null
	count   int64  // add: 1 id, 0 null; cancel: jobs removed
}

// A state is the ready list as "id\x00id\x00...": a string, so states
// compare with == and hash cheaply, and a step copies only what it changes.
func fifoHas(s, id string) bool {
	return strings.HasPrefix(s, id+"\x00") || strings.Contains(s, "\x00"+id+"\x00")
}

func fifoRemove(s, id string) string {
	if strings.HasPrefix(s, id+"\x00") {
		return s[len(id)+1:]
	}
	i := strings.Index(s, "\x00"+id+"\x00")
	return s[:i+1] + s[i+len(id)+2:]
}

func fifoStep(state, input, output any) (bool, any) {
	s, in, out := state.(string), input.(fifoIn), output.(fifoOut)
	switch in.kind {
	case KindAdd:
		if fifoHas(s, in.id) {
			return out.unknown || out.count == 0, s
		}
		return out.unknown || out.count == 1, s + in.id + "\x00"
	case KindPop:
		if s == "" {
			return out.unknown || out.id == "", s
		}
		head, rest, _ := strings.Cut(s, "\x00")
		return out.unknown || out.id == head, rest
	case KindCancel:
		if fifoHas(s, in.id) {
			return out.unknown || out.count == 1, fifoRemove(s, in.id)
		}
		return out.unknown || out.count == 0, s
	}
	return false, s
}

// FIFOModel is the porcupine model of one sampled queue, partitioned by
// queue (its operations carry the queue in Metadata).
var FIFOModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byQueue := make(map[string][]porcupine.Operation)
		var order []string
		for _, op := range history {
			q := op.Metadata.(fifoMeta).queue
			if _, ok := byQueue[q]; !ok {
				order = append(order, q)
			}
			byQueue[q] = append(byQueue[q], op)
		}
		sort.Strings(order)
		out := make([][]porcupine.Operation, 0, len(order))
		for _, q := range order {
			out = append(out, byQueue[q])
		}
		return out
	},
	Init:  func() any { return "" },
	Step:  fifoStep,
	Equal: func(a, b any) bool { return a.(string) == b.(string) },
	Hash: func(s any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(s.(string)))
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(fifoIn), output.(fifoOut)
		var res string
		switch {
		case out.unknown:
			res = "?"
		case in.kind == KindPop && out.id == "":
			res = "null"
		case in.kind == KindPop:
			res = out.id
		default:
			res = fmt.Sprint(out.count)
		}
		if in.kind == KindPop {
			return "pop() -> " + res
		}
		return fmt.Sprintf("%s(%s) -> %s", in.kind, in.id, res)
	},
	DescribeState: func(state any) string {
		s := strings.TrimSuffix(state.(string), "\x00")
		return "[" + strings.ReplaceAll(s, "\x00", " ") + "]"
	},
	DescribeOperationMetadata: func(m any) string {
		md := m.(fifoMeta)
		return fmt.Sprintf("op #%d on %s", md.index, md.queue)
	},
}

type fifoMeta struct {
	queue string
	index int // Op.Index
}

// FIFOOperations turns the history's operations on sampled queues into
// porcupine operations: adds, pops and cancels that may have run (OK or
// Unknown; a Fail had no effect and is left out). An Unknown call returns
// after every other call of the history.
func FIFOOperations(ops []Op, sampled func(queue string) bool) []porcupine.Operation {
	var last int64
	for _, op := range ops {
		last = max(last, op.Return, op.Invoke)
	}
	var out []porcupine.Operation
	for _, op := range ops {
		if !sampled(op.Queue) || op.Outcome == Fail {
			continue
		}
		switch op.Kind {
		case KindAdd, KindPop, KindCancel:
		default:
			continue
		}
		in := fifoIn{kind: op.Kind, id: op.Job}
		res := fifoOut{unknown: op.Outcome == Unknown, count: op.Count}
		ret := op.Return
		if res.unknown {
			ret = last + 1
		}
		if op.Kind == KindPop {
			in.id, res.id = "", op.Job
		}
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: in, Call: op.Invoke, Output: res,
			Return: ret, Metadata: fifoMeta{queue: op.Queue, index: op.Index}})
	}
	return out
}

// LinResult is the verdict on the sampled queues.
type LinResult struct {
	Result porcupine.CheckResult // Ok, Illegal, or Unknown when the search timed out
	Ops    int                   // operations checked
	info   porcupine.LinearizationInfo
}

// CheckFIFO checks that the sampled queues' operations are linearizable
// against the FIFO model, giving up after timeout (0: no limit) with
// porcupine.Unknown. Exponential in the worst case (concurrent calls of
// one queue); per queue, so keep each sampled queue's clients few.
func CheckFIFO(ops []Op, sampled func(queue string) bool, timeout time.Duration) LinResult {
	pops := FIFOOperations(ops, sampled)
	res, info := porcupine.CheckOperationsVerbose(FIFOModel, pops, timeout)
	return LinResult{Result: res, Ops: len(pops), info: info}
}

// Visualize writes porcupine's HTML view of the check (for an Illegal
// result, the longest linearizations it found and where each got stuck).
func (r LinResult) Visualize(path string) error {
	return porcupine.VisualizePath(FIFOModel, r.info, path)
}
