package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// flagsOf is every flag the release binary's --help lists: the only names
// a manifest may pass as --flag, as a DELAYD_ variable or as a config key.
func flagsOf(t *testing.T) map[string]bool {
	t.Helper()
	out, _ := exec.Command(serverBinary(t), "--help").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["port"] || !flags["cluster-join"] || !flags["config"] {
		t.Fatalf("--help lists no port, cluster-join or config flag:\n%s", out)
	}
	return flags
}

// args reads --name=value and --name value arguments (a bare --name is
// "true") and fails on any name the binary does not have.
func args(t *testing.T, where string, flags map[string]bool, argv []string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "--") {
			t.Errorf("%s: argument %q is not a --flag", where, a)
			continue
		}
		name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !flags[name] {
			t.Errorf("%s: --%s is not a flag of delayd", where, name)
		}
		if !ok {
			val = "true"
			if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
				val = argv[i+1]
				i++
			}
		}
		got[name] = val
	}
	return got
}

// envFlag checks that a DELAYD_ variable names a setting.
func envFlag(t *testing.T, where string, flags map[string]bool, name string) {
	t.Helper()
	if s, ok := strings.CutPrefix(name, "DELAYD_"); ok {
		if !flags[strings.ReplaceAll(strings.ToLower(s), "_", "-")] {
			t.Errorf("%s: %s names no setting of delayd", where, name)
		}
	}
}

// imageEnv is the Containerfile's ENV defaults, checked against the flags.
func imageEnv(t *testing.T, flags map[string]bool) map[string]string {
	t.Helper()
	b, err := os.ReadFile("container/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "ENV "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				envFlag(t, "Containerfile", flags, k)
				env[k] = v
			}
		}
		if rest, ok := strings.CutPrefix(line, "EXPOSE "); ok {
			env["EXPOSE"] = rest
		}
	}
	return env
}

func portOf(t *testing.T, where, hostport string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("%s: %q is not host:port", where, hostport)
	}
	return n
}

// The image's defaults are the server's: it listens on every interface at
// 6380 with the HTTP side at 6381 and its data in /data, and exposes those
// ports and the bus at 6380 + 10000.
func TestContainerfileDefaults(t *testing.T) {
	flags := flagsOf(t)
	env := imageEnv(t, flags)
	if env["DELAYD_BIND"] != "0.0.0.0" || env["DELAYD_DIR"] != "/data" || portOf(t, "DELAYD_HTTP_ADDR", env["DELAYD_HTTP_ADDR"]) != 6381 {
		t.Errorf("image defaults: %v", env)
	}
	if env["EXPOSE"] != "6380 6381 16380" {
		t.Errorf("EXPOSE %q, want 6380 6381 16380 (port, http, port + 10000)", env["EXPOSE"])
	}
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

// get walks a decoded YAML tree by keys and list indices.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, str(x))
	}
	return out
}

