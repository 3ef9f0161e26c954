package web

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
)

// The files in deploy/: a Grafana dashboard and Prometheus alert rules.
// Every query in them must name only metrics /metrics exports, and parse.

const (
	dashboardFile = "../deploy/grafana-dashboard.json"
	alertsFile    = "../deploy/prometheus-alerts.yml"
)

// exported is every metric name /metrics shows (the log's too), with a
// histogram's _bucket, _sum and _count series.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	eng, err := engine.New(engine.Options{AppendOnly: true, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := commands.New(commands.Options{Engine: eng, Log: zerolog.Nop()})
	s := New(Options{Dispatcher: d, MaxQueues: 10})
	if _, err := s.Do(t.Context(), "DELAY.ADD", "q", "0", "x"); err != nil {
		t.Fatal(err)
	}
	mfs, err := s.registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+suffix] = true
			}
		}
	}
	if !names["delayd_log_size_bytes"] || !names["delayd_job_lateness_seconds_bucket"] || !names["delayd_commands_total"] {
		t.Fatalf("the registry lacks metrics: %v", names)
	}
	return names
}

// dashboardExprs are the PromQL queries of the dashboard: every "expr" in
// it, panels' and annotations'.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return exprs
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string `yaml:"alert,omitempty"`
			Record string `yaml:"record,omitempty"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func alertExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var exprs []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// metricRef finds the metric names a query uses: ours, Go's and the
// process's (labels, functions and keywords do not start so).
var metricRef = regexp.MustCompile(`\b(?:delayd|go|process)_[a-zA-Z0-9_]+\b`)

func TestDeployQueriesNameExportedMetrics(t *testing.T) {
	names := exported(t)
	for file, exprs := range map[string][]string{dashboardFile: dashboardExprs(t), alertsFile: alertExprs(t)} {
		if len(exprs) < 5 {
			t.Errorf("%s: only %d queries", file, len(exprs))
		}
		for _, e := range exprs {
			refs := metricRef.FindAllString(e, -1)
			if len(refs) == 0 {
				t.Errorf("%s: %q names no delayd metric", file, e)
			}
			for _, r := range refs {
				if !names[r] {
					t.Errorf("%s: %q names %s, which /metrics does not export", file, e, r)
				}
			}
		}
	}
}

// TestDeployPromtool: promtool check rules passes the alert rules, and the
// dashboard's queries (as recording rules, Grafana's variables filled in),
// so every query parses as PromQL.
func TestDeployPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("DELAYD_COMPAT_REQUIRE") == "1" {
			t.Fatal("promtool not installed (apt-get install prometheus), and DELAYD_COMPAT_REQUIRE=1")
		}
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	check := func(path string) {
		t.Helper()
		if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", path, err, out)
		}
	}
	check(alertsFile)
	var rf struct {
		Groups []map[string]any `yaml:"groups"`
	}
	var rules []map[string]string
	fill := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	for i, e := range dashboardExprs(t) {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:query_%d", i), "expr": fill.Replace(e)})
	}
	rf.Groups = append(rf.Groups, map[string]any{"name": "dashboard", "rules": rules})
	b, err := yaml.Marshal(rf)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	check(path)
}
