package schedule

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// schedFires lists the first n fire times after from, as RFC 3339 in loc
// (so a reader sees the offset each was taken with).
func schedFires(t *testing.T, s *Spec, from time.Time, anchor int64, n int, loc *time.Location) []string {
	t.Helper()
	var out []string
	at := from.UnixMilli()
	for range n {
		next, ok := s.Next(at, anchor)
		if !ok {
			out = append(out, "never")
			break
		}
		if next <= at {
			t.Fatalf("Next(%d) = %d: not after", at, next)
		}
		out = append(out, time.UnixMilli(next).In(loc).Format("2006-01-02T15:04:05.000Z07:00"))
		at = next
	}
	return out
}

func TestScheduleCronTable(t *testing.T) {
	utc := time.UTC
	ber := mustZone(t, "Europe/Berlin")
	ny := mustZone(t, "America/New_York")
	cases := []struct {
		name string
		expr string
		zone string
		loc  *time.Location
		from time.Time
		want []string
	}{
		{"hourly", "0 * * * *", "", utc, time.Date(2025, 1, 1, 0, 30, 0, 0, utc),
			[]string{"2025-01-01T01:00:00.000Z", "2025-01-01T02:00:00.000Z", "2025-01-01T03:00:00.000Z"}},
		{"hourly descriptor from a whole hour", "@hourly", "", utc, time.Date(2025, 1, 1, 1, 0, 0, 0, utc),
			[]string{"2025-01-01T02:00:00.000Z", "2025-01-01T03:00:00.000Z"}},
		{"seconds field", "*/20 * * * * *", "", utc, time.Date(2025, 1, 1, 0, 0, 0, 500e6, utc),
			[]string{"2025-01-01T00:00:20.000Z", "2025-01-01T00:00:40.000Z", "2025-01-01T00:01:00.000Z"}},
		// Day 31 fires only in months that have one, as cron does.
		{"day 31 skips short months", "0 0 31 * *", "", utc, time.Date(2025, 1, 31, 12, 0, 0, 0, utc),
			[]string{"2025-03-31T00:00:00.000Z", "2025-05-31T00:00:00.000Z", "2025-07-31T00:00:00.000Z", "2025-08-31T00:00:00.000Z"}},
		{"day 30 skips February", "0 0 30 * *", "", utc, time.Date(2025, 1, 30, 12, 0, 0, 0, utc),
			[]string{"2025-03-30T00:00:00.000Z", "2025-04-30T00:00:00.000Z"}},
		{"last days of month, 28-31 with a weekday", "0 12 28-31 2 *", "", utc, time.Date(2024, 2, 1, 0, 0, 0, 0, utc),
			[]string{"2024-02-28T12:00:00.000Z", "2024-02-29T12:00:00.000Z", "2025-02-28T12:00:00.000Z"}},
		{"29 February", "0 0 29 2 *", "", utc, time.Date(2025, 1, 1, 0, 0, 0, 0, utc),
			[]string{"2028-02-29T00:00:00.000Z", "2032-02-29T00:00:00.000Z"}},
		// 2100 is not a leap year: eight years between two 29 Februaries,
		// more than the library's five-year look-ahead.
		{"29 February across 2100", "0 0 29 2 *", "", utc, time.Date(2096, 3, 1, 0, 0, 0, 0, utc),
			[]string{"2104-02-29T00:00:00.000Z"}},
		{"30 February never", "0 0 30 2 *", "", utc, time.Date(2025, 1, 1, 0, 0, 0, 0, utc),
			[]string{"never"}},

		// Europe/Berlin: 2024-03-31 02:00 CET -> 03:00 CEST (gap);
		// 2024-10-27 03:00 CEST -> 02:00 CET (02:00-03:00 twice).
		{"Berlin gap, fixed: at the end of the gap", "30 2 * * *", "Europe/Berlin", ber, time.Date(2024, 3, 30, 12, 0, 0, 0, ber),
			[]string{"2024-03-31T03:00:00.000+02:00", "2024-04-01T02:30:00.000+02:00"}},
		{"Berlin gap, fixed, several times collapse", "0,15,30,45 2 * * *", "Europe/Berlin", ber, time.Date(2024, 3, 31, 1, 50, 0, 0, ber),
			[]string{"2024-03-31T03:00:00.000+02:00", "2024-04-01T02:00:00.000+02:00"}},
		{"Berlin gap, fixed, gap and 03:00 are one firing", "0 2,3 * * *", "Europe/Berlin", ber, time.Date(2024, 3, 31, 0, 0, 0, 0, ber),
			[]string{"2024-03-31T03:00:00.000+02:00", "2024-04-01T02:00:00.000+02:00", "2024-04-01T03:00:00.000+02:00"}},
		{"Berlin gap, wildcard: skipped hour does not fire", "0 * * * *", "Europe/Berlin", ber, time.Date(2024, 3, 31, 0, 30, 0, 0, ber),
			[]string{"2024-03-31T01:00:00.000+01:00", "2024-03-31T03:00:00.000+02:00", "2024-03-31T04:00:00.000+02:00"}},
		{"Berlin overlap, fixed: first occurrence only", "30 2 * * *", "Europe/Berlin", ber, time.Date(2024, 10, 26, 12, 0, 0, 0, ber),
			[]string{"2024-10-27T02:30:00.000+02:00", "2024-10-28T02:30:00.000+01:00"}},
		{"Berlin overlap, wildcard: both occurrences", "0 * * * *", "Europe/Berlin", ber, time.Date(2024, 10, 27, 0, 30, 0, 0, ber),
			[]string{"2024-10-27T01:00:00.000+02:00", "2024-10-27T02:00:00.000+02:00", "2024-10-27T02:00:00.000+01:00", "2024-10-27T03:00:00.000+01:00"}},
		{"Berlin daily midnight across the change", "@daily", "Europe/Berlin", ber, time.Date(2024, 10, 26, 12, 0, 0, 0, ber),
			[]string{"2024-10-27T00:00:00.000+02:00", "2024-10-28T00:00:00.000+01:00"}},

		// America/New_York: 2024-03-10 02:00 EST -> 03:00 EDT;
		// 2024-11-03 02:00 EDT -> 01:00 EST (01:00-02:00 twice).
		{"New York gap, fixed", "30 2 * * *", "America/New_York", ny, time.Date(2024, 3, 9, 12, 0, 0, 0, ny),
			[]string{"2024-03-10T03:00:00.000-04:00", "2024-03-11T02:30:00.000-04:00"}},
		{"New York gap, wildcard every 30 min", "*/30 * * * *", "America/New_York", ny, time.Date(2024, 3, 10, 1, 10, 0, 0, ny),
			[]string{"2024-03-10T01:30:00.000-05:00", "2024-03-10T03:00:00.000-04:00", "2024-03-10T03:30:00.000-04:00"}},
		{"New York overlap, fixed", "30 1 * * *", "America/New_York", ny, time.Date(2024, 11, 2, 12, 0, 0, 0, ny),
			[]string{"2024-11-03T01:30:00.000-04:00", "2024-11-04T01:30:00.000-05:00"}},
		{"New York overlap, wildcard every 30 min", "*/30 * * * *", "America/New_York", ny, time.Date(2024, 11, 3, 0, 10, 0, 0, ny),
			[]string{"2024-11-03T00:30:00.000-04:00", "2024-11-03T01:00:00.000-04:00", "2024-11-03T01:30:00.000-04:00",
				"2024-11-03T01:00:00.000-05:00", "2024-11-03T01:30:00.000-05:00", "2024-11-03T02:00:00.000-05:00"}},
		// Created during the second pass of the overlap: 01:30's first
		// occurrence has passed, so the fixed time waits for tomorrow.
		{"New York overlap, fixed, from the second pass", "30 1 * * *", "America/New_York", ny, time.Date(2024, 11, 3, 5, 45, 0, 0, time.UTC),
			[]string{"2024-11-04T01:30:00.000-05:00"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Cron(c.expr, c.zone)
			if err != nil {
				t.Fatal(err)
			}
			got := schedFires(t, s, c.from, 0, len(c.want), c.loc)
			if !slices.Equal(got, c.want) {
				t.Errorf("%q in %q after %v:\n got %q\nwant %q", c.expr, c.zone, c.from, got, c.want)
			}
		})
	}
}

