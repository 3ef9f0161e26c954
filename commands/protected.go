package commands

import "net/netip"

// Protected mode as Redis 7 decides it, in one place for both sides that
// listen (resp on accept, web per request): while it is on and the default
// user, the one a client is before AUTH, needs no password, only peers on
// the loopback interface are served. Redis 7 asks only about the default
// user, not about other users with passwords: a client from outside would
// reach every command as the default user without saying who it is.

// DeniedText is Redis 7.0's protected-mode explanation, its remedies
// rewritten for delayd's settings (there is no CONFIG SET). The first two
// sentences are Redis's word for word: client code matches on them. RESP
// sends it as a -DENIED error, HTTP as a 403's body.
const DeniedText = "DENIED Redis is running in protected mode because protected mode is enabled " +
	"and no password is set for the default user. In this mode connections are only accepted " +
	"from the loopback interface. If you want to connect from external computers to delayd you " +
	"may adopt one of the following solutions: " +
	"1) Just disable the protected mode by setting 'protected-mode: no' in the configuration file " +
	"(or DELAYD_PROTECTED_MODE=no in the environment), and then restarting the server; MAKE SURE " +
	"delayd is not publicly accessible from internet if you do so. " +
	"2) If you started the server manually just for testing, restart it with the " +
	"'--protected-mode no' option. " +
	"3) Set up an authentication password for the default user (--requirepass). " +
	"NOTE: You only need to do one of the above things in order for the server to start " +
	"accepting connections from the outside."

// Refuses reports whether protected mode turns away a peer at ip: it is on
// (Options.ProtectedMode), the default user needs no password, and ip is
// not a loopback address. An invalid ip (a Unix socket's peer) is let in,
// as Redis lets local sockets in. Cost: one user lookup.
func (d *Dispatcher) Refuses(ip netip.Addr) bool {
	return d.opts.ProtectedMode && ip.IsValid() && !ip.Unmap().IsLoopback() && !d.DefaultNeedsPassword()
}
