// Command delayd is a delay server that speaks the Redis protocol: a producer
// says DELAY.ADD orders 30000 payload, and thirty seconds later a worker
// blocked in DELAY.POP orders 0 gets the job. See README.md.
//
// main wires the packages: config (viper) -> logger (zerolog) -> commands ->
// resp, listening at once; then the engine, which loads the log in the
// background while clients get LOADING; then it waits for SIGTERM, SIGINT or
// SHUTDOWN, which may come during the load too. SIGHUP reloads the TLS files.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/dirlock"
	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/record"
	"github.com/delayd/delayd/resp"
	"github.com/delayd/delayd/web"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stderr))
}

func run(args, environ []string, stderr io.Writer) int {
	if len(args) > 0 {
		if sub, ok := subcommands[args[0]]; ok {
			return sub(args[1:], stderr)
		}
	}
	for _, a := range args {
		if a == "--version" || a == "-version" {
			fmt.Println(versionLine()) // stdout, as redis-server's: $(delayd --version) holds it
			return 0
		}
	}
	cfg, err := loadConfig(args, environ, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		// One line a bad value (errors.Join puts each on its own).
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "delayd:", line)
		}
		return 2
	}
	log := newLogger(cfg, stderr)
	// The data directory's lock before anything in it is opened: a second
	// server on it would append to the same log (single node) or wait on
	// Raft's bolt files and fail with "timeout" (cluster). Without the log
	// and outside a cluster nothing is written there, so nothing is locked:
	// such servers may share the default ./data.
	if cfg.AppendOnly || cfg.ClusterEnabled {
		lk, err := dirlock.Acquire(cfg.Dir)
		if err != nil {
			// One line: the error names the directory and the holder's pid.
			log.Error().Str("dir", cfg.Dir).Msg(err.Error())
			return 1
		}
		defer lk.Release() // after the log is closed (defers run last first)
		if err := checkDirMode(cfg.Dir, cfg.ClusterEnabled); err != nil {
			log.Error().Str("dir", cfg.Dir).Msg(err.Error())
			return 1
		}
	}
	if path := envOf(environ, "DELAYD_CPUPROFILE"); path != "" {
		// For benchmarks: a CPU profile of the whole run, written at stop.
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	if path := envOf(environ, "DELAYD_TRACE"); path != "" {
		// For pauses: an execution trace of the whole run (go tool trace),
		// written as it goes; tens of MB a minute under load.
		f, err := os.Create(path)
		if err == nil && trace.Start(f) == nil {
			defer func() { trace.Stop(); f.Close() }()
		}
	}

	// Signals first: a SIGTERM while the log loads must stop cleanly too.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	// TLS before the cluster: the bus takes the same files.
	tlsStore, err := loadTLS(cfg) // main_tls.go
	if err != nil {
		log.Error().Err(err).Msg("cannot start: TLS")
		fmt.Fprintln(stderr, "delayd:", err)
		return 1
	}
	defer handleSIGHUP(log, tlsStore)()
	// In cluster mode the node's stores and bus come first: the commands
	// answer the cluster protocol from the start.
	var (
		clu      *cluster.Cluster
		ccfg     cluster.Config
		layout   cluster.Layout
		discover bool        // a first join: ask the member how many groups there are
		alone    bool        // in no group: waits to be met (CLUSTER MEET)
		gv       *groupsView // several groups (main_groups.go); nil: one
		runner   *groupRunner
	)
	if cfg.ClusterEnabled {
		ccfg = cluster.Config{
			Dir:               cfg.Dir,
			NodeID:            cfg.ClusterNodeID,
			BusAddr:           cfg.ClusterBusAddr,
			AnnounceAddr:      cfg.ClusterAnnounceAddr,
			AnnounceBusAddr:   cfg.ClusterAnnounceBusAddr,
			Bootstrap:         cfg.ClusterBootstrap,
			Join:              cfg.ClusterJoin,
			Password:          cfg.RequirePass,
			AckLeader:         cfg.ClusterAck == "leader",
			Fsync:             cfg.AppendFsync,
			ElectionTimeout:   time.Duration(cfg.ClusterElectionTimeout) * time.Millisecond,
			SnapshotThreshold: uint64(cfg.ClusterSnapshotEntries),
			SnapshotGrowth:    cfg.AutoRewritePercentage,
			SnapshotMinBytes:  cfg.AutoRewriteMinSize,
			TLS:               clusterTLS(cfg, tlsStore), // main_tls.go
			Logger:            log,
		}
		clu, err = cluster.New(ccfg)
		var has bool
		if err == nil {
			if has, err = clu.HasState(); err == nil {
				layout, discover, err = groupLayout(cfg, has)
			}
			if err != nil {
				clu.Close()
			}
		}
		if err != nil {
			log.Error().Err(err).Msg("cannot start the cluster node")
			fmt.Fprintln(stderr, "delayd:", err)
			return 1
		}
		// A node in no group (neither bootstrap nor join, nothing on disk)
		// may be met into a cluster of several groups (add-node): it has
		// the view from the start, as its dispatcher reads it.
		alone = !has && !cfg.ClusterBootstrap && cfg.ClusterJoin == "" && layout.Total() == 1
		if layout.Total() > 1 || discover || alone {
			gv = newGroupsView(layout.Groups)
			gv.clusters[0].Store(clu)
			gv.step = cfg.ClusterGroupPortStep
		}
		log.Info().Str("id", clu.ID()).Str("bus", cfg.ClusterBusAddr).Str("announce", cfg.ClusterAnnounceAddr).
			Msg("cluster mode: the Raft log is the durability")
	}
	// Listen first, then load the log in the background: meanwhile clients
	// get LOADING (they retry on it) and INFO says how far the load got.
	loading := new(engine.Loading)
	stop := make(chan string, 1)
	dopts := commands.Options{
		Loading:     loading,
		RequirePass: cfg.RequirePass,
		ACLFile:     cfg.ACLFile,
		Version:     version,
		Port:        cfg.Port,
		ConfigFile:  cfg.ConfigFile,
		MaxClients:  cfg.MaxClients,
		MaxMemory:   cfg.MaxMemory,
		// As Redis 7: protected mode stands down once the default user
		// needs a password (requirepass, or ACL SETUSER default >...); the
		// RESP and HTTP sides both ask the dispatcher.
		ProtectedMode: cfg.ProtectedMode,
		Config:        cfg.view(),
		Shutdown: func() {
			select {
			case stop <- "SHUTDOWN":
			default:
			}
		},
		Log:     log,
		Cluster: clusterView(clu),
		// Without a plain port the announced client address is the TLS
		// port (config.go), and every node of a working group is alike.
		ClusterTLS: clu != nil && cfg.Port == 0,
	}
	if gv != nil {
		dopts.Groups = gv
	}
	disp := commands.New(dopts)
	if gv != nil {
		gv.disps[0].Store(disp)
	}
	addr, tlsAddr := listenAddrs(cfg)
	ropts := resp.Options{Addr: addr, TLSAddr: tlsAddr, TLS: tlsOf(tlsStore),
		MaxClients: cfg.MaxClients, Dispatcher: disp, Log: log,
		IdleTimeout: time.Duration(cfg.Timeout) * time.Second,
		OutputLimit: cfg.OutputLimit,
	}
	if gv != nil {
		runner = newGroupRunner(ccfg, dopts, ropts, cfg, gv, layout, log) // main_addgroup.go
	}
	if err := disp.LoadACLFile(); err != nil {
		// As Redis: a bad aclfile stops the start rather than run open.
		log.Error().Err(err).Msg("cannot load the aclfile")
		fmt.Fprintln(stderr, "delayd:", err)
		return 1
	}
	srv, err := resp.Listen(ropts)
	if err != nil {
		log.Error().Err(err).Str("addr", addr).Str("tls_addr", tlsAddr).Msg("cannot listen")
		return 1
	}
	if tlsAddr != "" {
		log.Info().Str("tls_addr", srv.TLSAddr().String()).Str("tls_auth_clients", cfg.TLSAuthClients).
			Msg("TLS port; the HTTP side is HTTPS")
	}
	go func() {
		if err := srv.Serve(); err != nil {
			log.Error().Err(err).Msg("serve")
		}
	}()
	// The HTTP side listens as early: /healthz answers and /readyz says
	// "loading" while the log replays.
	var ready atomic.Bool
	if cfg.HTTPAddr != "" {
		hs := web.New(web.Options{
			Addr:       cfg.HTTPAddr,
			Dispatcher: disp,
			Password:   cfg.RequirePass,
			// --http-monitoring-auth no: Prometheus and probes need no
			// credentials even after a user is added at run time.
			OpenMonitoring: !cfg.HTTPMonitoringAuth,
			MaxQueues:      cfg.MetricsMaxQueues,
			Version:        version,
			Log:            log,
			TLS:            tlsOf(tlsStore), // with tls-port, HTTPS with the same files
			Ready: func() (bool, string) {
				if !ready.Load() {
					return false, "loading"
				}
				if gv != nil && !gv.allLed() {
					return false, "no leader known"
				}
				if clu != nil {
					if _, ok := clu.Leader(); !ok {
						return false, "no leader known"
					}
				}
				return true, "ready"
			},
		})
		switch err := hs.Listen(); {
		case err == nil:
			defer hs.Close(2 * time.Second)
			log.Info().Str("http_addr", hs.Addr().String()).Msg("http: /metrics, /healthz, /readyz, dashboard")
		case !cfg.HTTPAddrGiven:
			// The default address, taken by another delayd on this machine:
			// a second instance started with only --port still starts.
			log.Warn().Err(err).Str("http_addr", cfg.HTTPAddr).Msg("http side off: its default address is taken (set --http-addr)")
		default:
			srv.Close(time.Second)
			log.Error().Err(err).Str("http_addr", cfg.HTTPAddr).Msg("cannot listen (set --http-addr to another address, or empty to turn HTTP off)")
			return 1
		}
	}
	msg := "delayd listening"
	if cfg.AppendOnly {
		msg = "delayd listening; loading the log"
	}
	log.Info().Str("addr", srv.Addr().String()).Str("dir", cfg.Dir).Bool("appendonly", cfg.AppendOnly).
		Int("pid", os.Getpid()).Msg(msg)

	start := time.Now()
	type opened struct {
		groups []*group // one, unless the cluster has several groups
		layout cluster.Layout
		err    error
	}
	open := make(chan opened, 1)
	discoverCtx, stopDiscover := context.WithCancel(context.Background())
	defer stopDiscover()
	go func() {
		if clu != nil {
			groups := []*group{{clu: clu, disp: disp, srv: srv}}
			l, err := layout, error(nil)
			if discover {
				if l, err = discoverLayout(discoverCtx, clu, cfg, log); err == nil {
					gv.setMap(l.Groups, nil)
					if len(l.Join) > 0 && l.Join[0] != "" {
						clu.JoinThrough(l.Join[0])
					}
				}
			}
			if err == nil && gv != nil {
				gv.useSlots(clu, l.Groups)
				clu.OnGroupChange(runner.added)
				if l.Total() > 1 {
					clu.HoldReplicas(cfg.ClusterReplicas, true)
				}
				if alone {
					clu.OnMeetGroups(runner.met)
				}
			}
			for g := 1; err == nil && g < l.Total(); g++ {
				if !l.Held(g) {
					gv.remote[g].Store(&remoteGroup{g: g}) // another process's (watchRemote)
					continue
				}
				join := ""
				if g < len(l.Join) {
					join = l.Join[g]
				}
				base := ccfg
				if g >= l.Groups {
					// Added since the bootstrap (add-node): bootstrapped by
					// the node that added it, joined by its other hosts.
					base.Bootstrap = join == ""
				}
				var gr *group
				if gr, err = startGroupFront(base, dopts, ropts, cfg, gv, g, join, log); err == nil {
					groups = append(groups, gr)
				}
			}
			for i := 0; err == nil && i < len(groups); i++ {
				err = startGroupRaft(groups[i], cfg, log) // main_addgroup.go
			}
			if err == nil && discover && cfg.ClusterReplicas > 0 && len(groups) > 1 {
				groups, err = keepSeats(groups, &l, cfg, gv, log) // main_groups.go
			}
			open <- opened{groups, l, err}
			return
		}
		eng, err := engine.New(engine.Options{
			Tick:           cfg.Tick,
			FineTimer:      true,
			MaxPayload:     cfg.MaxPayloadBytes,
			MaxJobs:        cfg.MaxJobs,
			AckTimeout:     cfg.AckTimeout,
			AppendOnly:     cfg.AppendOnly,
			Dir:            cfg.Dir,
			Fsync:          cfg.AppendFsync,
			Repair:         cfg.Repair,
			RewritePercent: cfg.AutoRewritePercentage,
			RewriteMinSize: cfg.AutoRewriteMinSize,
			SegmentSize:    cfg.SegmentSize,
			Horizon:        cfg.Horizon,
			FarBuckets:     cfg.FarBuckets,
			Logger:         log,
			Loading:        loading,
		})
		open <- opened{groups: []*group{{disp: disp, srv: srv, eng: eng}}, err: err}
	}()

	var why string
	select {
	case o := <-open:
		if o.err != nil {
			srv.Close(time.Second)
			if errors.Is(o.err, record.ErrNewer) { // not damage: nothing for --repair to cut
				log.Error().Err(o.err).Msg("cannot start: the append-only log holds records of a newer delayd")
				fmt.Fprintln(stderr, "delayd:", o.err)
				return 1
			}
			log.Error().Err(o.err).Msg("cannot start: loading the append-only log failed (start with --repair to cut a damaged log at the damage)")
			fmt.Fprintln(stderr, "delayd:", o.err)
			return 1
		}
		for _, gr := range o.groups {
			gr.disp.SetEngine(gr.eng)
		}
		stopBalance := func() {}
		if gv != nil {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			runner.startedUp(ctx, o.groups, o.layout) // main_addgroup.go
			go gv.watchRemote(ctx, clu, log)          // main_groups.go
			if cfg.ClusterBalanceLeaders {
				stopBalance = gv.balanceLeaders(log)
			}
		}
		ready.Store(true)
		log.Info().
			Str("version", version).
			Str("addr", srv.Addr().String()).
			Str("dir", cfg.Dir).
			Bool("appendonly", cfg.AppendOnly).
			Str("appendfsync", cfg.AppendFsync).
			Int64("tick_ms", cfg.Tick).
			Int("max_clients", cfg.MaxClients).
			Int("max_jobs", cfg.MaxJobs).
			Int("max_payload_bytes", cfg.MaxPayloadBytes).
			Bool("requirepass", cfg.RequirePass != "").
			Int("pid", os.Getpid()).
			Dur("load_took_ms", time.Since(start)).
			Msg("delayd ready")
		select {
		case s := <-sigs:
			why = s.String()
		case why = <-stop:
		}
		stopBalance() // no hand-over started while the groups stop
		if runner != nil {
			o.groups = runner.stop() // with those started since
		}
		return stopServer(log, o.groups, why)
	case s := <-sigs:
		why = s.String()
	case why = <-stop:
	}

	// Stopped while loading: give the replay up (it reads, and cuts nothing
	// it has not finished), close the connections, and wait for it.
	start = time.Now()
	loading.Abort()
	stopDiscover()
	srv.Close(2 * time.Second)
	o := <-open
	switch {
	case o.err == nil: // it finished just as the stop came
		return stopServer(log, o.groups, why)
	case !errors.Is(o.err, engine.ErrLoadAborted):
		log.Error().Err(o.err).Msg("loading the append-only log failed")
		fmt.Fprintln(stderr, "delayd:", o.err)
		return 1
	}
	loaded, total, records := loading.Progress()
	log.Info().Str("reason", why).Int64("records", records).Int64("bytes", loaded).Int64("total_bytes", total).
		Dur("took_ms", time.Since(start)).Msg("delayd stopped while loading the log")
	return 0
}

