package compat

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// redis-cli is checked in cluster mode and over TLS only: `-c` follows
// MOVED as an operator's shell does, `--cluster check` reads the topology as
// Redis's own admin tool, and `--tls --cert --key --cacert` is how an
// operator reaches a TLS port. Its other uses are plain commands on one
// server, which every other row covers.
func redisCLICells() map[string]cell {
	m := map[string]cell{}
	for _, f := range features {
		m[f.name] = cell{na: "redis-cli is checked in cluster mode (`-c`, `--cluster check`) and over TLS only"}
	}
	m["tls"] = cell{run: redisCLITLSCheck}
	m["cluster"] = cell{run: redisCLICluster}
	m["failover"] = cell{run: redisCLIFailover}
	return m
}

var (
	redisCLIOnce sync.Once
	redisCLIPath string
	redisCLIErr  error
)

func redisCLIBin() (string, error) {
	redisCLIOnce.Do(func() {
		if redisCLIPath, redisCLIErr = exec.LookPath("redis-cli"); redisCLIErr != nil {
			redisCLIErr = errMissing{"redis-cli (apt-get install redis-tools)"}
		}
	})
	return redisCLIPath, redisCLIErr
}

// redisCLI runs redis-cli with args against addr and returns its output
// (stdout and stderr) without the trailing newlines. Without a terminal
// redis-cli prints replies raw: a bulk string as is, nil as an empty line, an
// array one element a line, an error as its text; it exits 1 on an error
// reply or when it cannot connect.
func redisCLI(e *env, addr string, args ...string) (string, error) {
	bin, err := redisCLIBin()
	if err != nil {
		return "", err
	}
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	text := strings.TrimRight(string(out), "\n")
	e.logf("redis-cli -p %s %s -> %q (%v)", port, strings.Join(args, " "), text, err)
	return text, err
}

func redisCLICluster(e *env) error {
	if _, err := redisCLIBin(); err != nil {
		return err
	}
	e.cluster.slot = 105 // orders: with several groups, its group's leader is the one MOVED names
	leader, err := e.cluster.leader()
	if err != nil {
		return err
	}
	seed, err := follower(e)
	if err != nil {
		return err
	}
	// Without -c a follower's MOVED is printed as is: the key's slot and
	// the leader's address.
	slot, err := ask(seed, "CLUSTER", "KEYSLOT", "orders")
	if err != nil {
		return noErr("CLUSTER KEYSLOT", err)
	}
	out, _ := redisCLI(e, seed, "DELAY.ADD", "orders", "0", "hello", "ID", "order-1")
	if err := eq("DELAY.ADD on a follower without -c", out, fmt.Sprintf("MOVED %d %s", slot, leader.addr())); err != nil {
		return err
	}
	// With -c it follows the redirection to the leader.
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"DELAY.ADD", "orders", "0", "hello", "ID", "order-1", "ACKTIMEOUT", "30000"}, "order-1"},
		{[]string{"DELAY.POP", "orders", "1"}, "orders\norder-1\nhello"},
		{[]string{"DELAY.ACK", "orders", "order-1"}, "1"},
		{[]string{"DELAY.GET", "orders", "order-1"}, ""},
	} {
		out, err := redisCLI(e, seed, append([]string{"-c"}, step.args...)...)
		if err := first(noErr("redis-cli -c "+step.args[0], err), eq("redis-cli -c "+strings.Join(step.args, " "), out, step.want)); err != nil {
			return err
		}
	}
	// redis-cli --cluster check reads CLUSTER NODES, INFO and the slots of
	// every node, as an operator checks a Redis cluster.
	out, err = redisCLI(e, seed, "--cluster", "check", seed)
	if err != nil {
		return fmt.Errorf("redis-cli --cluster check: %v\n%s", err, out)
	}
	wants := []string{
		"M: ", "[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered.",
		"slots:[0-16383] (16384 slots) master", strconv.Itoa(clusterSize-1) + " additional replica(s)",
	}
	if clusterGroups > 1 {
		wants[3] = fmt.Sprintf("[OK] 0 keys in %d masters.", clusterGroups)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			return fmt.Errorf("redis-cli --cluster check: no %q in:\n%s", want, out)
		}
	}
	return nil
}

