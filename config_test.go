package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delayd/delayd/aof"
)

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "delayd.yaml")
	if err := os.WriteFile(file, []byte("port: 7001\nmax-jobs: 5\nappendfsync: always\ntick: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		port    int
		maxJobs int
		fsync   string
	}{
		{"defaults", nil, nil, 6380, 0, "everysec"},
		{"file", []string{"--config", file}, nil, 7001, 5, "always"},
		{"env beats file", []string{"--config", file}, []string{"DELAYD_PORT=7002", "DELAYD_MAX_JOBS=9"}, 7002, 9, "always"},
		{"flag beats env", []string{"--config", file, "--port", "7003"}, []string{"DELAYD_PORT=7002"}, 7003, 5, "always"},
		{"file from env", nil, []string{"DELAYD_CONFIG=" + file}, 7001, 5, "always"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(tc.args, tc.env, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.Port != tc.port || c.MaxJobs != tc.maxJobs || c.AppendFsync != tc.fsync {
				t.Fatalf("port %d max-jobs %d appendfsync %s; want %d %d %s", c.Port, c.MaxJobs, c.AppendFsync, tc.port, tc.maxJobs, tc.fsync)
			}
		})
	}
}

func TestConfigRejectsBadValues(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte("prot: 1\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", "70000"}, "port"},
		{[]string{"--appendfsync", "sometimes"}, "appendfsync"},
		{[]string{"--appendonly", "maybe"}, "appendonly"},
		{[]string{"--tick", "0"}, "tick"},
		{[]string{"--max-payload-bytes", "100000000"}, "max-payload-bytes"},
		{[]string{"--config", unknown}, `unknown setting "prot"`},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		_, err := loadConfig(tc.args, nil, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}

// TestBadValueIsOneLine: each bad value, from a flag, the environment or
// the file, is one line on stderr naming where it was given and what is
// wrong, and the exit code is 2; a bad value is not followed by checks
// that read it (--port abc once added "port and tls-port are both 0").
func TestBadValueIsOneLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "delayd.yaml")
	if err := os.WriteFile(file, []byte("port: abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  []string
		want []string // one line each
	}{
		{[]string{"--port", "abc"}, nil, []string{`delayd: --port: "abc" is not a TCP port (0 to 65535)`}},
		{[]string{"--port", "70000"}, nil, []string{`delayd: --port: "70000" is not a TCP port (0 to 65535)`}},
		{[]string{"--tls-port", "x"}, nil, []string{`delayd: --tls-port: "x" is not a TCP port (0 to 65535)`}},
		{nil, []string{"DELAYD_PORT=abc"}, []string{`delayd: DELAYD_PORT: "abc" is not a TCP port (0 to 65535)`}},
		{[]string{"--config", file}, nil, []string{`delayd: port in ` + file + `: "abc" is not a TCP port (0 to 65535)`}},
		{[]string{"--appendonly", "maybe"}, nil, []string{`delayd: --appendonly: "maybe" is not yes or no`}},
		{[]string{"--repair=maybe"}, nil, []string{`delayd: --repair: "maybe" is not true or false (it takes no value: --repair)`}},
		{[]string{"--maxmemory", "lots"}, nil, []string{`delayd: --maxmemory: "lots" is not a memory size`}},
		{[]string{"--nosuch", "1"}, nil, []string{`delayd: unknown flag: --nosuch`}},
		{[]string{"--port", "abc", "--tick", "0"}, nil, []string{`delayd: --port: "abc"`, `delayd: --tick: "0" is not an integer >= 1`}},
	} {
		var out strings.Builder
		code := run(tc.args, tc.env, &out)
		lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
		if code != 2 || len(lines) != len(tc.want) {
			t.Errorf("%q %q: exit %d, %d lines:\n%s\nwant exit 2 and %d lines", tc.args, tc.env, code, len(lines), out.String(), len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("%q %q: line %q, want %q", tc.args, tc.env, lines[i], w)
			}
		}
	}
}

