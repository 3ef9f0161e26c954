package commands

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/delayd/delayd/backup"
	"github.com/delayd/delayd/engine"
)

// Backups in Redis's manner (docs/decisions/backup.md): BGSAVE writes a
// backup file into the data directory in the background, LASTSAVE and INFO
// persistence's rdb_* fields say how the last one went, and SYNC streams one
// over the connection, which is what `redis-cli --rdb FILE` and `delayd
// backup` read. The file is the backup package's, not an RDB: only its
// framing on the wire is Redis's.
//
// The capture is taken when the command runs, under the engine's lock (the
// only pause writes see); framing, writing and sending come after. On a
// cluster it is taken on the leader only, once every write it applied has
// committed, so it is exact at a Raft index; other nodes answer MOVED to
// the leader (CLUSTERDOWN when none is known).

// BackupFile is the name of the file BGSAVE writes in the data directory.
const BackupFile = "delayd.backup"

// backupTimeout bounds a leader's wait for a settled moment.
const backupTimeout = 5 * time.Second

// backupState is BGSAVE's progress and outcome, for LASTSAVE and INFO.
type backupState struct {
	mu       sync.Mutex // guards the fields below
	running  bool
	lastOK   time.Time // the last successful save's capture
	lastErr  error     // the last save's outcome
	lastTook time.Duration
	lastHeld time.Duration // the last capture's lock hold (BGSAVE or SYNC)
	saves    int64
}

// clusterBackup is the ClusterView's backup on the leader (cluster.Cluster).
type clusterBackup interface {
	Backup(prefix int, timeout time.Duration) (engine.Capture, error)
}

// captureBackup captures and seals a backup file, or writes the refusal
// (MOVED on a follower) and returns nil.
func (d *Dispatcher) captureBackup(c *Client) ([]byte, backup.Header) {
	h := backup.Header{Mode: backup.Single, Server: d.opts.Version, Created: time.Now().UnixMilli()}
	var got engine.Capture
	var err error
	if cl := d.opts.Cluster; cl != nil {
		h.Mode = backup.Cluster
		cb, ok := cl.(clusterBackup)
		switch {
		case !cl.Writable():
			err = engine.ErrNotLeader
		case !ok:
			err = errors.New("this cluster node cannot take backups")
		default:
			got, err = cb.Backup(backup.HeaderSize, backupTimeout)
		}
	} else {
		got, err = d.engineFor(c).Backup(backup.HeaderSize)
	}
	if errors.Is(err, engine.ErrNotLeader) {
		c.W.Error(d.notLeader(0))
		return nil, h
	}
	if errors.Is(err, engine.ErrBackupBusy) {
		c.W.Error("TRYAGAIN " + err.Error()) // as a write whose commit did not come
		return nil, h
	}
	if err != nil {
		c.W.Error("ERR " + err.Error())
		return nil, h
	}
	h.Index = got.Index
	file, h, err := backup.Seal(got.Data, h)
	if err != nil {
		c.W.Error("ERR " + err.Error())
		return nil, h
	}
	d.backups.mu.Lock()
	d.backups.lastHeld = got.Held
	d.backups.mu.Unlock()
	d.opts.Log.Info().Int64("client", c.ID).Uint64("jobs", h.Jobs).Uint64("index", h.Index).Int("bytes", len(file)).
		Dur("held_ms", got.Held).Msg("backup captured")
	return file, h
}

// cmdBgsave is BGSAVE [SCHEDULE]: capture now, write DIR/delayd.backup in
// the background (a temporary file, fsynced, renamed over the last one).
func cmdBgsave(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) > 2 || (len(args) == 2 && !strings.EqualFold(string(args[1]), "schedule")) {
		c.W.Error(errSyntax)
		return
	}
	dir := d.opts.Config["dir"]
	if dir == "" {
		c.W.Error("ERR no data directory to save into")
		return
	}
	b := &d.backups
	b.mu.Lock()
	if b.running {
		b.mu.Unlock()
		c.W.Error("ERR Background save already in progress")
		return
	}
	b.running = true
	b.mu.Unlock()
	start := time.Now()
	file, _ := d.captureBackup(c)
	if file == nil { // refused (MOVED, a busy leader): no save was attempted
		b.mu.Lock()
		b.running = false
		b.mu.Unlock()
		return
	}
	path := filepath.Join(dir, BackupFile)
	go func() {
		err := backup.WriteFile(path, file)
		b.mu.Lock()
		b.running, b.lastErr, b.lastTook = false, err, time.Since(start)
		if err == nil {
			b.lastOK = start
			b.saves++
		}
		b.mu.Unlock()
		if err != nil {
			d.opts.Log.Error().Err(err).Str("file", path).Msg("BGSAVE failed")
			return
		}
		d.opts.Log.Info().Str("file", path).Int("bytes", len(file)).Dur("took_ms", time.Since(start)).Msg("BGSAVE done")
	}()
	c.W.Status("Background saving started")
}

// cmdLastsave is LASTSAVE: the unix time of the last successful BGSAVE, or
// of the server's start (Redis's answer before any save).
func cmdLastsave(d *Dispatcher, c *Client, args [][]byte) {
	d.backups.mu.Lock()
	t := d.backups.lastOK
	d.backups.mu.Unlock()
	if t.IsZero() {
		t = d.started
	}
	c.W.Int(t.Unix())
}

// cmdSync is SYNC: the backup file as one bulk string, then the connection
// closes (a Redis master would go on with its replication stream; there is
// none). redis-cli --rdb reads exactly this, and so does `delayd backup`.
func cmdSync(d *Dispatcher, c *Client, args [][]byte) {
	file, _ := d.captureBackup(c)
	if file == nil {
		return
	}
	c.W.Bulk(file)
	c.Quit = true
}

// cmdReplconf answers what redis-cli --rdb sends before SYNC (capa eof,
// rdb-only 1, rdb-filter-only): OK, as SYNC's answer is a whole file
// either way. Anything else, as a replica would send, is refused: delayd
// replicates through its cluster, not as a Redis replica.
func cmdReplconf(d *Dispatcher, c *Client, args [][]byte) {
	if len(args)%2 == 0 {
		c.W.Error(errSyntax)
		return
	}
	for i := 1; i < len(args); i += 2 {
		switch opt := strings.ToLower(string(args[i])); opt {
		case "capa", "rdb-only", "rdb-filter-only":
		default:
			c.W.Error("ERR Unrecognized REPLCONF option: " + clip(args[i]))
			return
		}
	}
	c.W.Status("OK")
}

// info is INFO persistence's backup fields, under Redis's rdb_* names.
func (b *backupState) info() [][2]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	status, last := "ok", int64(0)
	if b.lastErr != nil {
		status = "err"
	}
	if !b.lastOK.IsZero() {
		last = b.lastOK.Unix()
	}
	running := "0"
	if b.running {
		running = "1"
	}
	return [][2]string{
		{"rdb_bgsave_in_progress", running},
		{"rdb_last_save_time", strconv.FormatInt(last, 10)},
		{"rdb_last_bgsave_status", status},
		{"rdb_last_bgsave_time_sec", strconv.FormatInt(int64(b.lastTook.Seconds()), 10)},
		{"rdb_saves", strconv.FormatInt(b.saves, 10)},
		{"backup_last_hold_ms", strconv.FormatInt(b.lastHeld.Milliseconds(), 10)},
	}
}
