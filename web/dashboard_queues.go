package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The queue list: every queue's name from SCAN, its counts from
// DELAY.STATS, sorted and cut into pages here, so a browser never holds
// more than one page of 10k queues. Sorting by name reads the counts of
// the page's queues only; sorting by a count reads every queue's (about
// 5µs each), so that snapshot is kept for a second and shared by every
// viewer.

const (
	queuesPerPage = 50
	// maxCountSort is the most queues sorted by a count; past it the list
	// sorts by name only (reading a million queues' counts every second
	// would cost the server seconds of work).
	maxCountSort  = 50_000
	queueCacheFor = time.Second
)

type queueRow struct {
	Name                     string
	Delayed, Ready, Reserved int64
	Total, DeadLettered      int64
	Paused, HasPaused        bool
	AddRate, Rate            float64 // adds and deliveries per second
	LatencyMs                int64   // DELAY.STATS latency; -1 when the server does not say
	Err                      string
}

type queueCache struct {
	mu        sync.Mutex
	match     string
	namesAt   time.Time
	names     []string // sorted
	rowsAt    time.Time
	rows      []queueRow // every queue's counts, in names' order
	rowsMatch string
}

type sortCol struct {
	Label, Key, URL, Mark string
}

type queuesData struct {
	Err         string
	Match       string
	Sort, Dir   string
	Page, Pages int
	Total       int64
	First, Last int
	Rows        []queueRow
	Cols        []sortCol
	Prev, Next  string
	Note        string
	PerPage     int
}

var queueSorts = []struct{ key, label string }{
	{"name", "queue"}, {"delayed", "delayed"}, {"ready", "ready"}, {"reserved", "reserved"}, {"total", "total"},
	{"latency", "latency"},
}

func (d *dashboard) queueList(ctx context.Context, r *http.Request) (string, any) {
	qv := r.URL.Query()
	q := &queuesData{Match: qv.Get("match"), Sort: qv.Get("sort"), Dir: qv.Get("dir"), PerPage: queuesPerPage}
	if q.Match == "" {
		q.Match = "*"
	}
	if !slices.ContainsFunc(queueSorts, func(s struct{ key, label string }) bool { return s.key == q.Sort }) {
		q.Sort = "name"
	}
	if q.Dir != "asc" && q.Dir != "desc" {
		q.Dir = "asc"
		if q.Sort != "name" {
			q.Dir = "desc"
		}
	}
	q.Page, _ = strconv.Atoi(qv.Get("page"))
	q.Page = max(q.Page, 1)

	names, err := d.queueNames(ctx, q.Match)
	if err != nil {
		q.Err = err.Error()
		return "Queues", q
	}
	q.Total = int64(len(names))
	if q.Sort != "name" && len(names) > maxCountSort {
		q.Note = "More than " + fmtNum(maxCountSort) + " queues: sorted by name only."
		q.Sort, q.Dir = "name", "asc"
	}
	var rows []queueRow
	if q.Sort == "name" {
		rows = make([]queueRow, len(names))
		for i, n := range names {
			rows[i].Name = n
		}
		if q.Dir == "desc" {
			slices.Reverse(rows)
		}
	} else {
		rows = d.allQueueRows(ctx, q.Match, names)
		key := q.Sort
		slices.SortStableFunc(rows, func(a, b queueRow) int {
			x, y := a.count(key), b.count(key)
			if q.Dir == "desc" {
				x, y = y, x
			}
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return strings.Compare(a.Name, b.Name)
		})
	}
	q.Pages = max(1, (len(rows)+queuesPerPage-1)/queuesPerPage)
	q.Page = min(q.Page, q.Pages)
	lo := (q.Page - 1) * queuesPerPage
	hi := min(lo+queuesPerPage, len(rows))
	q.Rows = slices.Clone(rows[lo:hi])
	q.First, q.Last = lo+1, hi
	// The page's own counts are read now (a sorted snapshot may be a
	// second old; what a row shows should not be).
	now := time.Now()
	for i := range q.Rows {
		d.fillRow(ctx, &q.Rows[i], now)
	}

	link := func(sortKey, dir string, page int) string {
		v := url.Values{}
		if q.Match != "*" {
			v.Set("match", q.Match)
		}
		v.Set("sort", sortKey)
		v.Set("dir", dir)
		if page > 1 {
			v.Set("page", strconv.Itoa(page))
		}
		return "/queues?" + v.Encode()
	}
	for _, s := range queueSorts {
		c := sortCol{Label: s.label, Key: s.key}
		dir := "asc"
		if s.key != "name" {
			dir = "desc"
		}
		if s.key == q.Sort {
			c.Mark = map[string]string{"asc": "▲", "desc": "▼"}[q.Dir]
			dir = map[string]string{"asc": "desc", "desc": "asc"}[q.Dir]
		}
		c.URL = link(s.key, dir, 1)
		q.Cols = append(q.Cols, c)
	}
	if q.Page > 1 {
		q.Prev = link(q.Sort, q.Dir, q.Page-1)
	}
	if q.Page < q.Pages {
		q.Next = link(q.Sort, q.Dir, q.Page+1)
	}
	return "Queues", q
}