func TestScheduleEvery(t *testing.T) {
	anchor := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for _, c := range []struct {
		expr   string
		period int64
	}{{"@every 1500ms", 1500}, {"@every 1s", 1000}, {"@every 1h30m", 5_400_000}, {"@every 1ms", 1}} {
		s, err := Cron(c.expr, "")
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if s.Period() != c.period {
			t.Fatalf("%s: period %d, want %d", c.expr, s.Period(), c.period)
		}
	}
	s, _ := ParseEvery("1500")
	for _, c := range []struct{ after, want int64 }{
		{anchor, anchor + 1500},
		{anchor + 1499, anchor + 1500},
		{anchor + 1500, anchor + 3000},
		{anchor - 1, anchor}, // a START in the future fires at START
		{anchor - 1500, anchor},
		{anchor - 1501, anchor - 1500},
	} {
		if got, ok := s.Next(c.after, anchor); !ok || got != c.want {
			t.Errorf("EVERY 1500 anchored at %d, after %d: %d, want %d", anchor, c.after, got, c.want)
		}
	}
}

func TestScheduleBadInput(t *testing.T) {
	for _, c := range []struct{ expr, zone, mention string }{
		{"61 * * * *", "", "invalid cron expression"},
		{"* * *", "", "5 fields"},
		{"* * * * * * *", "", "5 fields"},
		{"0 * * * *", "Mars/Olympus_Mons", "unknown time zone"},
		{"0 * * * *", "Local", "unknown time zone"},
		{"TZ=UTC 0 * * * *", "", "TZ option"},
		{"TZ=UTC", "", "TZ option"},
		{"@every 1500us", "", "whole number of milliseconds"},
		{"@every 0s", "", "at least 1 ms"},
		{"@every soon", "", "@every"},
		{"@every 1s", "Europe/Berlin", "TZ"},
		{"@fortnightly", "", "invalid cron expression"},
		{"", "", "5 fields"},
	} {
		_, err := Cron(c.expr, c.zone)
		if err == nil || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("Cron(%q, %q): %v, want an error mentioning %q", c.expr, c.zone, err, c.mention)
		}
	}
	for _, bad := range []string{"0", "-5", "1.5", "x"} {
		if _, err := ParseEvery(bad); err == nil {
			t.Errorf("EVERY %s accepted", bad)
		}
	}
}