// stopServer stops gracefully: no new clients; blocked clients get a null
// reply (the engine releases them); replies in flight go out; then the log.
func stopServer(log zerolog.Logger, groups []*group, why string) int {
	start := time.Now()
	for _, gr := range groups {
		gr.srv.StopAccepting()
	}
	for _, gr := range groups {
		gr.eng.Stop()
	}
	for _, gr := range groups {
		gr.srv.Close(2 * time.Second)
	}
	for _, gr := range groups {
		if gr.clu != nil {
			// After the connections: their replies wait for commits.
			if err := gr.clu.Close(); err != nil {
				log.Warn().Err(err).Msg("stopping raft")
			}
		}
	}
	code := 0
	for _, gr := range groups {
		if err := gr.eng.Close(); err != nil {
			log.Error().Err(err).Msg("closing the append-only log")
			code = 1
		}
	}
	if code != 0 {
		return code
	}
	log.Info().Str("reason", why).Dur("took_ms", time.Since(start)).Msg("delayd stopped")
	return 0
}

// checkLog is "delayd check-log [--dir DIR] [--repair]": it reads the log
// as start-up would, says what it found, and with --repair cuts a log damaged
// before its tail at the damage (keeping the rest as *.broken). Like
// start-up, it cuts a torn last record. Exit 0: the log is usable.
//
// It takes the data directory's lock, and so refuses to run beside a
// server on the same directory: even without --repair it may cut the
// log's tail, which on a live log is a record being written.
func checkLog(args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("delayd check-log", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "./data", "data directory")
	repair := fs.Bool("repair", false, "cut the log at the damage, keeping what was cut as *.broken")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if _, err := os.Stat(*dir); err == nil { // a missing dir has nothing to lock or cut
		lk, err := dirlock.Acquire(*dir)
		if err != nil {
			fmt.Fprintln(stderr, "delayd check-log:", err)
			return 1
		}
		defer lk.Release()
	}
	// A segmented log is checked segment by segment; a log of an earlier
	// release (one file) as it is, without the conversion a start makes.
	paths := []string{filepath.Join(*dir, engine.LogFile)}
	if ids, legacy, err := aof.ReadManifest(aof.OS, paths[0]); err == nil && !legacy {
		paths = paths[:0]
		for _, id := range ids {
			paths = append(paths, aof.SegPath(filepath.Join(*dir, engine.LogFile), id))
		}
	} else if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		fmt.Fprintln(stderr, "delayd check-log:", err)
		return 1
	}
	for _, path := range paths {
		res, err := aof.Replay(aof.OS, path, nil)
		var ce *aof.CorruptError
		switch {
		case errors.As(err, &ce) && *repair:
			cut, rerr := aof.Repair(aof.OS, path)
			if rerr != nil {
				fmt.Fprintln(stderr, "delayd check-log:", rerr)
				return 1
			}
			fmt.Fprintf(stderr, "%s: repaired: cut at offset %d, the rest kept in %s\n", path, cut, path+aof.BrokenSuffix)
			continue
		case err != nil:
			fmt.Fprintln(stderr, "delayd check-log:", err)
			return 1
		}
		fmt.Fprintf(stderr, "%s: ok: %d records, %d bytes", path, res.Records, res.Size)
		if res.TornBytes > 0 {
			fmt.Fprintf(stderr, "; a torn last record (%d bytes) was cut off", res.TornBytes)
		}
		fmt.Fprintln(stderr)
	}
	return 0
}