// The Kubernetes manifests give the server what it needs: real flags,
// container ports that are the ports the flags set, probes on the http
// port's /readyz and /healthz, a bus at port + 10000 announced under names
// the headless Service resolves, one node that forms the group and the
// others joining it, and a disruption budget that keeps a majority.
func TestKubernetesManifests(t *testing.T) {
	flags := flagsOf(t)
	image := imageEnv(t, flags)
	kinds := map[string][]map[string]any{}
	for _, f := range []string{"configmap.yaml", "services.yaml", "statefulset.yaml", "pdb.yaml", "servicemonitor.yaml"} {
		for _, d := range yamlDocs(t, "kubernetes/"+f) {
			kinds[str(d["kind"])] = append(kinds[str(d["kind"])], d)
		}
	}
	for _, f := range strs(get(yamlDocs(t, "kubernetes/kustomization.yaml")[0], "resources")) {
		if _, err := os.Stat("kubernetes/" + f); err != nil {
			t.Errorf("kustomization.yaml lists %s: %v", f, err)
		}
	}
	if len(kinds["StatefulSet"]) != 1 || len(kinds["ConfigMap"]) != 1 || len(kinds["PodDisruptionBudget"]) != 1 || len(kinds["ServiceMonitor"]) != 1 || len(kinds["Service"]) != 2 {
		t.Fatalf("want one StatefulSet, ConfigMap, PodDisruptionBudget, ServiceMonitor and two Services; have %v", kinds)
	}
	sts := kinds["StatefulSet"][0]
	stsName := str(get(sts, "metadata", "name"))
	replicas, _ := get(sts, "spec", "replicas").(int)
	headless := str(get(sts, "spec", "serviceName"))
	podLabels := get(sts, "spec", "template", "metadata", "labels").(map[string]any)
	c := get(sts, "spec", "template", "spec", "containers", 0)
	a := args(t, "StatefulSet args", flags, strs(get(c, "args")))

	env := map[string]any{}
	for _, e := range get(c, "env").([]any) {
		name := str(get(e, "name"))
		envFlag(t, "StatefulSet env", flags, name)
		env[name] = e
	}
	if str(get(env["POD_NAME"], "valueFrom", "fieldRef", "fieldPath")) != "metadata.name" ||
		str(get(env["POD_NAMESPACE"], "valueFrom", "fieldRef", "fieldPath")) != "metadata.namespace" {
		t.Errorf("POD_NAME and POD_NAMESPACE must come from the pod's name and namespace: %v", env)
	}
	if str(get(env["DELAYD_HTTP_MONITORING_AUTH"], "value")) != "no" {
		t.Error("with a password, /readyz asks for it unless DELAYD_HTTP_MONITORING_AUTH is no: the readiness probe would fail")
	}

	port, _ := strconv.Atoi(a["port"])
	httpPort := portOf(t, "DELAYD_HTTP_ADDR", image["DELAYD_HTTP_ADDR"])
	ports := map[string]int{}
	for _, p := range get(c, "ports").([]any) {
		ports[str(get(p, "name"))], _ = get(p, "containerPort").(int)
	}
	if a["cluster-enabled"] != "yes" || port == 0 {
		t.Fatalf("args need --cluster-enabled=yes and --port: %v", a)
	}
	if want := map[string]int{"resp": port, "http": httpPort, "bus": port + 10000}; fmt.Sprint(ports) != fmt.Sprint(want) {
		t.Errorf("container ports %v, want %v (--port, the http address's port, --port + 10000)", ports, want)
	}
	// Each node is announced by its stable name under the headless Service,
	// which every pod (and a client) resolves.
	self := "$(POD_NAME)." + headless + ".$(POD_NAMESPACE).svc"
	if want := net.JoinHostPort(self, strconv.Itoa(port)); a["cluster-announce-addr"] != want {
		t.Errorf("--cluster-announce-addr=%s, want %s", a["cluster-announce-addr"], want)
	}
	if want := net.JoinHostPort(self, strconv.Itoa(port+10000)); a["cluster-announce-bus-addr"] != want {
		t.Errorf("--cluster-announce-bus-addr=%s, want %s (the bus is port + 10000)", a["cluster-announce-bus-addr"], want)
	}
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		g := get(c, probe, "httpGet")
		if str(get(g, "path")) != path || (str(get(g, "port")) != "http" && str(get(g, "port")) != strconv.Itoa(httpPort)) {
			t.Errorf("%s is %v, want GET %s on the http port", probe, g, path)
		}
	}

	// The volume at the image's data directory is the claim template's.
	mounts := map[string]string{}
	for _, m := range get(c, "volumeMounts").([]any) {
		mounts[str(get(m, "mountPath"))] = str(get(m, "name"))
	}
	if claim := str(get(sts, "spec", "volumeClaimTemplates", 0, "metadata", "name")); claim == "" || mounts[image["DELAYD_DIR"]] != claim {
		t.Errorf("the claim template %q is not mounted at %s: %v", claim, image["DELAYD_DIR"], mounts)
	}

	// --config names a file of the mounted ConfigMap for each pod; one
	// node bootstraps and the others join it by its stable name.
	cfgDir, cfgFile, _ := strings.Cut(a["config"], "/$(POD_NAME)")
	if cfgFile != ".yaml" || mounts[cfgDir] == "" {
		t.Fatalf("--config=%s is not DIR/$(POD_NAME).yaml under a mounted volume %v", a["config"], mounts)
	}
	var cmName string
	for _, v := range get(sts, "spec", "template", "spec", "volumes").([]any) {
		if str(get(v, "name")) == mounts[cfgDir] {
			cmName = str(get(v, "configMap", "name"))
		}
	}
	cm := kinds["ConfigMap"][0]
	if str(get(cm, "metadata", "name")) != cmName {
		t.Fatalf("the config volume is ConfigMap %q; the manifest's is %q", cmName, get(cm, "metadata", "name"))
	}
	bootstrap := stsName + "-0"
	for i := range replicas {
		pod := fmt.Sprintf("%s-%d", stsName, i)
		text, ok := get(cm, "data", pod+".yaml").(string)
		if !ok {
			t.Errorf("ConfigMap %s has no %s.yaml for pod %s", cmName, pod, pod)
			continue
		}
		var keys map[string]any
		if err := yaml.Unmarshal([]byte(text), &keys); err != nil {
			t.Fatalf("%s.yaml: %v", pod, err)
		}
		for k := range keys {
			if !flags[k] {
				t.Errorf("%s.yaml: %s is not a setting of delayd", pod, k)
			}
		}
		if pod == bootstrap {
			if keys["cluster-bootstrap"] != true || keys["cluster-join"] != nil {
				t.Errorf("%s.yaml must bootstrap and join no one: %v", pod, keys)
			}
		} else if want := net.JoinHostPort(bootstrap+"."+headless, strconv.Itoa(port)); keys["cluster-join"] != want || keys["cluster-bootstrap"] != nil {
			t.Errorf("%s.yaml: cluster-join %v, want %s and no bootstrap", pod, keys["cluster-join"], want)
		}
	}

	services := map[string]map[string]any{}
	for _, s := range kinds["Service"] {
		services[str(get(s, "metadata", "name"))] = s
		if fmt.Sprint(get(s, "spec", "selector")) != fmt.Sprint(podLabels) {
			t.Errorf("Service %s selects %v, not the pods' labels %v", get(s, "metadata", "name"), get(s, "spec", "selector"), podLabels)
		}
		for _, p := range get(s, "spec", "ports").([]any) {
			if _, ok := ports[str(get(p, "targetPort"))]; !ok {
				t.Errorf("Service %s targets port %v, which the container does not name", get(s, "metadata", "name"), get(p, "targetPort"))
			}
		}
	}
	hs := services[headless]
	if hs == nil || str(get(hs, "spec", "clusterIP")) != "None" || get(hs, "spec", "publishNotReadyAddresses") != true {
		t.Errorf("the StatefulSet's serviceName %q must be a headless Service publishing not-ready pods (they must reach each other to become ready): %v", headless, hs)
	}
	if str(get(sts, "spec", "podManagementPolicy")) != "Parallel" {
		t.Error("podManagementPolicy must be Parallel: after a full stop, the first pod alone is never ready")
	}

	pdb := kinds["PodDisruptionBudget"][0]
	if fmt.Sprint(get(pdb, "spec", "selector", "matchLabels")) != fmt.Sprint(podLabels) {
		t.Errorf("the PodDisruptionBudget selects %v", get(pdb, "spec", "selector"))
	}
	if mu, _ := get(pdb, "spec", "maxUnavailable").(int); mu < 1 || replicas-mu <= replicas/2 {
		t.Errorf("maxUnavailable %v of %d nodes leaves no majority", get(pdb, "spec", "maxUnavailable"), replicas)
	}

	sm := kinds["ServiceMonitor"][0]
	ep := get(sm, "spec", "endpoints", 0)
	scraped := false
	for _, s := range services {
		for _, p := range get(s, "spec", "ports").([]any) {
			if str(get(p, "name")) == str(get(ep, "port")) && str(get(p, "targetPort")) == "http" {
				scraped = true
			}
		}
	}
	if !scraped || str(get(ep, "path")) != "/metrics" {
		t.Errorf("the ServiceMonitor must scrape /metrics on a Service port that targets http: %v", ep)
	}
}

