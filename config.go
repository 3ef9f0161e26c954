package main

import (
	"errors"
	"fmt"
	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/resp"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// config is every setting, after flags, environment, file and defaults have
// been merged (in that order of precedence). Only main reads viper.
type config struct {
	ConfigFile            string
	Bind                  string
	Port                  int
	Dir                   string
	AppendOnly            bool
	AppendFsync           string
	RequirePass           string
	ACLFile               string
	MaxPayloadBytes       int
	MaxJobs               int
	MaxClients            int
	MaxMemory             int64
	ProtectedMode         bool
	Timeout               int64
	OutputLimit           resp.OutputLimit
	OutputLimitText       string // as CONFIG GET shows it
	AckTimeout            int64
	Tick                  int64
	AutoRewritePercentage int
	AutoRewriteMinSize    int64
	SegmentSize           int64
	Horizon               int64
	FarBuckets            bool
	Repair                bool
	SlowlogSlowerThan     int64
	SlowlogMaxLen         int
	LogLevel              string
	LogFormat             string
	HTTPAddr              string
	HTTPAddrGiven         bool // set by a flag, the environment or the file, not the default
	HTTPMonitoringAuth    bool // /metrics and /readyz ask for credentials as the dashboard does
	MetricsMaxQueues      int

	// TLS (config_tls.go).
	TLSPort        int
	TLSCertFile    string
	TLSKeyFile     string
	TLSCACertFile  string
	TLSAuthClients string

	// Cluster mode (cluster package).
	ClusterEnabled         bool
	ClusterNodeID          string
	ClusterBusAddr         string
	ClusterAnnounceAddr    string
	ClusterAnnounceBusAddr string
	ClusterBootstrap       bool
	ClusterJoin            string
	ClusterAck             string
	ClusterElectionTimeout int64
	ClusterSnapshotEntries int64
	ClusterGroups          int
	ClusterGroupPortStep   int
	ClusterBalanceLeaders  bool
	ClusterReplicas        int
}

// settings are the flags, with their defaults and help; config.yaml and the
// README document the same list.
var settings = []struct {
	name, def, help string
}{
	{"bind", "127.0.0.1", "address to listen on"},
	{"port", "6380", "TCP port (0: no plain listener, with tls-port set)"},
	{"tls-port", "0", "TCP port for TLS connections (0: off)"},
	{"tls-cert-file", "", "PEM server certificate for tls-port and the HTTP side"},
	{"tls-key-file", "", "PEM private key of tls-cert-file"},
	{"tls-ca-cert-file", "", "PEM CA certificates that client certificates are verified against"},
	{"tls-auth-clients", "yes", "client certificates: yes (required), optional (verified if shown), no"},
	{"dir", "./data", "data directory (append-only log)"},
	{"appendonly", "yes", "keep an append-only log: yes|no"},
	{"appendfsync", "everysec", "when to fsync the log: always|everysec|no"},
	{"requirepass", "", "password clients must AUTH with (empty: none)"},
	{"aclfile", "", "file of ACL users that ACL SAVE writes and ACL LOAD and the start read (empty: none)"},
	{"max-payload-bytes", "4194304", "largest payload accepted, in bytes"},
	{"max-jobs", "0", "most jobs held in any state (0: no limit)"},
	{"max-clients", "10000", "most client connections at once"},
	{"maxmemory", "0", "refuse adds with OOM while the memory in use (heap plus job pages) is above this (100mb, 1gb; 0: no limit)"},
	{"protected-mode", "yes", "with no password set, refuse clients that are not on the loopback interface: yes|no"},
	{"timeout", "0", "close a client idle this many seconds (0: never); blocked pops and MONITOR are not idle"},
	{"client-output-buffer-limit", "normal 0 0 0", "cap a client's pending output as Redis: normal <hard> <soft> <soft-seconds> (0: none)"},
	{"ack-timeout", "0", "default ack timeout in ms (0: a pop removes the job)"},
	{"tick", "1", "timing wheel tick in ms"},
	{"auto-rewrite-percentage", "100", "rewrite the log when it grew by this percentage of the live data (0: never); in a cluster, snapshot when the Raft log grew by this percentage of the last snapshot (0: every cluster-snapshot-entries)"},
	{"auto-rewrite-min-size", "67108864", "no automatic rewrite (in a cluster, no snapshot) below this log size, in bytes"},
	{"aof-segment-size", "67108864", "the log's segments roll at this size, in bytes; compaction works one segment at a time"},
	{"horizon", "3600000", "keep in memory the payloads of jobs due within this many ms, the rest in the log only (0: all in memory; off in a cluster and with appendonly no)"},
	{"far-buckets", "yes", "move jobs due beyond the horizon out of memory into time buckets on disk: yes|no (off in a cluster, with appendonly no and with horizon 0)"},
	{"repair", "false", "cut a damaged log at the damage (keeping the rest as *.broken) and start"},
	{"slowlog-log-slower-than", "10000", "SLOWLOG keeps commands slower than this, in microseconds (0: every command, -1: none)"},
	{"slowlog-max-len", "128", "most SLOWLOG entries kept"},
	{"log-level", "info", "debug|info|warn|error"},
	{"log-format", "auto", "json|console|auto (console on a terminal)"},
	{"http-addr", "127.0.0.1:6381", "host:port of /metrics, /healthz, /readyz and the dashboard (empty: off)"},
	{"http-monitoring-auth", "yes", "once any user has a password, /metrics and /readyz ask for it as the dashboard does (yes), or stay open as /healthz (no)"},
	{"metrics-max-queues", "100", "queues that get their own label in /metrics; the rest are summed as _other"},
	{"cluster-enabled", "no", "run as a node of a Raft group: yes|no"},
	{"cluster-node-id", "", "this node's id (empty: the one kept in the data dir, or a new one)"},
	{"cluster-bus-addr", "", "host:port for Raft traffic (empty: bind and port + 10000)"},
	{"cluster-announce-addr", "", "host:port clients are sent to (empty: bind:port)"},
	{"cluster-announce-bus-addr", "", "host:port other nodes dial for Raft (empty: cluster-bus-addr)"},
	{"cluster-bootstrap", "false", "form a new cluster with this node if it has no cluster state"},
	{"cluster-join", "", "host:port of a member (its clients' address) to ask to add this node"},
	{"cluster-ack", "quorum", "answer writes after a majority holds them (quorum) or the leader applied them (leader)"},
	{"cluster-election-timeout", "1000", "Raft heartbeat and election timeout in ms; the leader's lease is half"},
	{"cluster-snapshot-entries", "8192", "the fewest Raft entries between snapshots"},
	{"cluster-groups", "1", "Raft groups the slots are split over, when this node bootstraps the cluster (1 to 64)"},
	{"cluster-group-port-step", "100", "group g listens on port + g*step, its bus on bus port + g*step"},
	{"cluster-replicas", "3", "with several groups, the voters of each group: a node joining a group that has them holds no replica of it (of group 0, the slot map's, a nonvoter one); 0: every node votes in every group"},
	{"cluster-balance-leaders", "yes", "with several groups, hand leaderships over so that each node leads its share: yes|no (no: place them with CLUSTER FAILOVER)"},
}

// boolFlags are settings given as bare flags (--repair), not flag=value.
var boolFlags = map[string]bool{"repair": true, "cluster-bootstrap": true}

// loadConfig merges flags > DELAYD_* environment > YAML file > defaults.
func loadConfig(args []string, environ []string, stderr io.Writer) (config, error) {
	fs := pflag.NewFlagSet("delayd", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "YAML config file whose keys are the flag names")
	fs.Bool("version", false, "print the version and the commit, then exit") // run answers it first; listed for --help
	for _, s := range settings {
		if boolFlags[s.name] {
			fs.Bool(s.name, false, s.help)
			continue
		}
		fs.String(s.name, s.def, s.help)
	}
	if err := fs.Parse(args); err != nil {
		var iv *pflag.InvalidValueError
		if errors.As(err, &iv) && iv.GetFlag().Value.Type() == "bool" {
			// pflag's own: invalid argument "x" for "--repair" flag: strconv.ParseBool: ...
			return config{}, fmt.Errorf("--%s: %q is not true or false (it takes no value: --%s)", iv.GetFlag().Name, iv.GetValue(), iv.GetFlag().Name)
		}
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	v := viper.New()
	for _, s := range settings {
		v.SetDefault(s.name, s.def)
	}
	// Viper reads the process environment; tests pass their own, so look the
	// variables up here instead of AutomaticEnv.
	env := map[string]string{}
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok {
			env[k] = val
		}
	}
	if *configFile == "" {
		*configFile = env["DELAYD_CONFIG"]
	}
	if *configFile != "" {
		v.SetConfigFile(*configFile)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return config{}, fmt.Errorf("config file %s: %w", *configFile, err)
		}
		known := map[string]bool{}
		for _, s := range settings {
			known[s.name] = true
		}
		for _, k := range v.AllKeys() {
			if !known[k] {
				return config{}, fmt.Errorf("config file %s: unknown setting %q", *configFile, k)
			}
		}
	}
	for _, s := range settings {
		if val, ok := env["DELAYD_"+strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))]; ok {
			v.Set(s.name, val) // beats the file, loses to a flag (below)
		}
	}
	fs.Visit(func(f *pflag.Flag) {
		if f.Name != "config" {
			v.Set(f.Name, f.Value.String())
		}
	})

	c := config{ConfigFile: *configFile}
	// Each bad value is one error (one line, main prints them) that names
	// where it was given: --port, DELAYD_PORT, or the file. The checks that
	// combine settings run only once every value is good: with --port abc,
	// "port and tls-port are both 0" would be about a 0 no one wrote.
	var errs []error
	get := func(name string) string { return strings.TrimSpace(v.GetString(name)) }
	bad := func(name, format string, a ...any) {
		src, key := name, "DELAYD_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		_, inEnv := env[key]
		switch {
		case fs.Changed(name):
			src = "--" + name
		case inEnv:
			src = key
		case *configFile != "" && v.InConfig(name):
			src = name + " in " + *configFile
		}
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{src}, a...)...))
	}
	num := func(name string, min int64) int64 {
		n, err := strconv.ParseInt(get(name), 10, 64)
		if err != nil || n < min {
			bad(name, "%q is not an integer >= %d", get(name), min)
		}
		return n
	}
	port := func(name string) int {
		n, err := strconv.ParseInt(get(name), 10, 64)
		if err != nil || n < 0 || n > 65535 {
			bad(name, "%q is not a TCP port (0 to 65535)", get(name))
		}
		return int(n)
	}
	yesno := func(name string) bool {
		switch strings.ToLower(get(name)) {
		case "yes", "true", "1", "on":
			return true
		case "no", "false", "0", "off":
			return false
		}
		bad(name, "%q is not yes or no", get(name))
		return false
	}
	oneOf := func(name string, allowed ...string) string {
		val := strings.ToLower(get(name))
		for _, a := range allowed {
			if val == a {
				return val
			}
		}
		bad(name, "%q is not one of %s", get(name), strings.Join(allowed, "|"))
		return val
	}
	c.Bind = get("bind")
	c.Port = port("port")
	c.Dir = get("dir")
	c.AppendOnly = yesno("appendonly")
	c.AppendFsync = oneOf("appendfsync", "always", "everysec", "no")
	c.RequirePass = v.GetString("requirepass")
	c.ACLFile = v.GetString("aclfile")
	c.MaxPayloadBytes = int(num("max-payload-bytes", 1))
	c.MaxJobs = int(num("max-jobs", 0))
	c.MaxClients = int(num("max-clients", 1))
	if n, err := commands.ParseMemory(get("maxmemory")); err != nil {
		bad("maxmemory", "%v", err)
	} else {
		c.MaxMemory = n
	}
	c.ProtectedMode = yesno("protected-mode")
	c.Timeout = num("timeout", 0)
	if lim, text, err := resp.ParseOutputLimit(get("client-output-buffer-limit")); err != nil {
		bad("client-output-buffer-limit", "%v", err)
	} else {
		c.OutputLimit, c.OutputLimitText = lim, text
	}
	c.AckTimeout = num("ack-timeout", 0)
	c.Tick = num("tick", 1)
	c.AutoRewritePercentage = int(num("auto-rewrite-percentage", 0))
	c.AutoRewriteMinSize = num("auto-rewrite-min-size", 0)
	c.SegmentSize = num("aof-segment-size", 4096)
	c.Horizon = num("horizon", 0)
	c.FarBuckets = yesno("far-buckets")
	c.Repair = yesno("repair")
	c.SlowlogSlowerThan = num("slowlog-log-slower-than", -1)
	c.SlowlogMaxLen = int(num("slowlog-max-len", 0))
	c.LogLevel = oneOf("log-level", "debug", "info", "warn", "error")
	c.LogFormat = oneOf("log-format", "json", "console", "auto")
	c.HTTPAddr = get("http-addr")
	_, inEnv := env["DELAYD_HTTP_ADDR"]
	c.HTTPAddrGiven = fs.Changed("http-addr") || inEnv || v.InConfig("http-addr")
	c.HTTPMonitoringAuth = yesno("http-monitoring-auth")
	c.MetricsMaxQueues = int(num("metrics-max-queues", 0))
	c.TLSPort = port("tls-port")
	c.TLSCertFile = get("tls-cert-file")
	c.TLSKeyFile = get("tls-key-file")
	c.TLSCACertFile = get("tls-ca-cert-file")
	c.TLSAuthClients = oneOf("tls-auth-clients", "yes", "no", "optional")
	c.ClusterEnabled = yesno("cluster-enabled")
	c.ClusterNodeID = get("cluster-node-id")
	c.ClusterBusAddr = get("cluster-bus-addr")
	c.ClusterAnnounceAddr = get("cluster-announce-addr")
	c.ClusterAnnounceBusAddr = get("cluster-announce-bus-addr")
	c.ClusterBootstrap = yesno("cluster-bootstrap")
	c.ClusterJoin = get("cluster-join")
	c.ClusterAck = oneOf("cluster-ack", "quorum", "leader")
	c.ClusterElectionTimeout = num("cluster-election-timeout", 50)
	c.ClusterSnapshotEntries = num("cluster-snapshot-entries", 16)
	c.ClusterGroups = int(num("cluster-groups", 1))
	c.ClusterGroupPortStep = int(num("cluster-group-port-step", 1))
	c.ClusterBalanceLeaders = yesno("cluster-balance-leaders")
	c.ClusterReplicas = int(num("cluster-replicas", 0))
	if c.ClusterGroups > cluster.MaxGroups {
		bad("cluster-groups", "at most %d", cluster.MaxGroups)
	}
	if c.MaxPayloadBytes > 64<<20 {
		// One job is one log record, and a record holds at most 64 MiB.
		bad("max-payload-bytes", "at most 67108864 (64 MiB)")
	}
	if c.ClusterNodeID != "" && strings.ContainsAny(c.ClusterNodeID, " \t\r\n") {
		bad("cluster-node-id", "no spaces")
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}

	// Checks across settings, every value good.
	errs = append(errs, c.checkTLS()...)
	if c.ClusterEnabled {
		host := c.Bind
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		// Without a plain port, clients and the bus default go by the TLS one.
		port := c.Port
		if port == 0 {
			port = c.TLSPort
		}
		if c.ClusterBusAddr == "" {
			if port+10000 > 65535 {
				errs = append(errs, fmt.Errorf("cluster-bus-addr: port %d + 10000 is not a TCP port; set it", port))
			}
			c.ClusterBusAddr = net.JoinHostPort(c.Bind, strconv.Itoa(port+10000))
		}
		if c.ClusterAnnounceAddr == "" {
			c.ClusterAnnounceAddr = net.JoinHostPort(host, strconv.Itoa(port))
		}
		if c.ClusterGroups > 1 && c.Port == 0 {
			// Each group has its own plain port (docs/decisions/raft-groups.md).
			errs = append(errs, errors.New("cluster-groups: several groups need a plain port; a TLS-only cluster (port 0) runs one group"))
		}
		if c.ClusterAnnounceBusAddr == "" {
			h, p, err := net.SplitHostPort(c.ClusterBusAddr)
			if err != nil {
				errs = append(errs, fmt.Errorf("cluster-bus-addr: %v", err))
			}
			if h == "" || h == "0.0.0.0" || h == "::" {
				// A bus on every interface is dialled where clients are
				// sent: the README's three machines give only
				// --cluster-announce-addr, and a bus announced as
				// 127.0.0.1 would be one no other machine can reach.
				h = host
				if ah, _, err := net.SplitHostPort(c.ClusterAnnounceAddr); err == nil && ah != "" {
					h = ah
				}
			}
			c.ClusterAnnounceBusAddr = net.JoinHostPort(h, p)
		}
	}
	return c, errors.Join(errs...)
}