// clusterView is the cluster as the commands see it: a nil interface,
// not a typed nil pointer, in single-node mode.
func clusterView(c *cluster.Cluster) commands.ClusterView {
	if c == nil {
		return nil
	}
	return c
}

func envOf(environ []string, key string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func newLogger(cfg config, out io.Writer) zerolog.Logger {
	level, _ := zerolog.ParseLevel(cfg.LogLevel)
	format := cfg.LogFormat
	tty := isTerminal(out) // logging.go
	if format == "auto" {
		format = "json"
		if tty {
			format = "console"
		}
	}
	setDurationFormat(format) // logging.go
	if format == "console" {
		// Colours only on a terminal: --log-format console into a file or
		// a pipe (journald, docker logs) must not carry escape codes.
		out = zerolog.ConsoleWriter{Out: out, NoColor: !tty, TimeFormat: time.RFC3339, FormatPrepare: roundDurations}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// checkDirMode refuses a data directory written in the other mode: a
// cluster node reads only its Raft data (raft/), a single node only its log
// (delayd.aof), so either started on the other's directory would come up
// empty and say nothing, its jobs still on disk beside it.
func checkDirMode(dir string, cluster bool) error {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if cluster {
		if fi, err := os.Stat(filepath.Join(dir, engine.LogFile)); err == nil && fi.Size() > 0 {
			return fmt.Errorf("data directory %s holds a single-node log (%s, %d bytes) that a cluster node does not read; "+
				"start the cluster node on another directory and move the jobs across with "+
				"`delayd export --addr <single node> | delayd import --addr <cluster node>` (docs/operations.md), "+
				"or move %s away to start it empty",
				dir, engine.LogFile, fi.Size(), engine.LogFile)
		}
		return nil
	}
	if fi, err := os.Stat(filepath.Join(dir, "raft")); err == nil && fi.IsDir() {
		return fmt.Errorf("data directory %s holds a cluster node's Raft data (raft/) that a single node does not read; "+
			"start it with --cluster-enabled yes, or use another directory", dir)
	}
	return nil
}
