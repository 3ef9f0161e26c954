package commands

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayd/delayd/backup"
	"github.com/delayd/delayd/engine"
)

func TestBackupCommands(t *testing.T) {
	n := newNode(t, nil)
	dir := t.TempDir()
	n.d.opts.Config["dir"] = dir
	c := n.client()
	for _, tc := range []struct{ cmd, want string }{
		{"REPLCONF capa eof", "+OK"},
		{"REPLCONF rdb-only 1", "+OK"},
		{"REPLCONF capa eof rdb-filter-only functions", "+OK"},
		{"REPLCONF listening-port 6380", "-ERR Unrecognized REPLCONF option: listening-port"},
		{"REPLCONF capa", "-" + errSyntax},
		{"BGSAVE NOW", "-" + errSyntax},
		{"BGSAVE SCHEDULE x", "-" + errSyntax},
		{"LASTSAVE", ":" + itoa(n.d.started.Unix())},
		{"DELAY.ADD q 0 ready ID a", "$a"},
		{"DELAY.ADD q 60000 later ID b", "$b"},
		{"DELAY.LIMIT q CONCURRENCY 2", "+OK"},
		{"MULTI", "+OK"},
		{"SYNC", "-ERR Command not allowed inside a transaction"},
		{"DISCARD", "+OK"},
	} {
		if got := n.do(c, strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.cmd, got, tc.want)
		}
	}

	// SYNC: the whole backup as one bulk string, then the connection closes.
	got := n.do(c, "SYNC")
	if !c.Quit || !strings.HasPrefix(got, "$DLYDBKUP") {
		t.Fatalf("SYNC: quit %v, reply %.20q", c.Quit, got)
	}
	h, counts, err := backup.Check(bytes.NewReader([]byte(got[1:])))
	if err != nil || h.Mode != backup.Single || counts.Ready != 1 || counts.Delayed != 1 || counts.Limits != 1 {
		t.Fatalf("SYNC's file: %+v %+v %v", h, counts, err)
	}

	// BGSAVE: the file in the data directory, then LASTSAVE and INFO say so.
	c = n.client()
	before := time.Now().Unix()
	if got := n.do(c, "BGSAVE"); got != "+Background saving started" {
		t.Fatalf("BGSAVE: %q", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if n.d.backups.info()[0][1] == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("BGSAVE never finished")
		}
	}
	f, err := os.Open(filepath.Join(dir, BackupFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, counts, err := backup.Check(f); err != nil || counts.Jobs() != 2 {
		t.Fatalf("BGSAVE's file: %+v %v", counts, err)
	}
	if got := n.do(c, "LASTSAVE"); got < ":"+itoa(before) {
		t.Fatalf("LASTSAVE %s, before %d", got, before)
	}
	info := n.do(c, "INFO", "persistence")
	for _, want := range []string{"rdb_bgsave_in_progress:0", "rdb_last_bgsave_status:ok", "rdb_saves:1"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO persistence lacks %s:\n%s", want, info)
		}
	}
}

// A follower answers MOVED to the leader: its state is a prefix of what the
// leader acknowledged, exact at no point a client can name.
func TestBackupOnFollower(t *testing.T) {
	fc := newFake(idA, idL)
	n := newNode(t, fc)
	n.d.opts.Config["dir"] = t.TempDir()
	c := n.client()
	for _, cmd := range []string{"SYNC", "BGSAVE"} {
		if got := n.do(c, cmd); got != "-MOVED 0 10.0.0.1:7000" {
			t.Errorf("%s on a follower: %q", cmd, got)
		}
	}
	fc.mu.Lock()
	fc.leader = ""
	fc.mu.Unlock()
	if got := n.do(c, "SYNC"); got != down {
		t.Errorf("SYNC with no leader: %q", got)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// busyLeader is a leader whose backups find no settled moment.
type busyLeader struct{ *fakeCluster }

func (busyLeader) Backup(int, time.Duration) (engine.Capture, error) {
	return engine.Capture{}, engine.ErrBackupBusy
}

// A leader that found no settled moment answers TRYAGAIN (delayd backup
// asks again); a ClusterView without backups says so.
func TestBackupOnBusyLeader(t *testing.T) {
	n := newNode(t, nil)
	n.d.opts.Cluster = busyLeader{newFake(idL, idL)}
	c := n.client()
	if got := n.do(c, "SYNC"); !strings.HasPrefix(got, "-TRYAGAIN ") {
		t.Fatalf("SYNC on a busy leader: %q", got)
	}
	n.d.opts.Cluster = newFake(idL, idL)
	if got := n.do(c, "SYNC"); got != "-ERR this cluster node cannot take backups" {
		t.Fatalf("SYNC without backups: %q", got)
	}
}
