package commands

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/delayd/delayd/engine"
)

func cmdPing(d *Dispatcher, c *Client, args [][]byte) {
	if c.subbed.Load() && c.W.Proto() == 2 && len(args) <= 2 {
		// As Redis in RESP2's Pub/Sub context: a message-like reply.
		c.W.Array(2)
		c.W.BulkString("pong")
		if len(args) == 2 {
			c.W.Bulk(args[1])
		} else {
			c.W.BulkString("")
		}
		return
	}
	switch len(args) {
	case 1:
		c.W.Status("PONG")
	case 2:
		c.W.Bulk(args[1])
	default:
		c.W.Error("ERR wrong number of arguments for 'ping' command")
	}
}

func cmdEcho(d *Dispatcher, c *Client, args [][]byte) { c.W.Bulk(args[1]) }

func cmdQuit(d *Dispatcher, c *Client, args [][]byte) {
	c.W.Status("OK")
	c.Quit = true
}

func cmdSelect(d *Dispatcher, c *Client, args [][]byte) {
	n, ok := parseInt(args[1])
	switch {
	case !ok:
		c.W.Error(errNotInteger)
	case n != 0:
		c.W.Error("ERR DB index is out of range")
	default:
		c.W.Status("OK")
	}
}

// cmdAuth is AUTH [user] pass; passwords are checked by package acl, in
// constant time.
func cmdAuth(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) > 3 {
		c.W.Error(errSyntax)
		return
	}
	var user []byte
	if len(args) == 3 {
		user = args[1]
	} else if d.acl.Default().User().NoPass {
		c.W.Error(errNoAuthConfig)
		return
	}
	if d.auth(c, user, args[len(args)-1]) {
		c.W.Status("OK")
	}
}

func cmdHello(d *Dispatcher, c *Client, args [][]byte) {
	proto := c.W.Proto()
	if len(args) >= 2 {
		v, ok := parseInt(args[1])
		if !ok {
			c.W.Error("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			c.W.Error("NOPROTO unsupported protocol version")
			return
		}
		proto = int(v)
	}
	// As Redis 7.2's helloCommand: the options are read first (a bad
	// SETNAME refused as it is read), the last AUTH pair is the one tried.
	var name, user, pass []byte
	setName, auth := false, false
	for i := 2; i < len(args); i++ {
		more := len(args) - i - 1
		switch {
		case bytes.EqualFold(args[i], []byte("AUTH")) && more >= 2:
			user, pass, auth = args[i+1], args[i+2], true
			i += 2
		case bytes.EqualFold(args[i], []byte("SETNAME")) && more >= 1:
			name, setName = args[i+1], true
			if !validName(name) {
				c.W.Error(errClientName)
				return
			}
			i++
		default:
			c.W.Error("ERR Syntax error in HELLO option '" + clip(args[i]) + "'")
			return
		}
	}
	if auth && !d.auth(c, user, pass) {
		return
	}
	if !c.Authed {
		c.W.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if setName {
		c.set(func() { c.name = string(name) })
	}
	c.W.SetProto(proto)
	c.set(func() { c.proto = proto })
	w := c.W
	w.Map(7)
	w.BulkString("server")
	w.BulkString("redis")
	w.BulkString("version")
	w.BulkString(RedisVersion)
	w.BulkString("proto")
	w.Int(int64(proto))
	w.BulkString("id")
	w.Int(c.ID)
	mode, role := "standalone", "master"
	if cl := d.opts.Cluster; cl != nil {
		mode = "cluster"
		if leader, ok := cl.Leader(); !ok || !leader.Self {
			role = "replica"
		}
	}
	w.BulkString("mode")
	w.BulkString(mode)
	w.BulkString("role")
	w.BulkString(role)
	w.BulkString("modules")
	w.Array(0)
}

const errClientName = "ERR Client names cannot contain spaces, newlines or special characters."

func validName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func cmdDBSize(d *Dispatcher, c *Client, args [][]byte) {
	c.W.Int(int64(d.engineFor(c).Info().Queues))
}

func cmdTime(d *Dispatcher, c *Client, args [][]byte) {
	now := time.Now()
	c.W.Array(2)
	c.W.BulkString(strconv.FormatInt(now.Unix(), 10))
	c.W.BulkString(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))
}

func cmdConfig(d *Dispatcher, c *Client, args [][]byte) {
	if !checkSubArity(c, "config", args) {
		return
	}
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "get":
		if len(args) < 3 {
			c.W.Error("ERR wrong number of arguments for 'config|get' command")
			return
		}
		var keys []string
		for k := range d.opts.Config {
			for _, pat := range args[2:] {
				if ok, _ := path.Match(strings.ToLower(string(pat)), k); ok {
					keys = append(keys, k)
					break
				}
			}
		}
		sort.Strings(keys)
		c.W.Map(len(keys))
		for _, k := range keys {
			c.W.BulkString(k)
			c.W.BulkString(d.opts.Config[k])
		}
	case "resetstat":
		d.resetStats()
		c.W.Status("OK")
	case "set", "rewrite":
		c.W.Error("ERR CONFIG " + upper(sub) + " is not supported: delayd's settings are read-only at run time (flags, DELAYD_* environment, config file)")
	default:
		c.W.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try CONFIG HELP.")
	}
}

