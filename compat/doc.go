// Package compat is delayd's client compatibility suite: real client
// libraries, used the way their users use them, against the real delayd
// binary. It holds no code of its own; everything is in the tests.
//
// Clients: go-redis v9 and rueidis (Go modules of this repository), redis-py
// (Debian's python3-redis, run with /usr/bin/python3), ioredis and node-redis
// (npm, installed into compat/node/node_modules by `npm ci` from the
// committed package-lock.json), and redis-cli (Debian's redis-tools; cluster
// mode only). The Go clients are driven in-process; the Python and Node
// checks are scripts (compat/python/checks.py, compat/node/*.js) that the Go
// test runs as subprocesses against a server it started, one feature per run.
//
// For every client the suite checks one list of features (see features in
// checks_test.go): the default handshake, RESP3, AUTH, generic DELAY.* calls,
// the default pipeline and the default transaction, a BLPOP worker, a
// DELAY.POP + DELAY.ACK worker, the reliable list pattern, SCAN, CLIENT INFO,
// client-side caching, reconnect after a server restart, and in cluster mode
// the library's cluster client (routing from a follower's address) and a
// leader failover under a producer and a worker (cluster_test.go). Each check
// runs on its own server (a free port, a temp dir, the append-only log on),
// or its own 3-node cluster, so the checks run in parallel. The suite prints a
// client x feature matrix at the end; the README's matrix is generated from
// the same list and a test fails when it is stale (go test ./compat -run
// README -update refreshes it).
//
// Beside the matrix: TestFailoverResume (failover_test.go) times, for every
// library at once, how long writes stop when a cluster's leader is killed,
// with the settings the README names, and checks that no acknowledged add
// was lost; TestExamples and TestClusterExamples run the programs of
// examples/, the cluster ones across a leader kill, and
// TestClusterExamplesStopWithClusterDown stops each cluster worker while no
// node answers.
//
// A check that is plain Redis behaviour is proven to be a real check by
// running the suite against redis-server:
//
//	DELAYD_COMPAT_TARGET=redis-server go test -v -run TestCompat ./compat/
//
// The suite then starts redis-server (found on PATH, or the path given) in
// place of delayd; checks of DELAY.* commands are not applicable there, and
// where a check needs "a ready job" it uses RPUSH in place of DELAY.ADD with
// delay 0 (which delayd defines as the same thing).
//
// Environment:
//
//	DELAYD_COMPAT_REQUIRE=1        a missing interpreter or module fails its checks (CI) instead of skipping them
//	DELAYD_COMPAT_TARGET=...       delayd (default), or redis-server / a path to a redis-server binary
//	DELAYD_COMPAT_BIN=path         test a delayd binary built elsewhere instead of building one
//	DELAYD_COMPAT_MATRIX=file      also write the result matrix to file
//	DELAYD_COMPAT_VERBOSE=1        show server and script output of passing checks too
//	DELAYD_FAILOVER_KILLS=n        leader kills of TestFailoverResume (default 3; the documented run: 20)
//	DELAYD_FAILOVER_SETTINGS=defaults  TestFailoverResume with the libraries' defaults only, reported, not judged
//	DELAYD_COMPAT_GROUPS=n         the cluster checks against n Raft groups (--cluster-groups), each led by its own node
package compat
