package web

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Reading replies: the dashboard sees the server only through command
// replies (Server.Do), so it needs their Go values as strings, numbers and
// field maps, INFO and CLIENT LIST parsed, and counters turned into rates.

// str is a reply value as text: bulk, status, verbatim or integer.
func str(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case string:
		return x
	case Status:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return ""
	}
	return ""
}

// num is a reply value as an integer (0 when it is not one).
func num(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case []byte, string, Status:
		n, _ := strconv.ParseInt(strings.TrimSpace(str(x)), 10, 64)
		return n
	}
	return 0
}

// field is one field of a map reply, in the order sent.
type field struct {
	Name  string
	Value any
}

// fields reads a map reply (RESP3) or a flat field/value array (RESP2).
func fields(v any) []field {
	var flat []any
	switch x := v.(type) {
	case Map:
		flat = x
	case []any:
		flat = x
	default:
		return nil
	}
	out := make([]field, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		out = append(out, field{Name: str(flat[i]), Value: flat[i+1]})
	}
	return out
}

// fieldMap is fields as a map, for lookups by name.
func fieldMap(v any) map[string]any {
	m := map[string]any{}
	for _, f := range fields(v) {
		m[f.Name] = f.Value
	}
	return m
}

// infoText is INFO's reply parsed: section (lower case) -> field -> value.
type infoText map[string]map[string]string

func parseInfo(v any) infoText {
	out := infoText{}
	sec := ""
	for line := range strings.SplitSeq(str(v), "\n") {
		line = strings.TrimRight(line, "\r")
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			sec = strings.ToLower(strings.TrimSpace(rest))
			out[sec] = map[string]string{}
			continue
		}
		k, val, ok := strings.Cut(line, ":")
		if !ok || sec == "" {
			continue
		}
		out[sec][k] = val
	}
	return out
}

// int is one INFO field as an integer (0 when absent).
func (in infoText) int(sec, key string) int64 {
	n, _ := strconv.ParseInt(in[sec][key], 10, 64)
	return n
}

// clientLine is one line of CLIENT LIST.
type clientLine map[string]string

func parseClients(v any) []clientLine {
	var out []clientLine
	for line := range strings.SplitSeq(str(v), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		c := clientLine{}
		for kv := range strings.SplitSeq(line, " ") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				c[k] = val
			}
		}
		out = append(out, c)
	}
	return out
}

// histogram is INFO lateness: cumulative le_<ms> buckets, le_inf, count
// and sum_ms, as Prometheus keeps a histogram.
type histogram struct {
	Count, SumMs int64
	Buckets      []bucket
	P50, P99     string
}

type bucket struct {
	Label string
	Count int64 // in this bucket alone
	Max   int64 // the largest bucket's count, the bars' scale
}

// parseLateness reads the lateness section; nil when the server has none.
func parseLateness(sec map[string]string) *histogram {
	if sec == nil {
		return nil
	}
	type edge struct {
		le  float64
		cum int64
		inf bool
	}
	var edges []edge
	h := &histogram{}
	for k, v := range sec {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch {
		case k == "count":
			h.Count = n
		case k == "sum_ms":
			h.SumMs = n
		case k == "le_inf":
			edges = append(edges, edge{cum: n, inf: true})
		case strings.HasPrefix(k, "le_"):
			le, err := strconv.ParseFloat(strings.TrimPrefix(k, "le_"), 64)
			if err == nil {
				edges = append(edges, edge{le: le, cum: n})
			}
		}
	}
	if len(edges) == 0 {
		return nil
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].inf != edges[j].inf {
			return !edges[i].inf
		}
		return edges[i].le < edges[j].le
	})
	var prev, most int64
	for i, e := range edges {
		b := bucket{Count: max(0, e.cum-prev)}
		switch {
		case e.inf && i > 0:
			b.Label = "> " + fmtLe(edges[i-1].le)
		case e.inf:
			b.Label = "any"
		default:
			b.Label = "≤ " + fmtLe(e.le)
		}
		prev = e.cum
		most = max(most, b.Count)
		h.Buckets = append(h.Buckets, b)
	}
	for i := range h.Buckets {
		h.Buckets[i].Max = max(most, 1)
	}
	total := h.Count
	if total == 0 {
		total = edges[len(edges)-1].cum
	}
	quantile := func(q float64) string {
		if total == 0 {
			return "—"
		}
		for _, e := range edges {
			if float64(e.cum) >= q*float64(total) {
				if e.inf {
					return "> " + fmtLe(edges[max(0, len(edges)-2)].le)
				}
				return "≤ " + fmtLe(e.le)
			}
		}
		return "—"
	}
	h.P50, h.P99 = quantile(0.5), quantile(0.99)
	return h
}

// fmtLe is a bucket bound in ms, with its unit.
func fmtLe(ms float64) string {
	if ms == float64(int64(ms)) {
		return fmtMs(int64(ms))
	}
	return strconv.FormatFloat(ms, 'f', -1, 64) + "ms"
}

// rateBook turns counters read at successive requests into per-second
// rates. The server keeps no history of its own: the dashboard samples
// counters when a page (or a live update) reads them and divides the change
// by the time between two samples about a second apart.
type rateBook struct {
	mu        sync.Mutex
	series    map[string][]sample
	lastPrune time.Time
}

type sample struct {
	t time.Time
	v int64
}

const (
	rateSpan = time.Second      // the interval a rate is measured over, at least
	rateKeep = 10 * time.Second // samples older than this are dropped
)

// observe records a counter's value and returns its rate per second, or -1
// while there is no earlier sample to compare with.
func (rb *rateBook) observe(name string, now time.Time, v int64) float64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.series == nil {
		rb.series = map[string][]sample{}
	}
	if now.Sub(rb.lastPrune) > rateKeep {
		rb.lastPrune = now
		for k, s := range rb.series {
			if now.Sub(s[len(s)-1].t) > rateKeep {
				delete(rb.series, k)
			}
		}
	}
	s := rb.series[name]
	if n := len(s); n > 0 && v < s[n-1].v {
		s = nil // the counter went back: a restart
	}
	// Keep the newest sample at least rateSpan old as the base of the rate
	// and those after it; older ones no longer matter.
	i := 0
	for i+1 < len(s) && now.Sub(s[i+1].t) >= rateSpan {
		i++
	}
	s = s[i:]
	rate := -1.0
	if len(s) > 0 {
		if dt := now.Sub(s[0].t); dt >= 200*time.Millisecond {
			rate = float64(v-s[0].v) / dt.Seconds()
		}
	}
	// Samples closer than 100ms add nothing to the next rate.
	if n := len(s); n == 0 || now.Sub(s[n-1].t) >= 100*time.Millisecond {
		s = append(s, sample{now, v})
	}
	rb.series[name] = s
	return rate
}
