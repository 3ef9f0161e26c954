package jobs

import (
	"cmp"

	"github.com/delayd/delayd/topn"
)

// Listing a queue's delayed or reserved jobs by time (DELAY.UPCOMING,
// DELAY.RESERVED), page by page, with a cursor the client already holds,
// as ZRANGEBYSCORE's exclusive bounds do: the time and id of the last job
// of the page before. The listing finds that job and goes on strictly
// after its (time, add order). If it is gone, or its time changed, the
// page starts at the first job of that millisecond instead: jobs of that
// millisecond may come again, none is skipped. So, as SCAN promises, a job
// that stays delayed (reserved) with the same time for the whole listing
// is returned at least once, and exactly once unless a page's last job
// left between pages and others shared its millisecond. Jobs added
// meanwhile after the cursor are listed; jobs made ready, taken or
// cancelled before their page are not.

// Cursor is where a page starts: after the job ID, whose due time (ack
// deadline) was Time.
type Cursor struct {
	Time int64
	ID   []byte
}

// Listing is the jobs of one queue in one state (delayed or reserved: the
// two a timer holds), in the order their timers end: (time, add order).
// The engine finds them by walking the wheel, and falls back on Scan.
type Listing struct {
	T     *Table
	Queue uint32
	State uint8
	// Deadline is a reserved job's ack deadline (the wheel holds it); nil
	// for delayed jobs, whose time is their due time.
	Deadline func(s uint32) int64
}

// Time is the time of the job in slot s: when its timer ends.
func (l *Listing) Time(s uint32) int64 {
	if l.Deadline != nil {
		return l.Deadline(s)
	}
	return l.T.At(s).Due
}

// Mine says whether the job in slot s is one of the listing's.
func (l *Listing) Mine(s uint32) bool {
	j := l.T.At(s)
	return j.Queue == l.Queue && j.State == l.State
}

// Order orders two of the listing's jobs: (time, add order).
func (l *Listing) Order(a, b uint32) int {
	return cmp.Or(cmp.Compare(l.Time(a), l.Time(b)), cmp.Compare(l.T.At(a).Seq, l.T.At(b).Seq))
}

// After returns the test of one of the listing's jobs coming after c:
// strictly after the cursor's job in (time, add order) if it is still
// there in that state with that time, else at or after its time. run is
// the queue's push run, for finding the job by id.
func (l *Listing) After(run *PushRun, c *Cursor) func(s uint32) bool {
	if s, ok := l.T.Lookup(run, l.Queue, c.ID); ok && l.T.At(s).State == l.State && l.Time(s) == c.Time {
		seq := l.T.At(s).Seq
		return func(s uint32) bool {
			t := l.Time(s)
			return t > c.Time || t == c.Time && l.T.At(s).Seq > seq
		}
	}
	return func(s uint32) bool { return l.Time(s) >= c.Time }
}

// Scan returns the first n of the listing's jobs that admit accepts (nil:
// all), in order, reading the slab in order and stopping after of jobs of
// the listing (how many it holds). O(slots) and no sort: a bounded heap.
func (l *Listing) Scan(n, of int, admit func(s uint32) bool) []uint32 {
	top := topn.New(n, of, func(a, b uint32) bool { return l.Order(a, b) < 0 })
	seen := 0
	for s := range l.T.Len() {
		if !l.Mine(s) {
			continue
		}
		if admit == nil || admit(s) {
			top.Offer(s)
		}
		if seen++; seen == of {
			break
		}
	}
	return top.Sorted()
}
