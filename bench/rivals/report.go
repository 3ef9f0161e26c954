package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// result is one system's figures for one case.
type result struct {
	System      string  `json:"system"`
	Label       string  `json:"label"`
	Case        string  `json:"case"`
	Jobs        int     `json:"jobs"`
	Added       int     `json:"added"`
	Completed   int     `json:"completed"` // distinct jobs completed by the deadline
	Dups        int     `json:"duplicates"`
	Early       int     `json:"early"` // completed before their due time
	Lost        int     `json:"lost"`  // added, never completed by the deadline
	Errors      int     `json:"errors"`
	FirstError  string  `json:"firstError,omitempty"`
	FillSec     float64 `json:"fillSec"`
	AddRate     float64 `json:"addsPerSec"`                 // steady: the rate producers reached (the target may be more than a slow client can add)
	Overrun     bool    `json:"burstFillOverran,omitempty"` // burst: the fill ended after the due time
	PerSec      float64 `json:"completedPerSec,omitempty"`  // burst: completed / (last completion - due time)
	P50         float64 `json:"p50ms"`
	P90         float64 `json:"p90ms"`
	P99         float64 `json:"p99ms"`
	P999        float64 `json:"p999ms"`
	Max         float64 `json:"maxms"`
	Min         float64 `json:"minms"`
	ServerCPU   float64 `json:"serverCPUSec"`
	CPUPerJobUs float64 `json:"serverCPUPerJobUs"`
	ClientCPU   float64 `json:"clientCPUSec"`

	fill time.Duration
	late []float64 // ms, sorted, one per distinct job
}

func summarize(sys system, p *plan, rec *recorder, ph phases, server, client time.Duration) *result {
	r := &result{System: sys.name, Label: sys.label, Case: p.Case, Jobs: p.Jobs, Added: ph.Added,
		Errors: ph.Errors, FirstError: ph.FirstError,
		ServerCPU: server.Seconds(), ClientCPU: client.Seconds()}
	r.fill = time.Duration(ph.FillEnd-ph.FillStart) * time.Microsecond
	r.FillSec = r.fill.Seconds()
	if r.FillSec > 0 {
		r.AddRate = float64(r.Added) / r.FillSec
	}
	// Each job's first completion counts; later ones are duplicates.
	first := make(map[int32]bool, len(rec.recs))
	var lastDone int64
	for _, c := range rec.recs {
		if first[c.id] {
			r.Dups++
			continue
		}
		first[c.id] = true
		late := float64(c.done-c.dueMs*1000) / 1000
		if late < 0 {
			r.Early++
		}
		r.late = append(r.late, late)
		lastDone = max(lastDone, c.done)
	}
	r.Completed = len(r.late)
	// An add that failed after all (a retried write whose first try landed)
	// can complete; it is not a negative loss.
	r.Lost = max(r.Added-r.Completed, 0)
	slices.Sort(r.late)
	if n := len(r.late); n > 0 {
		r.P50, r.P90, r.P99, r.P999 = quantile(r.late, .5), quantile(r.late, .9), quantile(r.late, .99), quantile(r.late, .999)
		r.Min, r.Max = r.late[0], r.late[n-1]
	}
	if r.Completed > 0 {
		r.CPUPerJobUs = server.Seconds() * 1e6 / float64(r.Completed)
	}
	if p.Case == "burst" {
		r.Overrun = ph.FillEnd > ph.DueMs*1000
		// From the due time, not the first completion: how long the
		// backlog takes to clear includes how long the system takes to notice it.
		if d := lastDone - ph.DueMs*1000; d > 0 {
			r.PerSec = float64(r.Completed) / (float64(d) / 1e6)
		}
	}
	return r
}