// The compose file: real flags and variables, one node that bootstraps and
// the others joining it by its service name, each node announced by its
// own name with the bus at port + 10000, its data in a volume at /data,
// and the http port published.
func TestComposeFile(t *testing.T) {
	flags := flagsOf(t)
	image := imageEnv(t, flags)
	doc := yamlDocs(t, "compose/compose.yaml")[0]
	services := get(doc, "services").(map[string]any)
	if len(services) != 3 {
		t.Fatalf("%d services, want 3 nodes", len(services))
	}
	httpPort := portOf(t, "DELAYD_HTTP_ADDR", image["DELAYD_HTTP_ADDR"])
	bootstraps := map[string]bool{}
	joins := map[string]string{}
	for name, s := range services {
		where := "compose " + name
		for k := range get(s, "environment").(map[string]any) {
			envFlag(t, where, flags, k)
		}
		if str(get(s, "environment", "DELAYD_CLUSTER_ENABLED")) != "yes" {
			t.Errorf("%s: DELAYD_CLUSTER_ENABLED is not yes", where)
		}
		a := args(t, where, flags, strs(get(s, "command")))
		port, _ := strconv.Atoi(a["port"])
		if want := net.JoinHostPort(name, strconv.Itoa(port)); a["cluster-announce-addr"] != want {
			t.Errorf("%s: --cluster-announce-addr %s, want %s", where, a["cluster-announce-addr"], want)
		}
		if want := net.JoinHostPort(name, strconv.Itoa(port+10000)); a["cluster-announce-bus-addr"] != want {
			t.Errorf("%s: --cluster-announce-bus-addr %s, want %s (port + 10000)", where, a["cluster-announce-bus-addr"], want)
		}
		if a["cluster-bootstrap"] == "true" {
			bootstraps[name] = true
		}
		if j := a["cluster-join"]; j != "" {
			joins[name] = j
		}
		if vols := strs(get(s, "volumes")); len(vols) != 1 || !strings.HasSuffix(vols[0], ":"+image["DELAYD_DIR"]) {
			t.Errorf("%s: volumes %v, want one at %s", where, vols, image["DELAYD_DIR"])
		}
		if p := strs(get(s, "ports")); len(p) != 1 || !strings.HasSuffix(p[0], ":"+strconv.Itoa(httpPort)) {
			t.Errorf("%s: ports %v, want the http port %d published", where, p, httpPort)
		}
	}
	if len(bootstraps) != 1 || len(joins) != len(services)-1 {
		t.Fatalf("want one node bootstrapping and the others joining: bootstrap %v, join %v", bootstraps, joins)
	}
	for name, j := range joins {
		host, p, _ := net.SplitHostPort(j)
		if !bootstraps[host] {
			t.Errorf("%s joins %s, which does not bootstrap", name, j)
		}
		if want := args(t, host, flags, strs(get(services[host], "command")))["port"]; p != want {
			t.Errorf("%s joins port %s; %s listens on %s", name, p, host, want)
		}
	}
}

// The systemd unit runs real flags with its data in its state directory,
// and systemd-analyze verify (where installed) accepts it.
func TestSystemdUnit(t *testing.T) {
	flags := flagsOf(t)
	b, err := os.ReadFile("systemd/delayd.service")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	exec0 := strings.Fields(keys["ExecStart"])
	if len(exec0) == 0 {
		t.Fatal("no ExecStart")
	}
	a := args(t, "ExecStart", flags, exec0[1:])
	if want := "/var/lib/" + keys["StateDirectory"]; keys["StateDirectory"] == "" || a["dir"] != want {
		t.Errorf("--dir %q is not the StateDirectory %s", a["dir"], want)
	}
	for _, k := range []string{"Restart", "LimitNOFILE", "ProtectSystem", "NoNewPrivileges", "DynamicUser"} {
		if keys[k] == "" {
			t.Errorf("the unit sets no %s", k)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: the unit is not verified")
		return
	}
	// verify wants ExecStart's binary to exist: the release's stands in.
	unit := filepath.Join(t.TempDir(), "delayd.service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(b, []byte(exec0[0]), []byte(serverBinary(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", unit).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
