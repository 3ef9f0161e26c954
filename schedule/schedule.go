// Package schedule owns recurring schedules: their spec (a cron expression
// with its time zone, or a fixed period), their table (Table: each
// schedule's state as its record carries it, by (queue, name) and by timer
// ref), and when they fire: the next fire time after an instant, and which
// missed firings a MISFIRE policy owes when a schedule is armed (table.go).
// It is a leaf: it imports nothing from the project and starts no
// goroutine. It decides and returns; the engine, which holds one Table
// under its lock, logs the records, sets the timers and adds the jobs.
//
// Cron expressions are parsed by github.com/robfig/cron/v3 (five fields, or
// six with a leading seconds field; descriptors such as @hourly). The
// library is asked only about wall-clock times in UTC, where no clock ever
// jumps; this package maps wall-clock times to instants in the schedule's
// zone itself, the way Vixie cron treats daylight saving changes:
//
//   - A "wildcard" expression (its minute or its hour field begins with '*',
//     as @hourly's does) fires at every instant whose local wall-clock time
//     matches. A wall-clock time skipped by a spring-forward gap does not
//     exist, so it does not fire; one repeated by a fall-back overlap happens
//     twice, so it fires twice (an hourly schedule stays hourly).
//   - A "fixed" expression (minute and hour both fixed, as in "30 2 * * *")
//     fires once per matching wall-clock time: a time repeated by an overlap
//     fires at its first occurrence only, and a time skipped by a gap fires
//     once at the first instant after the gap (the transition itself); all
//     the times of one schedule inside one gap make that one firing.
//
// EVERY ms (and @every with a Go duration, sub-second ones included) is a
// fixed period in real time, anchored at a given instant, untouched by zones.
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	// The tz database, embedded: a bare machine (a scratch container)
	// knows every zone TZ names.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// The parser: standard five fields, an optional leading seconds field, and
// the @ descriptors. Its TZ= prefix is refused: the zone is the TZ option.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom |
	cron.Month | cron.Dow | cron.Descriptor)

// descriptors are the @ names as the parser expands them (seconds first),
// so that Parse can tell a wildcard expression from a fixed one.
var descriptors = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
}

// Spec is a parsed schedule. The zero value is not usable.
type Spec struct {
	cron  *cron.SpecSchedule // nil for a fixed period
	wild  bool
	loc   *time.Location
	every int64 // ms, for a fixed period
}

// ErrNever is the error of an expression that matches no time (30 February).
var ErrNever = errors.New("the cron expression matches no time")

// Cron parses a cron expression for the zone named zone ("" is UTC). An
// expression "@every <duration>" is a fixed period (see Every).
func Cron(expr, zone string) (*Spec, error) {
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, errors.New("a time zone inside the expression is not supported: use the TZ option")
	}
	if rest, ok := strings.CutPrefix(expr, "@every"); ok {
		if zone != "" {
			return nil, errors.New("TZ makes no sense with @every, a fixed period")
		}
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("@every: %v", err)
		}
		if d%time.Millisecond != 0 {
			return nil, errors.New("@every: the period must be a whole number of milliseconds")
		}
		return Every(d.Milliseconds())
	}
	loc := time.UTC
	if zone != "" {
		var err error
		if loc, err = time.LoadLocation(zone); err != nil || zone == "Local" {
			return nil, fmt.Errorf("unknown time zone %q", zone)
		}
	}
	fields := strings.Fields(expr)
	if d, ok := descriptors[strings.ToLower(expr)]; ok {
		fields = strings.Fields(d)
	}
	if len(fields) != 5 && len(fields) != 6 && !strings.HasPrefix(expr, "@") {
		return nil, fmt.Errorf("a cron expression has 5 fields (or 6 with seconds first), not %d", len(fields))
	}
	s, err := parse(expr)
	if err != nil {
		return nil, err
	}
	sc, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("unsupported cron expression %q", expr)
	}
	sc.Location = time.UTC // the library sees wall-clock times only
	if len(fields) == 5 {
		fields = append([]string{"0"}, fields...)
	}
	sp := &Spec{cron: sc, loc: loc, wild: strings.HasPrefix(fields[1], "*") || strings.HasPrefix(fields[2], "*")}
	return sp, nil
}

// parse calls the library, turning a panic on odd input into an error.
func parse(expr string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid cron expression %q", expr)
		}
	}()
	s, err = parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("invalid cron expression %q: %v", expr, err)
	}
	return s, nil
}

