package commands

import (
	"strings"
	"testing"
)

// DELAY.SCAN and DELAY.IMPORT refuse bad input as the other DELAY.*
// commands do, naming the word or the value's range.
func TestScanAndImportErrors(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"DELAY.SCAN", "q"}, "-ERR wrong number of arguments for 'delay.scan' command"},
		{[]string{"DELAY.SCAN", "q", "-1"}, "-ERR invalid cursor"},
		{[]string{"DELAY.SCAN", "q", "x"}, "-ERR invalid cursor"},
		{[]string{"DELAY.SCAN", "q", "0", "COUNT", "0"}, "-" + errScanCount},
		{[]string{"DELAY.SCAN", "q", "0", "COUNT", "10001"}, "-" + errScanCount},
		{[]string{"DELAY.SCAN", "q", "0", "COUNT"}, "-ERR syntax error: option 'COUNT' needs a value"},
		{[]string{"DELAY.SCAN", "q", "0", "MATCH", "*"}, "-ERR syntax error: unknown option 'MATCH'"},
		{[]string{"DELAY.SCAN", "q", "0"}, "*2 $0 *0"},
		{[]string{"DELAY.SCAN", "q", "99"}, "*2 $0 *0"},

		{[]string{"DELAY.IMPORT", "q", "j", "0"}, "-ERR wrong number of arguments for 'delay.import' command"},
		{[]string{"DELAY.IMPORT", "q", "j", "-1", "p"}, "-" + errNotInteger},
		{[]string{"DELAY.IMPORT", "q", "", "0", "p"}, "-" + errBadID},
		{[]string{"DELAY.IMPORT", "q", "j", "0", "p", "ID", "k"}, "-ERR syntax error: unknown option 'ID'"},
		{[]string{"DELAY.IMPORT", "q", "j", "0", "p", "DELIVERIES", "-1"}, "-" + errDeliveries},
		{[]string{"DELAY.IMPORT", "q", "j", "0", "p", "RETRY", "-1"}, "-" + errRetry},
		{[]string{"DELAY.IMPORT", "q", "j", "0", "p", "ORIGIN", "w", "0", "-1"}, "-ERR syntax error: option 'ORIGIN' needs 4 values"},
		{[]string{"DELAY.IMPORT", "q", "j", "0", "p", "ORIGIN", "w", "-5", "-1", ""}, "-" + errOriginAckTimeout},
		{[]string{"DELAY.IMPORT", "q", "j", "0", "p", "ORIGIN", "w", "0", "-2", ""}, "-" + errOriginRetry},
		{[]string{"DELAY.IMPORT", "q", "j", "0", "p", "ERROR", ""}, "-" + errReason},
		{[]string{"DELAY.IMPORT", "q", "j", "0", "p", "PRIORITY", "10"}, "-" + errPriority},
	} {
		if got := n.do(c, tc.cmd...); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.cmd, got, tc.want)
		}
	}
}

// A job written by DELAY.IMPORT has what it was given, DELAY.GET and
// DELAY.SCAN show it, and a second import of its id changes nothing.
func TestImportThenScan(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, tc := range []struct{ cmd, want string }{
		{"DELAY.IMPORT q j 1000 p DELIVERIES 3 ACKTIMEOUT 0 RETRY 2 GROUP g PRIORITY 4 ERROR boom ORIGIN w 500 -1 wdl", "$j"},
		{"DELAY.IMPORT q j 1000 other", "_"},
		{"DELAY.GET q j", "*20 $id $j $queue $q $state $ready $due :1000 $payload $p $deliveries :3 $group $g $priority :4 $origin $w $error $boom"},
		{"DELAY.SCAN q 0", "*2 $0 *1 *30 $id $j $state $ready $due :1000 $payload $p $deliveries :3 $group $g $priority :4 $origin $w $error $boom " +
			"$seq :1 $ack_timeout :0 $retry :2 $origin_ack_timeout :500 $origin_retry :-1 $origin_deadletter $wdl"},
		{"DELAY.IMPORT q 0000000000000000 999999999999999 p DEADLETTER dlq", "$0000000000000000"},
		{"DELAY.SCAN q 0 COUNT 1", "*2 $1 *1 *30 $id $j …"},
		{"DELAY.SCAN q 1 COUNT 1", "*2 $0 *1 *18 $id $0000000000000000 $state $delayed $due :999999999999999 $payload $p $deliveries :0 $seq :2 $ack_timeout :0 $retry :-1 $deadletter $dlq"},
		{"DELAY.IMPORT q 0000000000000000 0 x", "_"},
		{"DELAY.ADD q 0 p", "$…"}, // a server id never takes an imported one
		{"DELAY.CANCEL q 0000000000000000", ":1"},
	} {
		got := n.do(c, strings.Fields(tc.cmd)...)
		if want, pre := strings.CutSuffix(tc.want, "…"); (pre && !strings.HasPrefix(got, want)) || (!pre && got != want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.cmd, got, tc.want)
		}
	}
}