// quantile is the nearest-rank quantile of sorted xs.
func quantile(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func (r *result) oneLine() string {
	s := fmt.Sprintf("completed %d/%d early %d lost %d dup %d; late p50 %s p99 %s max %s ms; server CPU %.2f s (%.0f µs/job), clients %.2f s; fill %.1f s",
		r.Completed, r.Added, r.Early, r.Lost, r.Dups, ms(r.P50), ms(r.P99), ms(r.Max), r.ServerCPU, r.CPUPerJobUs, r.ClientCPU, r.FillSec)
	if r.Case == "burst" {
		s += fmt.Sprintf("; %.0f jobs/s", r.PerSec)
		if r.Overrun {
			s += " (fill overran the due time)"
		}
	}
	if r.Errors > 0 {
		s += fmt.Sprintf("; %d errors, first: %s", r.Errors, r.FirstError)
	}
	return s
}

// ms prints a lateness: two significant figures below 10 ms, whole ms above.
func ms(v float64) string {
	if math.Abs(v) < 10 {
		return fmt.Sprintf("%.2g", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func report(cfg *config, m machineInfo, results []*result) string {
	var b strings.Builder
	get := func(sys, cs string) *result {
		for _, r := range results {
			if r.System == sys && r.Case == cs {
				return r
			}
		}
		return nil
	}
	steadyJobs := int(float64(cfg.rate) * cfg.steady.Seconds())
	fmt.Fprintf(&b, "\n## The rivals race\n\n")
	fmt.Fprintf(&b, "%d producers, %d workers; burst and spread: %d jobs; steady: %d jobs/s for %s (%d jobs), delays %s to %s. "+
		"Servers pinned to CPU %s, clients to the rest (run.sh: CPU 1); `appendfsync everysec` on both servers; a fresh server per system and case; "+
		"delayd's GOMAXPROCS left to Go (it follows the pinning: 1). Lateness = completion (after the ack, where there is one) minus due time.\n\n",
		cfg.producers, cfg.workers, cfg.jobs, cfg.rate, cfg.steady, steadyJobs, cfg.minDelay, cfg.maxDelay, cfg.serverCPU)
	fmt.Fprintf(&b, "| system | all due at once: completed/s | delays over 0 to %s: late p50 / p99 / max ms | %d jobs/s: late p50 / p99 ms | early (burst / spread / steady) | lost | server CPU s (spread case) | server CPU µs per job (burst / spread / steady) |\n",
		cfg.span, cfg.rate)
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, name := range cfg.systems {
		var label string
		cells := make([]string, 7)
		for i := range cells {
			cells[i] = "-"
		}
		var early, lost, cpu []string
		for _, cs := range []string{"burst", "spread", "steady"} {
			r := get(name, cs)
			if r == nil {
				early, lost, cpu = append(early, "-"), append(lost, "-"), append(cpu, "-")
				continue
			}
			label = r.Label
			early = append(early, fmt.Sprint(r.Early))
			lost = append(lost, fmt.Sprint(r.Lost))
			cpu = append(cpu, fmt.Sprintf("%.0f", r.CPUPerJobUs))
			switch cs {
			case "burst":
				cells[0] = fmt.Sprintf("%.0f", r.PerSec)
				if r.Overrun {
					cells[0] += " (fill overran)"
				}
			case "spread":
				cells[1] = fmt.Sprintf("%s / %s / %s", ms(r.P50), ms(r.P99), ms(r.Max))
				cells[5] = fmt.Sprintf("%.2f", r.ServerCPU)
			case "steady":
				cells[2] = fmt.Sprintf("%s / %s", ms(r.P50), ms(r.P99))
				if r.AddRate < 0.9*float64(cfg.rate) {
					cells[2] += fmt.Sprintf(" (adds reached only %.0f/s)", r.AddRate)
				}
			}
		}
		if label == "" {
			continue
		}
		cells[3], cells[4], cells[6] = strings.Join(early, " / "), strings.Join(lost, " / "), strings.Join(cpu, " / ")
		fmt.Fprintf(&b, "| %s | %s |\n", label, strings.Join(cells, " | "))
	}
	fmt.Fprintf(&b, "\nMachine: %s.\n", m)
	if cfg.note != "" {
		fmt.Fprintf(&b, "%s\n", cfg.note)
	}
	b.WriteString("\n<details><summary>Every figure</summary>\n\n")
	b.WriteString("| system | case | added | completed | dup | early | lost | fill s | adds/s | p50 | p90 | p99 | p99.9 | max | min ms | server CPU s | µs/job | client CPU s | errors |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %.2f | %.0f | %s | %s | %s | %s | %s | %s | %.2f | %.0f | %.2f | %d |\n",
			r.System, r.Case, r.Added, r.Completed, r.Dups, r.Early, r.Lost, r.FillSec, r.AddRate,
			ms(r.P50), ms(r.P90), ms(r.P99), ms(r.P999), ms(r.Max), ms(r.Min), r.ServerCPU, r.CPUPerJobUs, r.ClientCPU, r.Errors)
	}
	b.WriteString("\n</details>\n")
	return b.String()
}

func writeOut(cfg *config, md string, results []*result) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	var pngs []string
	for _, name := range cfg.systems {
		var rs []*result
		for _, r := range results {
			if r.System == name && r.Case != "burst" {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		f := name + ".png"
		if err := plotSystem(filepath.Join(cfg.out, f), rs); err != nil {
			return err
		}
		pngs = append(pngs, fmt.Sprintf("![%s](%s)", rs[0].Label, f))
	}
	for _, cs := range []string{"spread", "steady"} {
		var rs []*result
		for _, r := range results {
			if r.Case == cs {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		f := "all-" + cs + ".png"
		if err := plotCase(filepath.Join(cfg.out, f), cs, rs); err != nil {
			return err
		}
		pngs = append(pngs, fmt.Sprintf("![all systems, %s case](%s)", cs, f))
	}
	doc := "# delayd against its rivals\n\nWritten by `bench/rivals/run.sh` (see bench/rivals/README.md for what it measures).\n" +
		md + "\n## Lateness CDFs\n\n" + strings.Join(pngs, "\n\n") + "\n"
	if err := os.WriteFile(filepath.Join(cfg.out, "results.md"), []byte(doc), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.out, "results.json"), js, 0o644)
}
