// Command rivals races delayd against what users would pick instead for
// delayed jobs: delayd with DELAY.POP + ACK (one job at a time, with the
// ACK sent with the next POP, and in DELAY.MPOP batches), delayd popped with BLPOP, a
// Redis sorted set with a Lua mover and BLPOP workers, asynq (defaults and
// 10 ms check intervals) and BullMQ. Each system and case gets a fresh
// server pinned to one CPU; this process (and BullMQ's node) runs every
// client, and should itself be pinned to the other CPU (run.sh does both).
//
// Lateness is a job's completion time (after its ACK where the system has
// one) minus its due time, both unix clock readings on this machine; see
// README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type config struct {
	jobs, producers, workers int
	span                     time.Duration // spread case: delays uniform over [0, span]
	rate                     int           // steady case: jobs per second
	steady                   time.Duration // steady case: how long producers add
	minDelay, maxDelay       time.Duration // steady case: delays uniform over [min, max]
	grace                    time.Duration // after the last due time, how long a job may take before it counts as lost
	burstLead                time.Duration // burst case: the due time is the fill's start plus this (0: from the spread case's fill)
	systems, cases           []string
	delayd, redis, node      string
	bullmqDir, out, work     string
	serverCPU                string
	note                     string
	caseLimit                time.Duration
}

func main() {
	log.SetFlags(log.Ltime)
	var cfg config
	var systems, cases string
	flag.IntVar(&cfg.jobs, "jobs", 100000, "jobs in the burst and spread cases")
	flag.IntVar(&cfg.producers, "producers", 4, "producer connections")
	flag.IntVar(&cfg.workers, "workers", 8, "workers (each with its own connection)")
	flag.DurationVar(&cfg.span, "span", 10*time.Second, "spread case: delays uniform over 0 to span")
	flag.IntVar(&cfg.rate, "rate", 1000, "steady case: jobs added per second")
	flag.DurationVar(&cfg.steady, "steady", 20*time.Second, "steady case: how long producers add")
	flag.DurationVar(&cfg.minDelay, "min-delay", 100*time.Millisecond, "steady case: shortest delay")
	flag.DurationVar(&cfg.maxDelay, "max-delay", time.Second, "steady case: longest delay")
	flag.DurationVar(&cfg.grace, "grace", 15*time.Second, "the drain ends this long after the last due time once no job completed for as long; jobs not completed by then count as lost")
	flag.DurationVar(&cfg.burstLead, "burst-lead", 0, "burst case: due time = fill start + this (0: 1 s + 1.5x the spread case's fill time)")
	flag.StringVar(&systems, "systems", "delayd-ack,delayd-pipe,delayd-mpop,delayd-blpop,redis-zset,asynq,asynq-10ms,bullmq", "systems to race")
	flag.IntVar(&mpopCount, "mpop-count", mpopCount, "delayd-mpop: jobs per DELAY.MPOP (COUNT)")
	flag.StringVar(&cases, "cases", "spread,steady,burst", "cases to run, in order (burst after spread: its due time is sized from the spread fill)")
	flag.StringVar(&cfg.delayd, "delayd", "", "delayd binary (built from the repo root)")
	flag.StringVar(&cfg.redis, "redis", "redis-server", "redis-server binary")
	flag.StringVar(&cfg.node, "node", "node", "node binary")
	flag.StringVar(&cfg.bullmqDir, "bullmq", "bullmq", "directory of race.js and its node_modules")
	flag.StringVar(&cfg.out, "out", "", "directory for results.md, results.json and the PNGs (empty: print only)")
	flag.StringVar(&cfg.serverCPU, "server-cpu", "0", "CPU list the servers are pinned to (taskset -c)")
	flag.StringVar(&cfg.note, "note", "", "a line about the conditions, printed under the table")
	flag.DurationVar(&cfg.caseLimit, "case-limit", 15*time.Minute, "hard limit on one case of one system")
	flag.Parse()
	cfg.systems = strings.Split(systems, ",")
	cfg.cases = strings.Split(cases, ",")
	if cfg.delayd == "" {
		log.Fatal("-delayd is required (run.sh builds it)")
	}
	if cfg.minDelay > cfg.maxDelay || cfg.jobs < 1 || cfg.producers < 1 || cfg.workers < 1 || cfg.rate < 1 {
		log.Fatal("bad scenario flags")
	}
	bullmqDirForVersion = cfg.bullmqDir
	for i := range allSystems {
		allSystems[i].label = strings.NewReplacer("{asynq}", modVersion("github.com/hibiken/asynq"),
			"{bullmq}", npmVersion("bullmq"), "{mpop}", strconv.Itoa(mpopCount)).Replace(allSystems[i].label)
	}
	var err error
	if cfg.work, err = os.MkdirTemp("", "rivals-"); err != nil {
		log.Fatal(err)
	}
	// Servers die with this process (Pdeathsig); their data goes with work.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; os.RemoveAll(cfg.work); os.Exit(130) }()
	defer os.RemoveAll(cfg.work)

	m := machine(&cfg)
	log.Printf("%s", m)
	var results []*result
	for _, name := range cfg.systems {
		sys, ok := findSystem(name)
		if !ok {
			log.Fatalf("unknown system %q", name)
		}
		var spreadFill time.Duration
		for _, cs := range cfg.cases {
			r, err := runCase(sys, cs, &cfg, spreadFill)
			if err != nil {
				// One system failing (a client that cannot reach its
				// server, a case over its limit) must not cost the others'.
				log.Printf("%-12s %-6s FAILED: %v", sys.name, cs, err)
				continue
			}
			if cs == "spread" {
				spreadFill = r.fill
			}
			log.Printf("%-12s %-6s %s", sys.name, cs, r.oneLine())
			results = append(results, r)
			// Written after every case, so a long run cut short keeps
			// what it measured.
			if cfg.out != "" {
				if err := writeOut(&cfg, report(&cfg, m, results), results); err != nil {
					log.Fatal(err)
				}
			}
		}
	}
	fmt.Print(report(&cfg, m, results))
}

