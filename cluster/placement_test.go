package cluster

import "testing"

func TestLeaderMove(t *testing.T) {
	all := func(procs ...string) []Taker {
		var ts []Taker
		for _, p := range procs {
			ts = append(ts, Taker{Proc: p, ID: p + "-id"})
		}
		return ts
	}
	for _, tc := range []struct {
		name   string
		groups []PlacedGroup
		group  int
		to     string // "" no move
	}{
		{"the bootstrap node leads all three", []PlacedGroup{
			{"a", all("b", "c")}, {"a", all("b", "c")}, {"a", all("b", "c")},
		}, 0, "b"},
		{"one moved, the next to the node leading none", []PlacedGroup{
			{"b", nil}, {"a", all("b", "c")}, {"a", all("b", "c")},
		}, 1, "c"},
		{"balanced: nothing moves", []PlacedGroup{
			{"a", all("b", "c")}, {"b", nil}, {"c", nil},
		}, 0, ""},
		{"a gap of one is left alone (4 groups, 3 nodes)", []PlacedGroup{
			{"a", all("b", "c")}, {"a", all("b", "c")}, {"b", nil}, {"c", nil},
		}, 0, ""},
		{"2-2-0: the empty node gets one", []PlacedGroup{
			{"a", all("b", "c")}, {"a", all("b", "c")}, {"b", nil}, {"b", nil},
		}, 0, "c"},
		{"the node that returned is not caught up yet", []PlacedGroup{
			{"a", all("b")}, {"a", all("b")}, {"b", nil},
		}, 0, ""},
		{"a group without a leader: counts unknown", []PlacedGroup{
			{"a", all("b", "c")}, {"a", all("b", "c")}, {"", nil},
		}, 0, ""},
		{"only groups with a taker move", []PlacedGroup{
			{"a", nil}, {"a", all("c")}, {"b", nil},
		}, 1, "c"},
		{"another process's surplus is its own to hand", []PlacedGroup{
			{"b", all("a")}, {"b", all("a")}, {"c", nil},
		}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, to, ok := LeaderMove("a", tc.groups)
			if tc.to == "" {
				if ok {
					t.Fatalf("moved group %d to %v; want no move", g, to)
				}
				return
			}
			if !ok || g != tc.group || to.Proc != tc.to || to.ID != tc.to+"-id" {
				t.Fatalf("move %d to %v (%v); want group %d to %s", g, to, ok, tc.group, tc.to)
			}
		})
	}
}

// TestLeaderMoveConverges plays the rule on every process in turn, each
// move applied before the next: from any start, moves stop with no process
// leading two more than another, and every move narrows a gap.
func TestLeaderMoveConverges(t *testing.T) {
	procs := []string{"a", "b", "c", "d"}
	for groups := 1; groups <= 9; groups++ {
		for start := range procs {
			led := make([]string, groups)
			for g := range led {
				led[g] = procs[start] // one node leads everything
			}
			moves := 0
			for round := 0; round < 100; round++ {
				moved := false
				for _, p := range procs {
					pg := make([]PlacedGroup, groups)
					for g := range pg {
						pg[g].Leader = led[g]
						for _, q := range procs {
							if q != led[g] {
								pg[g].Takers = append(pg[g].Takers, Taker{Proc: q, ID: q})
							}
						}
					}
					if g, to, ok := LeaderMove(p, pg); ok {
						led[g], moved = to.Proc, true
						moves++
					}
				}
				if !moved {
					break
				}
			}
			count := map[string]int{}
			for _, p := range led {
				count[p]++
			}
			max := (groups + len(procs) - 1) / len(procs)
			for _, p := range procs {
				if count[p] > max || count[p] < groups/len(procs) {
					t.Errorf("%d groups from %s: %v after %d moves", groups, procs[start], count, moves)
				}
			}
			// Every move takes one group from the node leading all: the
			// fewest moves that balance.
			if want := groups - max; moves != want {
				t.Errorf("%d groups: %d moves, want %d", groups, moves, want)
			}
		}
	}
}
