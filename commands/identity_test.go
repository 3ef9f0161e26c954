package commands

import (
	"strings"
	"testing"
)

// DELAY.MPOP parses as BLMPOP does, with its errors, and replies
// [key, [[id, payload], ...]].
func TestIdentMPopArgumentsAndReply(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, tc := range []struct {
		cmd  string
		want string
	}{
		{"DELAY.MPOP 0 0 q", "-" + errNumKeys},
		{"DELAY.MPOP 0 x q", "-" + errNumKeys},
		{"DELAY.MPOP 0 -1 q", "-" + errNumKeys},
		{"DELAY.MPOP 0 2 q", "-ERR syntax error: numkeys is more than the keys given"},
		{"DELAY.MPOP x 1 q", "-" + errNotFloat},
		{"DELAY.MPOP -1 1 q", "-" + errNegTimeout},
		{"DELAY.MPOP 0 1 q COUNT 0", "-" + errCount},
		{"DELAY.MPOP 0 1 q COUNT x", "-" + errCount},
		{"DELAY.MPOP 0 1 q COUNT 1 COUNT 2", "-ERR syntax error: option 'COUNT' given twice"},
		{"DELAY.MPOP 0 1 q FOO", "-ERR syntax error: unknown option 'FOO'"},
		{"DELAY.MPOP 0 1 q COUNT", "-ERR syntax error: option 'COUNT' needs a value"},
		{"DELAY.MPOP 0 1", "-ERR wrong number of arguments for 'delay.mpop' command"},
		{"DELAY.ADD b 0 p1 ID j1", "$j1"},
		{"DELAY.ADD b 0 p2 ID j2", "$j2"},
		{"DELAY.ADD b 0 p3 ID j3", "$j3"},
		{"DELAY.MPOP 0.01 2 a b COUNT 2", "*2 $b *2 *2 $j1 $p1 *2 $j2 $p2"},
		{"DELAY.MPOP 0.01 2 a b", "*2 $b *1 *2 $j3 $p3"},
		// Inside MULTI it does not block: null, as BLMPOP's timeout.
		{"MULTI", "+OK"},
		{"DELAY.MPOP 0 2 a b COUNT 5", "+QUEUED"},
		{"EXEC", "*1 *-1"},
		{"COMMAND GETKEYS DELAY.MPOP 0 2 a b COUNT 3", "*2 $a $b"},
	} {
		if got := n.do(c, strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.cmd, got, tc.want)
		}
	}
	info := n.do(c, "COMMAND", "INFO", "DELAY.MPOP")
	if !strings.HasPrefix(info, "*1 *10 $delay.mpop :-4 *3 +write +blocking +movablekeys :0 :0 :0") {
		t.Errorf("COMMAND INFO DELAY.MPOP: %s", info)
	}
}

// RESCHEDULE, RESCHEDULEAT and PROMOTE reply 1/0 and counts; their
// arguments are checked as DELAY.ADD's are.
func TestIdentRescheduleCommands(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, tc := range []struct {
		cmd  string
		want string
	}{
		{"DELAY.ADD q 60000 p ID a", "$a"},
		{"DELAY.ADD q 60000 p ID b", "$b"},
		{"DELAY.RESCHEDULE q a -1", "-" + errNotInteger},
		{"DELAY.RESCHEDULE q a x", "-" + errNotInteger},
		{"DELAY.RESCHEDULEAT q a -5", "-" + errNotInteger},
		{"DELAY.RESCHEDULE q nosuch 10", ":0"},
		{"DELAY.RESCHEDULE q a 120000", ":1"},
		{"DELAY.RESCHEDULEAT q a 1", ":1"},
		{"LLEN q", ":1"},
		{"DELAY.PROMOTE q a b nosuch", ":1"},
		{"DELAY.POP q 0", "*3 $q $a $p"},
		{"DELAY.POP q 0", "*3 $q $b $p"},
		{"DELAY.ADD q 60000 p ID c UNIQUE 60000 DEBOUNCE 1000", "$c"},
		{"DELAY.ADD q 0 p2 ID c DEBOUNCE 1000 UNIQUE 60000", "$c"},
		{"DELAY.GET q c", "*12 $id $c $queue $q $state $ready $due :…"},
		{"DELAY.CANCEL q c", ":1"},
		{"DELAY.ADD q 0 p ID c", "_"},
		{"DELAY.ADD q 0 p ID c REPLACE", "_"},
	} {
		got := n.do(c, strings.Fields(tc.cmd)...)
		if p, ok := strings.CutSuffix(tc.want, "…"); (ok && !strings.HasPrefix(got, p)) || (!ok && got != tc.want) {
			t.Errorf("%s: %s, want %s", tc.cmd, got, tc.want)
		}
	}
}

// In cluster mode DELAY.MPOP is routed by the keys after numkeys.
func TestIdentMPopRouting(t *testing.T) {
	fc := newFake(idA, idL)
	n := newNode(t, fc)
	c := n.client()
	if got := n.do(c, "DELAY.MPOP", "1", "1", "foo"); got != movedFoo {
		t.Errorf("follower: %s, want %s", got, movedFoo)
	}
	if got := n.do(c, "DELAY.MPOP", "1", "2", "foo", "bar"); got != cross {
		t.Errorf("two slots: %s, want %s", got, cross)
	}
	if got := n.do(c, "DELAY.MPOP", "1", "2", "{foo}a", "{foo}b", "COUNT", "2"); got != movedFoo {
		t.Errorf("one slot: %s, want %s", got, movedFoo)
	}
}

// DELAY.GET shows a job's group and priority when it has them, and only then.
func TestGetShowsGroupAndPriority(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	n.do(c, "DELAY.ADD", "q", "60000", "p", "ID", "plain")
	n.do(c, "DELAY.ADD", "q", "60000", "p", "ID", "both", "GROUP", "tenant-7", "PRIORITY", "3")
	n.do(c, "DELAY.ADD", "q", "60000", "p", "ID", "prio", "PRIORITY", "9")
	for id, want := range map[string]string{
		"plain": "*12 ",
		"both":  "*16 ",
		"prio":  "*14 ",
	} {
		got := n.do(c, "DELAY.GET", "q", id)
		if !strings.HasPrefix(got, want) {
			t.Errorf("DELAY.GET %s: %s, want %s…", id, got, want)
		}
	}
	if got := n.do(c, "DELAY.GET", "q", "both"); !strings.HasSuffix(got, "$group $tenant-7 $priority :3") {
		t.Errorf("DELAY.GET both: %s, want group tenant-7 and priority 3 at the end", got)
	}
	if got := n.do(c, "DELAY.GET", "q", "prio"); !strings.HasSuffix(got, "$priority :9") || strings.Contains(got, "group") {
		t.Errorf("DELAY.GET prio: %s, want priority 9 and no group", got)
	}
	// A dead-lettered job names the queue it came from.
	n.do(c, "DELAY.ADD", "work", "0", "p", "ID", "dead", "RETRY", "0", "ACKTIMEOUT", "1000", "DEADLETTER", "dlq")
	n.do(c, "DELAY.POP", "work", "0")
	n.do(c, "DELAY.NACK", "work", "dead")
	if got := n.do(c, "DELAY.GET", "dlq", "dead"); !strings.HasSuffix(got, "$origin $work") {
		t.Errorf("DELAY.GET of a dead-lettered job: %s, want origin work at the end", got)
	}
}