func (r queueRow) count(key string) int64 {
	switch key {
	case "delayed":
		return r.Delayed
	case "ready":
		return r.Ready
	case "reserved":
		return r.Reserved
	case "latency":
		return r.LatencyMs
	}
	return r.Total
}

// fillRow reads one queue's DELAY.STATS.
func (d *dashboard) fillRow(ctx context.Context, row *queueRow, now time.Time) {
	v, err := d.do(ctx, "DELAY.STATS", row.Name)
	if err != nil {
		row.Err = err.Error()
		return
	}
	row.Paused, row.HasPaused = false, false
	row.AddRate = -1 // servers before per-queue adds have no counter
	row.LatencyMs = -1
	for _, f := range fields(v) {
		n := num(f.Value)
		switch f.Name {
		case "delayed":
			row.Delayed = n
		case "ready":
			row.Ready = n
		case "reserved":
			row.Reserved = n
		case "dead_lettered":
			row.DeadLettered = n
		case "added":
			row.AddRate = d.rates.observe("added\x00"+row.Name, now, n)
		case "deliveries":
			row.Rate = d.rates.observe("delivered\x00"+row.Name, now, n)
		case "latency":
			row.LatencyMs = n
		case "paused":
			row.HasPaused, row.Paused = true, n == 1
		}
	}
	row.Total = row.Delayed + row.Ready + row.Reserved
}

// queueNames lists the queues matching a pattern, sorted, through SCAN.
func (d *dashboard) queueNames(ctx context.Context, match string) ([]string, error) {
	c := &d.queues
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.match == match && time.Since(c.namesAt) < queueCacheFor {
		return c.names, nil
	}
	seen := map[string]struct{}{}
	var names []string
	cursor := "0"
	for {
		v, err := d.do(ctx, "SCAN", cursor, "MATCH", match, "COUNT", "1000")
		if err != nil {
			return nil, err
		}
		l := list(v)
		if len(l) != 2 {
			break
		}
		for _, n := range list(l[1]) {
			s := str(n)
			if _, dup := seen[s]; !dup {
				seen[s] = struct{}{}
				names = append(names, s)
			}
		}
		cursor = str(l[0])
		if cursor == "0" || cursor == "" {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	slices.Sort(names)
	c.match, c.namesAt, c.names = match, time.Now(), names
	return names, nil
}

// allQueueRows reads every listed queue's counts, for sorting by one.
func (d *dashboard) allQueueRows(ctx context.Context, match string, names []string) []queueRow {
	c := &d.queues
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rowsMatch == match && time.Since(c.rowsAt) < queueCacheFor && len(c.rows) == len(names) {
		return slices.Clone(c.rows)
	}
	rows := make([]queueRow, len(names))
	now := time.Now()
	for i, n := range names {
		rows[i].Name = n
		d.fillRow(ctx, &rows[i], now)
	}
	c.rowsMatch, c.rowsAt, c.rows = match, time.Now(), rows
	return slices.Clone(rows)
}