// The config file in the repository documents every setting, with its default.
func TestConfigYAMLDocumentsEveryDefault(t *testing.T) {
	c, err := loadConfig([]string{"--config", "config.yaml"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := loadConfig(nil, nil, io.Discard)
	c.ConfigFile = ""
	c.HTTPAddrGiven = false // given by the file, with the default's value
	if c != d {
		t.Fatalf("config.yaml differs from the built-in defaults:\n file: %+v\n defaults: %+v", c, d)
	}
	text, _ := os.ReadFile("config.yaml")
	for _, s := range settings {
		if !strings.Contains(string(text), "\n"+s.name+":") {
			t.Errorf("config.yaml does not document %s", s.name)
		}
	}
}

func TestCheckLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "delayd.aof")
	w, err := aof.Create(aof.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		w.Append([]byte("a record of some length"))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if code := run([]string{"check-log", "--dir", dir}, nil, &out); code != 0 || !strings.Contains(out.String(), "ok: 10 records") {
		t.Fatalf("healthy log: exit %d, %q", code, out.String())
	}
	data, _ := os.ReadFile(path)
	data[len(data)/2] ^= 0x40 // damage before the tail
	os.WriteFile(path, data, 0o644)
	out.Reset()
	if code := run([]string{"check-log", "--dir", dir}, nil, &out); code != 1 || !strings.Contains(out.String(), path) {
		t.Fatalf("damaged log: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"check-log", "--dir", dir, "--repair"}, nil, &out); code != 0 || !strings.Contains(out.String(), "repaired") {
		t.Fatalf("repair: exit %d, %q", code, out.String())
	}
	if _, err := os.Stat(path + aof.BrokenSuffix); err != nil {
		t.Fatalf("cut part not kept: %v", err)
	}
	out.Reset()
	if code := run([]string{"check-log", "--dir", dir}, nil, &out); code != 0 {
		t.Fatalf("after repair: exit %d, %q", code, out.String())
	}
}

// Only a default HTTP address that is taken is passed over (a second
// delayd on the machine); one the user gave must be served or fail.
func TestHTTPAddrGivenOrDefault(t *testing.T) {
	for _, tc := range []struct {
		args, env []string
		given     bool
	}{
		{nil, nil, false},
		{[]string{"--http-addr", "127.0.0.1:7000"}, nil, true},
		{[]string{"--http-addr", ""}, nil, true},
		{nil, []string{"DELAYD_HTTP_ADDR="}, true},
		{[]string{"--config", "config.yaml"}, nil, true},
	} {
		c, err := loadConfig(tc.args, tc.env, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.HTTPAddrGiven != tc.given {
			t.Errorf("%v %v: HTTPAddrGiven %v, want %v", tc.args, tc.env, c.HTTPAddrGiven, tc.given)
		}
	}
}

// The bus's announced address: on every interface with only
// --cluster-announce-addr given (the README's three machines), other nodes
// dial the announced host, not 127.0.0.1, which none of them could reach.
func TestClusterAnnounceBusAddrFollowsAnnounceHost(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bind", "0.0.0.0", "--cluster-announce-addr", "10.0.0.1:6380"}, "10.0.0.1:16380"},
		{[]string{"--bind", "0.0.0.0"}, "127.0.0.1:16380"},
		{[]string{"--bind", "10.0.0.2", "--port", "7001"}, "10.0.0.2:17001"},
		{[]string{"--bind", "0.0.0.0", "--cluster-bus-addr", "0.0.0.0:9999", "--cluster-announce-addr", "db-1:6380"}, "db-1:9999"},
		{[]string{"--bind", "0.0.0.0", "--cluster-announce-addr", "10.0.0.1:6380", "--cluster-announce-bus-addr", "10.9.9.9:1"}, "10.9.9.9:1"},
	} {
		c, err := loadConfig(append([]string{"--cluster-enabled", "yes"}, tc.args...), nil, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if c.ClusterAnnounceBusAddr != tc.want {
			t.Errorf("%v: announced bus %q, want %q", tc.args, c.ClusterAnnounceBusAddr, tc.want)
		}
	}
}