func cmdBgRewrite(d *Dispatcher, c *Client, args [][]byte) {
	if err := d.engineFor(c).Rewrite(); err != nil {
		c.W.Error("ERR " + err.Error())
		return
	}
	c.W.Status("Background append only file rewriting started")
}

func cmdShutdown(d *Dispatcher, c *Client, args [][]byte) {
	for _, a := range args[1:] {
		switch strings.ToUpper(string(a)) {
		case "NOSAVE", "SAVE", "NOW", "FORCE":
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	d.opts.Log.Warn().Int64("client", c.ID).Str("addr", c.Addr).Msg("SHUTDOWN requested")
	// Like Redis, no reply on success: the connection closes with the server.
	c.Quit = true
	if d.opts.Shutdown != nil {
		d.opts.Shutdown()
	}
}

func cmdInfo(d *Dispatcher, c *Client, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var sb strings.Builder
	section := func(name string, fields [][2]string) {
		if !all && !want[strings.ToLower(name)] {
			return
		}
		if sb.Len() > 0 {
			sb.WriteString("\r\n")
		}
		sb.WriteString("# " + name + "\r\n")
		for _, f := range fields {
			sb.WriteString(f[0] + ":" + f[1] + "\r\n")
		}
	}
	eng := d.engineFor(c) // nil while the log loads
	in := engineInfo(eng)
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	uptime := int64(time.Since(d.started).Seconds())
	now := time.Now()
	mode, clusterEnabled := "standalone", "0"
	if d.opts.Cluster != nil {
		mode, clusterEnabled = "cluster", "1"
	}
	section("Server", [][2]string{
		// Client libraries turn features on by redis_version (RESP3 client
		// tracking, CLIENT SETINFO, ...): it says which Redis API delayd
		// implements; delayd_version says which delayd this is.
		{"redis_version", RedisVersion},
		{"delayd_version", d.opts.Version},
		{"redis_git_sha1", "00000000"},
		{"redis_git_dirty", "0"},
		{"redis_build_id", "0"},
		{"redis_mode", mode},
		{"os", osName()},
		{"arch_bits", strconv.Itoa(strconv.IntSize)},
		{"monotonic_clock", "POSIX clock_gettime"},
		{"multiplexing_api", multiplexer()},
		{"go_version", runtime.Version()},
		{"process_id", strconv.Itoa(os.Getpid())},
		{"process_supervised", "no"},
		{"run_id", d.runID},
		{"tcp_port", strconv.Itoa(d.opts.Port)},
		{"server_time_usec", itoa(now.UnixMicro())},
		{"uptime_in_seconds", itoa(uptime)},
		{"uptime_in_days", itoa(uptime / 86400)},
		{"hz", "10"},
		{"configured_hz", "10"},
		{"executable", executable()},
		{"config_file", d.opts.ConfigFile},
		{"io_threads_active", "0"},
		{"listener0", "name=tcp,bind=" + d.opts.Config["bind"] + ",port=" + strconv.Itoa(d.opts.Port)},
	})
	trkClients, trkKeys, trkPrefixes := d.trackingStats()
	section("Clients", [][2]string{
		{"connected_clients", itoa(d.Connected.Load())},
		{"cluster_connections", "0"},
		{"maxclients", strconv.Itoa(d.opts.MaxClients)},
		{"blocked_clients", itoa(int64(in.Waiters))},
		{"tracking_clients", strconv.Itoa(trkClients)},
		{"pubsub_clients", itoa(d.subscribers.Load())},
		{"watching_clients", "0"},
	})
	var ms runtime.MemStats
	if all || want["memory"] {
		runtime.ReadMemStats(&ms)
	}
	section("Memory", [][2]string{
		{"used_memory", strconv.FormatUint(ms.HeapAlloc+uint64(engine.MappedBytes()), 10)},
		{"used_memory_rss", strconv.FormatUint(ms.Sys, 10)},
		{"used_memory_jobs", itoa(in.MemoryBytes)},
		{"used_memory_payloads", itoa(in.PayloadBytes)},
		{"payload_horizon_ms", itoa(in.Horizon)},
		{"payloads_on_disk", itoa(in.DiskJobs)},
		{"payloads_on_disk_bytes", itoa(in.DiskBytes)},
		{"payload_disk_reads", strconv.FormatUint(in.DiskReads, 10)},
		{"far_jobs", itoa(in.Far.Jobs)},
		{"far_runs", strconv.Itoa(in.Far.Runs)},
		{"far_index_bytes", itoa(in.Far.IndexBytes)},
		{"far_memory_bytes", itoa(in.Far.IndexBytes + in.Far.MemBytes)}, // the index and the buckets not yet sealed
		{"far_disk_bytes", itoa(in.Far.DiskBytes)},
		{"lazyfree_pending_objects", strconv.Itoa(in.LazyfreePending)}, // jobs of deleted queues not freed yet
		{"gc_cycles", strconv.FormatUint(uint64(ms.NumGC), 10)},
	})
	section("Persistence", append(d.persistence(eng), d.backups.info()...))
	section("Stats", [][2]string{
		{"total_connections_received", itoa(d.TotalConns.Load())},
		{"total_commands_processed", itoa(d.commandsRun.Load())},
		{"instantaneous_ops_per_sec", itoa(d.ops.rate(monoNow(), d.commandsRun.Load()))},
		{"rejected_connections", itoa(d.Rejected.Load())},
		{"tracking_total_keys", strconv.Itoa(trkKeys)},
		{"tracking_total_prefixes", strconv.Itoa(trkPrefixes)},
		{"total_error_replies", strconv.FormatUint(d.errReplies.Load(), 10)},
		{"acl_access_denied_auth", strconv.FormatUint(d.aclDenied[0].Load(), 10)},
		{"acl_access_denied_cmd", strconv.FormatUint(d.aclDenied[1].Load(), 10)},
		{"acl_access_denied_key", strconv.FormatUint(d.aclDenied[2].Load(), 10)},
		{"acl_access_denied_channel", strconv.FormatUint(d.aclDenied[3].Load(), 10)},
		{"jobs_added", strconv.FormatUint(in.Added, 10)},
		{"jobs_delivered", strconv.FormatUint(in.Delivered, 10)},
		{"jobs_redelivered", strconv.FormatUint(in.Redelivered, 10)},
		{"jobs_acked", strconv.FormatUint(in.Acked, 10)},
		{"jobs_nacked", strconv.FormatUint(in.Nacked, 10)},
		{"jobs_expired", strconv.FormatUint(in.Expired, 10)},
		{"jobs_dead_lettered", strconv.FormatUint(in.DeadLettered, 10)},
		{"jobs_dropped", strconv.FormatUint(in.Dropped, 10)},
		{"jobs_cancelled", strconv.FormatUint(in.Cancelled, 10)},
		{"jobs_fired", strconv.FormatUint(in.Fired, 10)},
		{"jobs_requeued", strconv.FormatUint(in.Requeued, 10)},
	})
	section("Replication", d.replication())
	section("CPU", cpuInfo()) // Redis's place for it: after Replication
	if all || want["queues"] {
		section("Queues", append([][2]string{
			{"queues", strconv.Itoa(in.Queues)},
			{"jobs", strconv.Itoa(in.Jobs)},
			{"delayed", strconv.Itoa(in.Delayed)},
			{"ready", strconv.Itoa(in.Ready)},
			{"reserved", strconv.Itoa(in.Reserved)},
		}, latencyInfo(eng)...))
	}
	section("Cluster", [][2]string{{"cluster_enabled", clusterEnabled}})
	section("Keyspace", keyspaceInfo(in)) // keyspace.go
	// As Redis's commandstats and latencystats: not in the default
	// sections, only named or with all and everything (metrics.go).
	every := want["all"] || want["everything"]
	if every || want["commandstats"] {
		section("Commandstats", d.commandStatsInfo())
	}
	if every || want["lateness"] {
		section("Lateness", latenessInfo(eng))
	}
	c.W.Verbatim(sb.String())
}

// RedisVersion is the Redis API level delayd implements, reported by HELLO
// and INFO as redis_version: clients gate features on it (client tracking
// with RESP3 came in 6.0, CLIENT SETINFO in 7.2; 7.4 is what our CLIENT
// INFO fields and error texts follow).
const RedisVersion = "7.4.0"

// replication is INFO replication: in cluster mode the group's roles
// (cluster.go), else as Redis 7 shows a master with no replicas.
func (d *Dispatcher) replication() [][2]string {
	if cl := d.opts.Cluster; cl != nil {
		return d.clusterReplication(cl)
	}
	return [][2]string{
		{"role", "master"},
		{"connected_slaves", "0"},
		{"master_failover_state", "no-failover"},
		{"master_replid", d.replID},
		{"master_replid2", strings.Repeat("0", 40)},
		{"master_repl_offset", "0"},
		{"second_repl_offset", "-1"},
		{"repl_backlog_active", "0"},
		{"repl_backlog_size", "1048576"},
		{"repl_backlog_first_byte_offset", "0"},
		{"repl_backlog_histlen", "0"},
	}
}

// osName is what Redis's os field shows (uname's sysname, release and
// machine), from what Go knows without cgo.
func osName() string {
	name := runtime.GOOS
	if name != "" {
		name = strings.ToUpper(name[:1]) + name[1:]
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		name += " " + strings.TrimSpace(string(b))
	}
	return name + " " + runtime.GOARCH
}

// multiplexer names the poller Go's runtime uses, as Redis names its own.
func multiplexer() string {
	switch runtime.GOOS {
	case "linux":
		return "epoll"
	case "darwin", "freebsd", "netbsd", "openbsd", "dragonfly":
		return "kqueue"
	case "windows":
		return "iocp"
	}
	return "go"
}

func executable() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	return p
}

// randomHex is n random bytes in hex: run_id and master_replid, as Redis
// makes them at start.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