// TestScheduleAgainstBruteForce checks the DST rules minute by minute over
// the change days of both zones: a wildcard expression fires at each instant
// whose wall-clock time matches; a fixed one once per matching wall-clock
// time, at its first instant, and a time in a gap at the gap's end.
func TestScheduleAgainstBruteForce(t *testing.T) {
	days := []struct {
		zone string
		day  time.Time // UTC midnight; two days from there are checked
	}{
		{"Europe/Berlin", time.Date(2024, 3, 30, 12, 0, 0, 0, time.UTC)},
		{"Europe/Berlin", time.Date(2024, 10, 26, 12, 0, 0, 0, time.UTC)},
		{"America/New_York", time.Date(2024, 3, 9, 18, 0, 0, 0, time.UTC)},
		{"America/New_York", time.Date(2024, 11, 2, 18, 0, 0, 0, time.UTC)},
	}
	exprs := []string{"0 * * * *", "*/15 * * * *", "30 2 * * *", "0,30 1,2 * * *", "45 * * * *", "0 3 * * *", "* 2 * * *", "59 1 * * *"}
	for _, d := range days {
		loc := mustZone(t, d.zone)
		for _, expr := range exprs {
			s, err := Cron(expr, d.zone)
			if err != nil {
				t.Fatal(err)
			}
			matches := func(w time.Time) bool { n := s.cronNext(w.Add(-time.Second)); return n.Equal(w) }
			var want []int64
			end := d.day.Add(48 * time.Hour)
			if s.wild {
				for i := d.day.Add(time.Minute); i.Before(end); i = i.Add(time.Minute) {
					_, off := i.In(loc).Zone()
					if matches(wall(i, off)) {
						want = append(want, i.UnixMilli())
					}
				}
			} else {
				// Every wall-clock minute of the span, in order, mapped to
				// its first instant, or to the end of the gap it falls in.
				_, off0 := d.day.In(loc).Zone()
				seen := map[int64]bool{}
				for w := wall(d.day, off0); w.Before(wall(end, off0)); w = w.Add(time.Minute) {
					if !matches(w) {
						continue
					}
					var first time.Time
					for i := w.Add(-15 * time.Hour); i.Before(w.Add(15 * time.Hour)); i = i.Add(time.Minute) {
						if _, off := i.In(loc).Zone(); wall(i, off).Equal(w) {
							first = i
							break
						}
					}
					if first.IsZero() { // a gap: the first instant reading later than w
						for i := w.Add(-15 * time.Hour); ; i = i.Add(time.Minute) {
							if _, off := i.In(loc).Zone(); wall(i, off).After(w) {
								first = i
								break
							}
						}
					}
					if ms := first.UnixMilli(); !seen[ms] && first.After(d.day) {
						seen[ms] = true
						want = append(want, ms)
					}
				}
			}
			var got []int64
			for at := d.day.UnixMilli(); ; {
				n, ok := s.Next(at, 0)
				if !ok || n >= end.UnixMilli() {
					break
				}
				got = append(got, n)
				at = n
			}
			if !slices.Equal(got, want) {
				t.Errorf("%q in %s from %v:\n got %v\nwant %v", expr, d.zone, d.day, fmtMs(got, loc), fmtMs(want, loc))
			}
		}
	}
}

func fmtMs(ms []int64, loc *time.Location) []string {
	var out []string
	for _, m := range ms {
		out = append(out, time.UnixMilli(m).In(loc).Format("01-02 15:04 MST"))
	}
	return out
}