// redisCLIFailover: a job added before the leader is killed is popped
// after it; redis-cli does not retry, so the operator's loop does (every
// 200 ms, as a shell loop would) until an add goes through, within
// resumeBound; then the restarted node, a follower now, sends redis-cli -c
// on to the leader; last, a pop blocked on a leader that is frozen (SIGSTOP)
// while the others elect a new one gets UNBLOCKED when it goes on.
func redisCLIFailover(e *env) error {
	if _, err := redisCLIBin(); err != nil {
		return err
	}
	seed, err := follower(e)
	if err != nil {
		return err
	}
	cli := func(addr string, args ...string) (string, error) {
		return redisCLI(e, addr, append([]string{"-c"}, args...)...)
	}
	out, err := cli(seed, "DELAY.ADD", "jobs", "0", "before", "ID", "before", "ACKTIMEOUT", "30000")
	if err := first(noErr("DELAY.ADD before the kill", err), eq("DELAY.ADD before the kill", out, "before")); err != nil {
		return err
	}
	killed, err := e.cluster.killLeader()
	if err != nil {
		return err
	}
	kill := time.Now()
	e.logf("killed the leader %s (SIGKILL)", killed)
	if err := waitFor(resumeBound, func() error {
		out, err := cli(seed, "DELAY.ADD", "jobs", "0", "after", "ID", "after", "ACKTIMEOUT", "30000")
		if err != nil || (out != "after" && out != "") { // "": a try that went through before
			return fmt.Errorf("DELAY.ADD after the kill: %q (%v)", out, err)
		}
		return nil
	}); err != nil {
		return err
	}
	e.logf("resumed %v after the kill", time.Since(kill).Round(time.Millisecond))
	for _, want := range []string{"before", "after"} {
		out, err := cli(seed, "DELAY.POP", "jobs", "1")
		if err := first(noErr("DELAY.POP", err), eq("DELAY.POP after the failover", out, "jobs\n"+want+"\n"+want)); err != nil {
			return err
		}
		out, err = cli(seed, "DELAY.ACK", "jobs", want)
		if err := first(noErr("DELAY.ACK", err), eq("DELAY.ACK "+want, out, "1")); err != nil {
			return err
		}
	}
	if err := e.cluster.restartKilled(); err != nil {
		return err
	}
	out, err = cli(killed, "DELAY.ADD", "jobs", "0", "rejoined", "ID", "rejoined")
	if err := first(noErr("DELAY.ADD through the restarted node", err), eq("DELAY.ADD through the restarted node", out, "rejoined")); err != nil {
		return err
	}
	out, err = cli(killed, "DELAY.POP", "jobs", "1")
	if err := first(noErr("DELAY.POP through the restarted node", err), eq("DELAY.POP through the restarted node", out, "jobs\nrejoined\nrejoined")); err != nil {
		return err
	}

	// A worker blocked on a leader that froze and comes back to find itself
	// deposed is answered UNBLOCKED, as Redis answers the clients blocked on
	// a master that turns replica.
	// Under load leadership can move between finding the leader and the pop
	// reaching it; the pop is then answered at once (MOVED, CLUSTERDOWN)
	// instead of blocking, and the check starts again on the new leader.
	var leader *server
	var blocked chan string
	for try := 1; ; try++ {
		if leader, err = e.cluster.leader(); err != nil {
			return err
		}
		blocked = make(chan string, 1)
		go func(addr string) {
			out, _ := redisCLI(e, addr, "DELAY.POP", "idle", "10")
			blocked <- out
		}(groupAddr(leader.addr(), e.cluster.group()))
		time.Sleep(300 * time.Millisecond) // the pop is blocked by now
		select {
		case out := <-blocked:
			if try == 3 {
				return fmt.Errorf("a DELAY.POP sent to the leader %s did not block, 3 times: %q", leader.addr(), out)
			}
			e.logf("the pop sent to %s did not block (%q): leadership moved; again", leader.addr(), out)
			continue
		default:
		}
		break
	}
	// Freeze the node the pop is blocked on, even if it has just lost the
	// lead: either way it must answer UNBLOCKED once it knows it follows.
	if err := e.cluster.pauseNode(leader); err != nil {
		return err
	}
	select {
	case out := <-blocked:
		return eq("a DELAY.POP blocked on the deposed leader", out,
			"UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)")
	case <-time.After(5 * time.Second):
		return fmt.Errorf("a DELAY.POP blocked on the deposed leader %s got no reply 5 s after the cluster had a new leader", leader.addr())
	}
}