func findSystem(name string) (system, bool) {
	for _, s := range allSystems {
		if s.name == name {
			return s, true
		}
	}
	return system{}, false
}

// spreadHash gives job id its delay; the same function is in race.js, so
// every system gets the same delays for the same ids.
func spreadHash(id int) uint32 { return uint32(id+1) * 0x9E3779B1 }

// plan is one case as both runners see it: when each job is added and its delay.
type plan struct {
	Case       string  `json:"case"`
	Jobs       int     `json:"jobs"`
	Producers  int     `json:"producers"`
	Workers    int     `json:"workers"`
	SpanMs     int64   `json:"spanMs"`     // spread: delays 0..span
	Rate       float64 `json:"rate"`       // steady: jobs/s; 0 = as fast as producers go
	MinDelayMs int64   `json:"minDelayMs"` // steady
	MaxDelayMs int64   `json:"maxDelayMs"` // steady
	BurstLead  int64   `json:"burstLeadMs"`
	GraceMs    int64   `json:"graceMs"`
	Port       string  `json:"port"`
}

func (p *plan) delayMs(id int) int64 {
	switch p.Case {
	case "spread":
		return int64(spreadHash(id) % uint32(p.SpanMs+1))
	case "steady":
		return p.MinDelayMs + int64(spreadHash(id)%uint32(p.MaxDelayMs-p.MinDelayMs+1))
	}
	return 0
}

func newPlan(cs string, cfg *config, spreadFill time.Duration) (*plan, error) {
	p := &plan{Case: cs, Jobs: cfg.jobs, Producers: cfg.producers, Workers: cfg.workers,
		GraceMs: cfg.grace.Milliseconds()}
	switch cs {
	case "spread":
		p.SpanMs = cfg.span.Milliseconds()
	case "steady":
		p.Rate = float64(cfg.rate)
		p.Jobs = int(float64(cfg.rate) * cfg.steady.Seconds())
		p.MinDelayMs, p.MaxDelayMs = cfg.minDelay.Milliseconds(), cfg.maxDelay.Milliseconds()
	case "burst":
		lead := cfg.burstLead
		if lead == 0 {
			lead = time.Second + spreadFill*3/2
			if spreadFill == 0 {
				lead = time.Second + time.Duration(cfg.jobs)*time.Second/5000
			}
		}
		p.BurstLead = lead.Milliseconds()
	default:
		return nil, fmt.Errorf("unknown case %q (spread, burst, steady)", cs)
	}
	return p, nil
}

