package queue

import "testing"

func TestWatchesDropAnEntryNobodyHolds(t *testing.T) {
	var ws Watches
	w, made := ws.For([]byte("q"))
	if !made {
		t.Fatal("first For did not make the entry")
	}
	v := w.Hold()
	if tell, dropped := ws.Changed("q", w); tell || dropped {
		t.Fatalf("a held, untracked change: tell %v dropped %v", tell, dropped)
	}
	if w.Version == v {
		t.Fatal("version did not move")
	}
	if !ws.Release([]byte("q")) || ws.Len() != 0 {
		t.Fatal("the last Release kept the entry")
	}
}

func TestWatchesTellATrackedChangeOnce(t *testing.T) {
	var ws Watches
	w, _ := ws.For([]byte("q"))
	w.Track()
	if tell, dropped := ws.Changed("q", w); !tell || !dropped {
		t.Fatalf("tracked change: tell %v dropped %v, want both", tell, dropped)
	}
	if ws.Lookup("q") != nil {
		t.Fatal("entry kept after its tracked change")
	}
}

func TestWatchesTrackAllCounts(t *testing.T) {
	var ws Watches
	ws.TrackAll(true)
	ws.TrackAll(true)
	ws.TrackAll(false)
	if !ws.All {
		t.Fatal("one TrackAll(false) undid two TrackAll(true)")
	}
	if tell, _ := ws.Changed("x", nil); !tell {
		t.Fatal("a change with no entry while All is not told")
	}
	ws.TrackAll(false)
	ws.TrackAll(false)
	if ws.All {
		t.Fatal("All still set")
	}
}

func TestWatchesChangedAll(t *testing.T) {
	var ws Watches
	a, _ := ws.For([]byte("a"))
	a.Track()
	b, _ := ws.For([]byte("b"))
	b.Hold()
	tell, dropped := ws.ChangedAll()
	if len(tell) != 1 || tell[0] != "a" || len(dropped) != 1 || dropped[0] != "a" {
		t.Fatalf("tell %q dropped %q, want [a] [a]", tell, dropped)
	}
	if b.Version != 1 || ws.Len() != 1 {
		t.Fatalf("b version %d, entries %d", b.Version, ws.Len())
	}
}