// view is the read-only settings map CONFIG GET shows.
func (c config) view() map[string]string {
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	pass := ""
	if c.RequirePass != "" {
		pass = "(set)" // never echo the password
	}
	return map[string]string{
		"cluster-enabled":           yn(c.ClusterEnabled),
		"cluster-node-id":           c.ClusterNodeID,
		"cluster-bus-addr":          c.ClusterBusAddr,
		"cluster-announce-addr":     c.ClusterAnnounceAddr,
		"cluster-announce-bus-addr": c.ClusterAnnounceBusAddr,
		"cluster-join":              c.ClusterJoin,
		"cluster-ack":               c.ClusterAck,
		"cluster-election-timeout":  strconv.FormatInt(c.ClusterElectionTimeout, 10),
		"cluster-groups":            strconv.Itoa(c.ClusterGroups),
		"cluster-group-port-step":   strconv.Itoa(c.ClusterGroupPortStep),
		"cluster-balance-leaders":   yn(c.ClusterBalanceLeaders),
		"cluster-replicas":          strconv.Itoa(c.ClusterReplicas),
		"bind":                      c.Bind,
		"port":                      strconv.Itoa(c.Port),
		"dir":                       c.Dir,
		"appendonly":                yn(c.AppendOnly),
		"appendfsync":               c.AppendFsync,
		"requirepass":               pass,
		"aclfile":                   c.ACLFile,
		"max-payload-bytes":         strconv.Itoa(c.MaxPayloadBytes),
		"max-jobs":                  strconv.Itoa(c.MaxJobs),
		"max-clients":               strconv.Itoa(c.MaxClients),
		"maxclients":                strconv.Itoa(c.MaxClients),
		"maxmemory":                 strconv.FormatInt(c.MaxMemory, 10),
		"ack-timeout":               strconv.FormatInt(c.AckTimeout, 10),
		"tick":                      strconv.FormatInt(c.Tick, 10),
		"auto-rewrite-percentage":   strconv.Itoa(c.AutoRewritePercentage),
		"auto-rewrite-min-size":     strconv.FormatInt(c.AutoRewriteMinSize, 10),
		"aof-segment-size":          strconv.FormatInt(c.SegmentSize, 10),
		"horizon":                   strconv.FormatInt(c.Horizon, 10),
		"far-buckets":               yn(c.FarBuckets),
		"slowlog-log-slower-than":   strconv.FormatInt(c.SlowlogSlowerThan, 10),
		"slowlog-max-len":           strconv.Itoa(c.SlowlogMaxLen),
		"log-level":                 c.LogLevel,
		"log-format":                c.LogFormat,
		"http-addr":                 c.HTTPAddr,
		"http-monitoring-auth":      yn(c.HTTPMonitoringAuth),
		"metrics-max-queues":        strconv.Itoa(c.MetricsMaxQueues),
		"tls-port":                  strconv.Itoa(c.TLSPort),
		"tls-cert-file":             c.TLSCertFile,
		"tls-key-file":              c.TLSKeyFile,
		"tls-ca-cert-file":          c.TLSCACertFile,
		"tls-auth-clients":          c.TLSAuthClients,
		// Redis's names, which redis-benchmark and other tools ask for.
		"save": "",

		// Connection limits (resp/limits.go).
		"protected-mode":             yn(c.ProtectedMode),
		"timeout":                    strconv.FormatInt(c.Timeout, 10),
		"client-output-buffer-limit": c.OutputLimitText,
	}
}
