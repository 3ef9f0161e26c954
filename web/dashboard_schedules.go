package web

import (
	"context"
	"net/http"
	"strings"
)

// Recurring schedules: DELAY.SCHEDULES's maps read into rows, shown on a
// queue's page (its own) and on /schedules (every queue's). A reply's
// values are bulk strings, so each field is turned into text or a number
// here; a template given the raw values would print []byte as a list of
// byte values.

type scheduleRow struct {
	Queue, Name string
	Spec, Zone  string // the spec without its TZ, and the zone (UTC for CRON without one)
	Next, Last  int64  // unix ms; -1 when none (never fired, or past its END)
	Fired       int64
	Misfire     string
	Start, End  int64
}

// scheduleRows reads DELAY.SCHEDULES's reply.
func scheduleRows(v any) []scheduleRow {
	var out []scheduleRow
	for _, e := range list(v) {
		var s scheduleRow
		for _, f := range fields(e) {
			switch f.Name {
			case "queue":
				s.Queue = str(f.Value)
			case "name":
				s.Name = str(f.Value)
			case "spec":
				s.Spec, s.Zone = splitZone(str(f.Value))
			case "next":
				s.Next = num(f.Value)
			case "last":
				s.Last = num(f.Value)
			case "fired":
				s.Fired = num(f.Value)
			case "misfire":
				s.Misfire = str(f.Value)
			case "start":
				s.Start = num(f.Value)
			case "end":
				s.End = num(f.Value)
			}
		}
		out = append(out, s)
	}
	return out
}

// splitZone cuts a CRON spec's "TZ zone" off, for its own column: the spec
// reads "CRON 30 2 * * * TZ Europe/Berlin"; a CRON without TZ runs in UTC
// and EVERY in no zone at all.
func splitZone(spec string) (string, string) {
	if i := strings.LastIndex(spec, " TZ "); i >= 0 && strings.HasPrefix(spec, "CRON ") {
		return spec[:i], spec[i+len(" TZ "):]
	}
	if strings.HasPrefix(spec, "CRON ") {
		return spec, "UTC"
	}
	return spec, ""
}

// schedulesShow is the most schedules /schedules lists; the rest are
// counted (DELAY.SCHEDULES lists them all).
const schedulesShow = 500

type schedulesData struct {
	Err   string
	Queue string // the queue asked for, or "" for every queue
	Rows  []scheduleRow
	Total int
	Show  int
}

func (d *dashboard) schedules(ctx context.Context, r *http.Request) (string, any) {
	s := &schedulesData{Queue: r.URL.Query().Get("queue"), Show: schedulesShow}
	args := []string{"DELAY.SCHEDULES"}
	if s.Queue != "" {
		args = append(args, s.Queue)
	}
	v, err := d.do(ctx, args...)
	if err != nil {
		s.Err = err.Error()
		return "Schedules", s
	}
	s.Rows = scheduleRows(v)
	s.Total = len(s.Rows)
	if len(s.Rows) > schedulesShow {
		s.Rows = s.Rows[:schedulesShow]
	}
	return "Schedules", s
}

// schedTableView is what the schedtable template gets: the rows, whether
// to show their queues, the page actions return to, and whether the node
// can run them.
type schedTableView struct {
	Rows      []scheduleRow
	WithQueue bool
	Back      string
	ReadOnly  bool
}

func schedTable(rows []scheduleRow, withQueue bool, back string, readOnly bool) schedTableView {
	return schedTableView{Rows: rows, WithQueue: withQueue, Back: back, ReadOnly: readOnly}
}