// phases is what a runner reports besides completions.
type phases struct {
	FillStart  int64  `json:"fillStart"` // unix µs
	FillEnd    int64  `json:"fillEnd"`   // unix µs
	DueMs      int64  `json:"dueMs"`     // burst: the one due time
	Added      int    `json:"added"`
	AddErrors  int    `json:"addErrors"`
	Errors     int    `json:"errors"`
	FirstError string `json:"firstError"`
}

func runCase(sys system, cs string, cfg *config, spreadFill time.Duration) (*result, error) {
	p, err := newPlan(cs, cfg, spreadFill)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(sys.server, cfg)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	_, p.Port, _ = strings.Cut(srv.addr, ":")
	server0, err := srv.cpu()
	if err != nil {
		return nil, err
	}
	client0, _ := procCPU(os.Getpid())
	var rec *recorder
	var ph phases
	var clientCPU time.Duration
	if sys.node {
		rec, ph, clientCPU, err = runNode(sys, p, cfg)
	} else {
		rec, ph, err = runGo(sys, p, srv.addr, cfg)
		c1, _ := procCPU(os.Getpid())
		clientCPU = c1 - client0
	}
	if err != nil {
		return nil, err
	}
	server1, err := srv.cpu()
	if err != nil {
		return nil, err
	}
	return summarize(sys, p, rec, ph, server1-server0, clientCPU), nil
}

func runGo(sys system, p *plan, addr string, cfg *config) (*recorder, phases, error) {
	var ph phases
	rec := newRecorder(p.Jobs)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.caseLimit)
	defer cancel()
	prods := make([]producer, p.Producers)
	for i := range prods {
		pr, err := sys.newProducer(addr)
		if err != nil {
			return nil, ph, err
		}
		defer pr.Close()
		prods[i] = pr
	}
	// Workers are up and waiting before the first add, in every case, as
	// a fleet is in production.
	stop, err := sys.startWorkers(addr, p.Workers, rec)
	if err != nil {
		return nil, ph, err
	}
	start := time.Now()
	ph.FillStart = start.UnixMicro()
	if p.Case == "burst" {
		ph.DueMs = start.Add(time.Duration(p.BurstLead)*time.Millisecond).UnixMilli() + 1
	}
	var lastDue atomic.Int64
	var added, addErrs atomic.Int64
	var firstAddErr atomic.Value
	var wg sync.WaitGroup
	for i, pr := range prods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := i; id < p.Jobs && ctx.Err() == nil; id += p.Producers {
				if p.Rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(float64(id) / p.Rate * float64(time.Second)))))
				}
				due := ph.DueMs
				if p.Case != "burst" {
					due = time.Now().UnixMilli() + p.delayMs(id)
				}
				if err := pr.add(ctx, id, due); err != nil {
					if addErrs.Add(1) == 1 {
						firstAddErr.Store(err.Error())
					}
					continue
				}
				added.Add(1)
				for {
					m := lastDue.Load()
					if due <= m || lastDue.CompareAndSwap(m, due) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	ph.FillEnd = time.Now().UnixMicro()
	if added.Load() < int64(p.Jobs) {
		// Jobs never added can never complete: the drain ends by deadline.
		log.Printf("%s %s: %d adds failed (first: %v)", sys.name, p.Case, addErrs.Load(), firstAddErr.Load())
	}
	drain(ctx, rec, p, ph.DueMs, lastDue.Load())
	stop()
	ph.Added, ph.AddErrors = int(added.Load()), int(addErrs.Load())
	ph.Errors = int(rec.errs.Load())
	if e, ok := rec.first.Load().(string); ok {
		ph.FirstError = e
	}
	return rec, ph, nil
}

