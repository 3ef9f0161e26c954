// Package testserver starts the real delayd binary for the tests that speak
// to it from outside: integration_test, compat and web/e2e. It owns
// everything between "go build" and a server that answers: building the
// binary once, handing out ports, starting the process in its own dir with
// a clean environment, waiting until it answers PING (after AUTH, over TLS
// when asked), keeping its output for a failed test, stopping it (SIGTERM,
// then SIGQUIT for a goroutine dump, then SIGKILL), restarting it on the
// same ports, and forming a cluster of such processes.
//
// It knows nothing of the server's commands beyond PING, AUTH and INFO, and
// nothing of go-redis: each test package keeps its own clients and
// assertions on top. Failures come back as errors; Watch alone takes a
// testing.TB, to tie a server's life and output to one test.
//
// # Ports
//
// go test runs the three packages' test processes side by side, and within
// a process the tests run in parallel; a port handed to one test must not go
// to another, not even after its server was killed (it is restarted there).
// Each package therefore takes its ports from its own range with its own
// Ports, and every range lies below Linux's ephemeral range (32768-60999),
// from which outgoing connections take their local ports (see Ports.Take):
//
//	web/e2e           16384-19999  E2EPorts
//	compat            20000-26383  CompatPorts
//	integration_test  26384-32767  IntegrationPorts
package testserver