// Every is a fixed period of ms milliseconds (at least 1).
func Every(ms int64) (*Spec, error) {
	if ms < 1 {
		return nil, errors.New("the period must be at least 1 ms")
	}
	return &Spec{every: ms}, nil
}

// Period is the fixed period in ms, or 0 for a cron expression.
func (s *Spec) Period() int64 { return s.every }

// Next returns the first fire time (unix ms) strictly after after; ok is
// false when there is none (an expression that matches nothing within a
// century). anchor is where a
// fixed period's firings are counted from: they fall on anchor + k*period
// (k any integer); a cron expression ignores it.
func (s *Spec) Next(after, anchor int64) (int64, bool) {
	if s.every > 0 {
		d := after - anchor
		k := d / s.every
		if d >= 0 || d%s.every == 0 {
			k++ // the first multiple strictly after after
		}
		return anchor + k*s.every, true
	}
	t := time.UnixMilli(after)
	var n time.Time
	if s.wild {
		n = s.nextWild(t)
	} else {
		n = s.nextFixed(t)
	}
	if n.IsZero() {
		return 0, false
	}
	return n.UnixMilli(), true
}

// wall is t's local wall-clock time in its zone, as a UTC time.
func wall(t time.Time, off int) time.Time {
	return time.Unix(t.Unix()+int64(off), int64(t.Nanosecond())).UTC()
}

// maxSteps bounds the searches: zone periods crossed (about two a year) by
// a wildcard search, wall-clock candidates tried by a fixed one.
const maxSteps = 4000

// nextWild is the first instant after t whose wall-clock time matches. Within
// one zone period (ZoneBounds) the offset is constant, so wall-clock time is
// instant plus offset; a period without a match hands over to the next one.
func (s *Spec) nextWild(t time.Time) time.Time {
	at := t.In(s.loc) // an instant in the zone period searched
	from := t         // search strictly after this instant
	for range maxSteps {
		_, off := at.Zone()
		_, end := at.ZoneBounds()
		w := s.cronNext(wall(from, off))
		if w.IsZero() {
			return time.Time{}
		}
		inst := time.Unix(w.Unix()-int64(off), 0)
		if end.IsZero() || inst.Before(end) {
			return inst
		}
		at, from = end.In(s.loc), end.Add(-time.Nanosecond)
	}
	return time.Time{}
}

// nextFixed is the first occurrence, after t, of the next matching wall-clock
// times: each fires once, at its first instant (see the package doc).
func (s *Spec) nextFixed(t time.Time) time.Time {
	lt := t.In(s.loc)
	_, off := lt.Zone()
	w := wall(t, off)
	for range maxSteps {
		w = s.cronNext(w)
		if w.IsZero() {
			return time.Time{}
		}
		if inst := s.firstInstant(w); inst.After(t) {
			return inst
		}
	}
	return time.Time{}
}

// cronNext asks the library for the next matching wall-clock time after w.
// It looks five years ahead; 29 February needs eight around 2100, so a
// miss is asked again from five years on, up to a century.
func (s *Spec) cronNext(w time.Time) time.Time {
	for range 20 {
		if n := s.cron.Next(w); !n.IsZero() {
			return n
		}
		w = w.AddDate(5, 0, 0)
	}
	return time.Time{}
}

// firstInstant is the earliest instant whose wall-clock time in s.loc is w
// (given as UTC), or, when w falls in a gap, the instant the gap ends.
func (s *Spec) firstInstant(w time.Time) time.Time {
	c := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, s.loc)
	_, off := c.Zone()
	cw := wall(c, off)
	if !cw.Equal(w) {
		// In a gap: c is read with the offset of one side of it. The gap
		// ends where the later offset begins.
		start, end := c.ZoneBounds()
		if cw.After(w) {
			return start
		}
		return end
	}
	// In an overlap the same wall-clock time was read first with the
	// previous period's offset.
	start, _ := c.ZoneBounds()
	if !start.IsZero() {
		_, poff := start.Add(-time.Nanosecond).Zone()
		if e := time.Unix(w.Unix()-int64(poff), 0); e.Before(start) && wall(e, poff).Equal(w) {
			return e
		}
	}
	return c
}

// ParseEvery reads EVERY's argument: a whole number of milliseconds, at
// least 1.
func ParseEvery(s string) (*Spec, error) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < 1 {
		return nil, errors.New("EVERY takes a whole number of milliseconds, at least 1")
	}
	return Every(ms)
}