// drain waits until every job has completed, or until the last due time
// plus the grace has passed and no job completed for a grace: a system
// that is slow but moving is waited for, one that stopped is not, and what
// it never completed counts as lost.
func drain(ctx context.Context, rec *recorder, p *plan, burstDue, lastDue int64) {
	grace := time.Duration(p.GraceMs) * time.Millisecond
	due := lastDue
	if p.Case == "burst" {
		due = burstDue
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-rec.all:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if now.After(time.UnixMilli(due).Add(grace)) && now.Sub(time.UnixMicro(rec.last.Load())) > grace {
			return
		}
	}
}

// runNode runs one case of a node system in its script (BullMQ's
// bullmq/race.js), which follows the same plan and prints its completions as
// JSON.
func runNode(sys system, p *plan, cfg *config) (*recorder, phases, time.Duration, error) {
	var ph phases
	arg, _ := json.Marshal(p)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.caseLimit)
	defer cancel()
	script := filepath.Join(cfg.bullmqDir, "race.js")
	if sys.script != "" {
		script = sys.script
	}
	cmd := exec.CommandContext(ctx, cfg.node, script, string(arg))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.Output()
	if err != nil {
		return nil, ph, 0, fmt.Errorf("race.js: %w", err)
	}
	clientCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	var res struct {
		phases
		Recs []int64 `json:"recs"` // id, due ms, done µs; flat
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, ph, 0, fmt.Errorf("race.js output: %w", err)
	}
	if len(res.Recs)%3 != 0 {
		return nil, ph, 0, errors.New("race.js output: recs not in threes")
	}
	rec := newRecorder(p.Jobs)
	for i := 0; i+2 < len(res.Recs); i += 3 {
		id := int(res.Recs[i])
		if id < 0 || id >= p.Jobs {
			return nil, ph, 0, fmt.Errorf("race.js output: id %d", id)
		}
		rec.note(id, res.Recs[i+1], res.Recs[i+2])
	}
	return rec, res.phases, clientCPU, nil
}

// machineInfo is what the report records about where it ran.
type machineInfo struct {
	Date, CPU, Kernel, Go, Redis, Node, Delayd string
	Nproc                                      int
	Asynq, GoRedis, BullMQ, IORedis            string
}

func (m machineInfo) String() string {
	return fmt.Sprintf("%s; %d CPUs (%s); Linux %s; %s; redis-server %s; node %s; delayd %s; asynq %s, go-redis %s, BullMQ %s, ioredis %s",
		m.Date, m.Nproc, m.CPU, m.Kernel, m.Go, m.Redis, m.Node, m.Delayd, m.Asynq, m.GoRedis, m.BullMQ, m.IORedis)
}

func machine(cfg *config) machineInfo {
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(out))
	}
	m := machineInfo{
		Date:    time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		CPU:     cpuModel(),
		Kernel:  run("uname", "-r"),
		Go:      runtime.Version(),
		Nproc:   runtime.NumCPU(),
		Asynq:   modVersion("github.com/hibiken/asynq"),
		GoRedis: modVersion("github.com/redis/go-redis/v9"),
		BullMQ:  npmVersion("bullmq"),
		IORedis: npmVersion("ioredis"),
	}
	if n := run("nproc", "--all"); n != "?" {
		fmt.Sscan(n, &m.Nproc)
	}
	m.Redis = strings.TrimPrefix(strings.Fields(run(cfg.redis, "--version") + " ? ? ?")[2], "v=")
	m.Node = run(cfg.node, "--version")
	m.Delayd = run("git", "-C", filepath.Dir(cfg.delayd), "describe", "--always", "--dirty")
	if m.Delayd == "?" {
		m.Delayd = run("git", "describe", "--always", "--dirty")
	}
	return m
}

func modVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	return "?"
}

var bullmqDirForVersion = "bullmq"

func npmVersion(pkg string) string {
	b, err := os.ReadFile(filepath.Join(bullmqDirForVersion, "node_modules", pkg, "package.json"))
	if err != nil {
		return "?"
	}
	var v struct{ Version string }
	if json.Unmarshal(b, &v) != nil {
		return "?"
	}
	return v.Version
}
