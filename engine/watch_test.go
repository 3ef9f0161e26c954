package engine

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestWatchVersionMovesOnEveryChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		v := e.Watch(b("q")) // a queue that does not exist yet
		if e.Version(b("q")) != v {
			t.Fatal("version moved with no change")
		}
		steps := []struct {
			name string
			do   func()
		}{
			{"add delayed", func() { add(t, e, "q", 100, "a") }},
			{"fire from the wheel", func() { sleep(100 * time.Millisecond) }},
			{"pop", func() { popPayload(e, "q") }},
			{"add ready", func() { add(t, e, "q", 0, "b") }},
			{"del", func() { e.Del([][]byte{b("q")}) }},
		}
		for _, st := range steps {
			st.do()
			now := e.Version(b("q"))
			if now == v {
				t.Fatalf("%s: version did not move", st.name)
			}
			v = now
		}
		add(t, e, "other", 0, "x")
		popPayload(e, "other")
		if e.Version(b("q")) != v {
			t.Fatal("a change to another queue moved q's version")
		}
		e.Unwatch(b("q"))
		if e.watches.Len() != 0 {
			t.Fatalf("registry keeps %d names after the last Unwatch", e.watches.Len())
		}
	})
}

func TestWatchSeesAJobFiringBeforeVersionIsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		add(t, e, "q", 50, "a")
		v := e.Watch(b("q"))
		// The clock passes the due time, and Version is asked before the
		// timer goroutine had a chance to run: the job is due, so it counts.
		time.Sleep(60 * time.Millisecond)
		if e.Version(b("q")) == v {
			t.Fatal("a job due by now did not count as a change")
		}
	})
}

func TestTrackCallsTheHookOncePerRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		var got []string
		e.SetOnChange(func(name string) { got = append(got, name) })
		e.Track(b("q")) // read while absent: creating it is a change
		add(t, e, "q", 0, "a")
		add(t, e, "q", 0, "b")
		if len(got) != 1 || got[0] != "q" {
			t.Fatalf("hook calls %q, want one for q", got)
		}
		e.Track(b("q"))
		popPayload(e, "q")
		popPayload(e, "q")
		if len(got) != 2 {
			t.Fatalf("hook calls %q, want two", got)
		}
		if e.watches.Len() != 0 {
			t.Fatalf("registry keeps %d names after the tracked change", e.watches.Len())
		}
		if e.queues != nil && len(e.byName) != 0 {
			t.Fatal("an empty queue was kept")
		}
	})
}

func TestTrackAllCallsTheHookForEveryQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		var got []string
		e.SetOnChange(func(name string) { got = append(got, name) })
		add(t, e, "unread", 0, "a")
		if len(got) != 0 {
			t.Fatalf("hook called for a queue nobody tracks: %v", got)
		}
		e.TrackAll(true)
		add(t, e, "unread", 50, "b")
		sleep(50 * time.Millisecond) // fires: a change no command made
		popPayload(e, "unread")
		e.TrackAll(false)
		add(t, e, "unread", 0, "c")
		// The add, the firing, the pop: one call each.
		if s := strings.Join(got, " "); s != "unread unread unread" {
			t.Fatalf("hook calls with TrackAll: %q, want one per change (add, firing, pop)", s)
		}
		n := len(got)
		add(t, e, "unread", 0, "d")
		if len(got) != n {
			t.Fatalf("hook called after TrackAll(false): %v", got)
		}
	})
}
