package commands

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/acl"
	"github.com/delayd/delayd/engine"
)

// Writer is what handlers reply with. The resp package implements it for
// RESP2 and RESP3; handlers never see the wire encoding.
type Writer interface {
	Status(s string) // +OK
	Error(s string)  // -ERR ..., the whole line after '-'
	Int(n int64)
	Bulk(b []byte)
	BulkString(s string)
	Null()      // a missing value: $-1 in RESP2, _ in RESP3
	NullArray() // a missing array (pop timeout): *-1 in RESP2, _ in RESP3
	Array(n int)
	Map(n int) // n field/value pairs; a flat array of 2n in RESP2
	// Verbatim is text for people (INFO, CLIENT LIST): =len txt:... in
	// RESP3, a bulk string in RESP2.
	Verbatim(s string)
	// Push starts an out-of-band message of n elements (>n in RESP3, *n in
	// RESP2); only Client.Out's writers use it.
	Push(n int)
	Proto() int
	SetProto(p int)
}

// Client is the per-connection state a handler may read and change. Only the
// connection's goroutine runs its commands; what CLIENT LIST reads from
// other connections is behind mu (or atomic), never read bare.
type Client struct {
	W       Writer
	ID      int64
	Addr    string
	Authed  bool
	Created time.Time

	mu                    sync.Mutex // guards the fields below
	name, libName, libVer string
	proto                 int
	last                  atomic.Pointer[Command] // the command running or last run
	lastSub               atomic.Pointer[string]  // its "container|sub" name, if last has subcommands

	// What CLIENT LIST, KILL and UNBLOCK, MONITOR and CLIENT TRACKING need
	// (client.go, tracking.go, monitor.go).
	LAddr    string       // the local address the client connected to
	FD       int          // the socket's descriptor (fd=), -1 if unknown
	Conn     Conn         // pushes and closing from other goroutines; nil in unit tests
	lastSeen atomic.Int64 // unix seconds of the client's last command (idle=)
	noEvict  atomic.Bool  // CLIENT NO-EVICT: stored and shown (flag e); nothing is evicted
	noTouch  atomic.Bool  // CLIENT NO-TOUCH: stored and shown (flag T)
	monitor  atomic.Bool  // in MONITOR mode
	blocked  *Block       // guarded by mu: the pop the client is parked in
	readonly atomic.Bool  // READONLY: a follower serves this client's reads (flag r)
	subbed   atomic.Bool  // SUBSCRIBE __redis__:invalidate (tracking.go)
	trk      tracking     // guarded by Dispatcher.trk.mu
	caching  int8         // CLIENT CACHING yes (1) / no (-1) for the next command
	reply    replyMode    // CLIENT REPLY; only the connection's goroutine touches it

	// sentAs and sentCmd are the last command's name as the client sent
	// it and what it named: a pipeline repeats one name, and comparing a
	// few bytes costs less than hashing them for the table (lookup).
	sentAs  [16]byte
	sentLen uint8
	sentCmd *Command

	// clk is the monotonic time (monoNow) the last command of the batch
	// ended at, the next one's start; 0: read the clock (observe.go).
	clk time.Duration
	// began is the running command's start (beforeExec): at or after its
	// arrival, so the engine may take it as the command's time (arrived).
	began time.Duration

	// Set by handlers, acted on by the connection loop after the command.
	Quit      bool   // close the connection once replies are flushed
	DropReply bool   // CLIENT REPLY OFF or SKIP: drop what the command wrote (client.go)
	Block     *Block // park the client until the block resolves
	Ticket    uint64 // log position the command's reply must wait for (0: none)

	// The memory a pop copies its job into (engine.Scratch): the reply is
	// written before the next command runs, so one buffer serves them all.
	pop engine.Scratch

	tx txState // MULTI and WATCH (multi.go)

	user atomic.Pointer[acl.Handle] // the ACL user it runs as (acl.go)

	// errs counts the error replies the writer wrote, if it counts them
	// (ErrorCount); errSeen is how many were accounted for (metrics.go).
	errs    *uint64
	errSeen uint64

	// Cluster mode (route.go): the slot of the command running, for a
	// MOVED it may still have to answer (noSlot if it has no keys), and the
	// ticket of the client's last write, which WAIT waits for.
	slot int
	woff uint64
	// asking: the client sent ASKING, so its next command may run on a
	// slot this group imports (route.go); only its goroutine touches it.
	// asked: the command running came after ASKING (a pop it blocks in
	// keeps it: RedirectBlocked).
	asking, asked bool
	// running is held by the client's goroutine from routing to the end of
	// its handler, with inflight the command, on an address of a cluster
	// of several groups only: MIGRATE waits on each client running a write,
	// so that none routed before its fence still runs when it exports
	// (migrate.go).
	running  sync.Mutex
	inflight atomic.Pointer[Command]
}

// Options configure a Dispatcher. Only main knows where the values come from.
type Options struct {
	// Engine, if set, is ready now; otherwise commands get LOADING until
	// SetEngine publishes it, and INFO reads Loading meanwhile.
	Engine      *engine.Engine
	Loading     *engine.Loading
	RequirePass string
	// ACLFile is --aclfile: where ACL SAVE writes the users and ACL LOAD
	// (and LoadACLFile at start) reads them; empty: no file.
	ACLFile    string
	Version    string
	Port       int
	ConfigFile string
	MaxClients int
	MaxMemory  int64 // bytes; 0: no limit (maxmemory.go)
	// ProtectedMode refuses peers off the loopback interface while the
	// default user needs no password (protected.go).
	ProtectedMode bool
	// Config is the read-only view CONFIG GET shows, name -> value.
	Config map[string]string
	// Shutdown stops the server (SHUTDOWN); it returns at once and the
	// server stops in the background.
	Shutdown func()
	// Cluster is the Raft group this node belongs to (--cluster-enabled);
	// nil for a single node, which then answers exactly as without it.
	Cluster ClusterView
	// Groups, with several Raft groups, is every group of the cluster, and
	// Group the one this dispatcher's address serves (Cluster is its view);
	// nil with one group (docs/decisions/raft-groups.md).
	Groups Groups
	Group  int
	// ClusterTLS says the nodes' announced client ports are TLS ports (a
	// TLS-only cluster, port 0): CLUSTER SHARDS then names them tls-port,
	// as Redis does for a node without a plain port.
	ClusterTLS bool
	Log        zerolog.Logger
}

// Dispatcher looks commands up in the table, checks arity and auth once, and
// runs their handlers. It is safe for concurrent use by connections.
type Dispatcher struct {
	opts   Options
	moves  migrations                    // the queues MIGRATE is moving now (migrate.go)
	eng    atomic.Pointer[engine.Engine] // nil while the log loads; set once
	byName map[string]*Command
	// asSent files each name in lower case and in capitals, the two ways
	// clients send them (redis-benchmark sends capitals): such a name costs
	// lookup one map probe instead of a miss, a fold and a second probe.
	// Only lookup reads it; ACL rules and the rest go by byName.
	asSent  map[string]*Command
	cmds    []*Command
	started time.Time
	mem     memGauge
	runID   string // INFO server run_id: random per start, as Redis
	replID  string // INFO replication master_replid

	// Counters for INFO, updated by connections.
	Connected   atomic.Int64
	TotalConns  atomic.Int64
	Rejected    atomic.Int64
	Blocked     atomic.Int64
	commandsRun atomic.Int64
	nextID      atomic.Int64
	errReplies  atomic.Uint64    // INFO total_error_replies (metrics.go)
	subscribers atomic.Int64     // INFO pubsub_clients (tracking.go)
	aclDenied   [4]atomic.Uint64 // INFO acl_access_denied_auth, _cmd, _key, _channel
	ops         opsSampler       // INFO instantaneous_ops_per_sec (metrics.go)
	backups     backupState      // BGSAVE, LASTSAVE, INFO rdb_* (backup.go)

	mu      sync.Mutex
	clients map[int64]*Client // guarded by mu; for CLIENT LIST

	trk    trackTable // CLIENT TRACKING (tracking.go)
	obs    observers  // SLOWLOG and MONITOR (observe.go)
	acl    *acl.Store // ACL users (acl.go)
	aclLog aclLog
	cnt    []cmdCount // calls and time by command, in table order (metrics.go)
}

// New builds a dispatcher over the command table.
func New(opts Options) *Dispatcher {
	d := &Dispatcher{
		opts:    opts,
		byName:  make(map[string]*Command, len(table)),
		asSent:  make(map[string]*Command, 2*len(table)),
		started: time.Now(),
		runID:   randomHex(20),
		replID:  randomHex(20),
		clients: make(map[int64]*Client),
	}
	d.cmds = table
	d.cnt = make([]cmdCount, len(table))
	for _, cmd := range d.cmds {
		d.byName[cmd.Name] = cmd
		d.asSent[cmd.Name] = cmd
		d.asSent[strings.ToUpper(cmd.Name)] = cmd
	}
	d.obs.init(opts.Config)
	d.acl = acl.NewStore(d.ruleName, opts.RequirePass)
	if opts.Engine != nil {
		d.SetEngine(opts.Engine)
	}
	return d
}

// NewClient registers a connection known only by its address (tests).
func (d *Dispatcher) NewClient(w Writer, addr string) *Client {
	return d.Connect(w, ConnInfo{Addr: addr, FD: -1})
}

// ConnInfo is what the network side knows of a new connection.
type ConnInfo struct {
	Addr, LAddr string
	FD          int
	Conn        Conn
}

// Connect registers a connection and returns its state.
func (d *Dispatcher) Connect(w Writer, info ConnInfo) *Client {
	c := &Client{
		W:       w,
		ID:      d.nextID.Add(1),
		Addr:    info.Addr,
		LAddr:   info.LAddr,
		FD:      info.FD,
		Conn:    info.Conn,
		Created: time.Now(),
		proto:   w.Proto(),
	}
	if ec, ok := w.(interface{ ErrorCount() *uint64 }); ok {
		c.errs = ec.ErrorCount()
		c.errSeen = *c.errs
	}
	// As Redis: a client starts as the default user, authenticated if
	// that user needs no password.
	def := d.acl.Default()
	c.user.Store(def)
	c.Authed = def.User().NoPass && def.User().On
	c.lastSeen.Store(c.Created.Unix())
	d.mu.Lock()
	d.clients[c.ID] = c
	d.mu.Unlock()
	return c
}

// CloseClient forgets a connection, its tracking and its MONITOR.
func (d *Dispatcher) CloseClient(c *Client) {
	d.trackingOff(c)
	if c.subbed.Swap(false) {
		d.subscribers.Add(-1)
	}
	d.monitorOff(c)
	d.mu.Lock()
	delete(d.clients, c.ID)
	d.mu.Unlock()
	d.endTx(c)
}

// client finds a connected client by id, or nil.
func (d *Dispatcher) client(id int64) *Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.clients[id]
}

// lookup finds a command without allocating for names already in lower case.
func (d *Dispatcher) lookup(name []byte) *Command {
	if cmd, ok := d.asSent[string(name)]; ok {
		return cmd
	}
	var buf [32]byte
	if len(name) > len(buf) {
		return nil
	}
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 32
		}
		buf[i] = c
	}
	return d.byName[string(buf[:len(name)])]
}

// Durable waits until the log holds the write with this ticket. An error
// means the write failed and was not applied: its reply must be this error.
func (d *Dispatcher) Durable(ticket uint64) error {
	if ticket == 0 {
		return nil // nothing was logged (and while loading there is no engine)
	}
	return d.eng.Load().WaitDurable(ticket)
}

// Exec runs one command. args[0] is the command name. A handler that writes
// sets c.Ticket; the connection must wait for Durable(c.Ticket) before the
// reply leaves. After CLIENT REPLY OFF or SKIP it sets c.DropReply: the
// connection drops what the command wrote.
func (d *Dispatcher) Exec(c *Client, args [][]byte) {
	if c.reply != replyOn {
		d.execQuiet(c, args)
		return
	}
	d.run(c, args)
}

// run is Exec's work.
func (d *Dispatcher) run(c *Client, args [][]byte) {
	d.commandsRun.Add(1)
	cmd := c.sentCmd
	if name := args[0]; cmd == nil || string(name) != string(c.sentAs[:c.sentLen]) {
		if cmd = d.lookup(name); cmd != nil && len(name) <= len(c.sentAs) {
			c.sentLen = uint8(copy(c.sentAs[:], name))
			c.sentCmd = cmd
		}
	}
	if cmd == nil {
		d.reject(c, nil, unknownCommand(args))
		return
	}
	if !c.Authed && cmd.Flags&NoAuth == 0 {
		d.reject(c, cmd, "NOAUTH Authentication required.")
		return
	}
	if (cmd.Arity > 0 && len(args) != cmd.Arity) || (cmd.Arity < 0 && len(args) < -cmd.Arity) {
		d.reject(c, cmd, "ERR wrong number of arguments for '"+cmd.Name+"' command")
		return
	}
	if !d.checkACL(c, cmd, args) { // after arity, as Redis; in MULTI at queue time
		return
	}
	// Before LOADING, as Redis redirects first: a follower still loading
	// can already send the client to the leader. A single node pays this
	// one nil check and nothing else.
	if d.opts.Cluster != nil {
		if d.opts.Groups != nil {
			c.inflight.Store(cmd) // before routing reads the fence: see drain
			c.running.Lock()
			defer c.inflight.Store(nil)
			defer c.running.Unlock()
		}
		if !d.route(c, cmd, args) {
			// A redirect is a rejected call, as in Redis; route's own
			// reject counted it, unless it answered an EXEC directly.
			if d.newErrors(c) != 0 {
				d.countRejected(cmd)
			}
			return
		}
		defer c.wrote() // for WAIT
	}
	if cmd.Flags&Loading == 0 && d.eng.Load() == nil {
		d.reject(c, cmd, errLoading) // after auth and arity, as Redis checks
		return
	}
	if d.opts.MaxMemory > 0 && d.overMaxMemory(cmd) {
		d.reject(c, cmd, errOOM) // in MULTI too: EXEC is then aborted, as Redis does
		return
	}
	if c.subbed.Load() && !d.pubsubAllows(c, cmd, args) {
		return
	}
	c.setLast(cmd, args)
	if c.tx.multi && cmd.Flags&NoQueue == 0 {
		d.queue(c, cmd, args) // runs at its EXEC, if ever (multi.go)
		return
	}
	start := d.beforeExec(c, cmd, args) // tracking, SLOWLOG, MONITOR: observe.go
	cmd.Handler(d, c, args)
	d.afterExec(c, cmd, args, start)
}

// unknownCommand words the error as Redis does, quoting up to 128 bytes of
// the name and of each argument.
func unknownCommand(args [][]byte) string {
	s := "ERR unknown command '" + clip(args[0]) + "', with args beginning with: "
	for _, a := range args[1:] {
		if len(s) > 512 {
			break
		}
		s += "'" + clip(a) + "' "
	}
	return s
}

func clip(b []byte) string {
	if len(b) > 128 {
		b = b[:128]
	}
	// An error line cannot hold a newline.
	out := make([]byte, len(b))
	for i, c := range b {
		if c == '\r' || c == '\n' {
			c = ' '
		}
		out[i] = c
	}
	return string(out)
}

// Redis's wording for argument errors, in one place.
const (
	errNotInteger   = "ERR value is not an integer or out of range"
	errNotFloat     = "ERR timeout is not a float or out of range"
	errNegTimeout   = "ERR timeout is negative"
	errSyntax       = "ERR syntax error"
	errOutOfRange   = "ERR value is out of range, must be positive"
	errNoAuthConfig = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	errWrongPass    = "WRONGPASS invalid username-password pair or user is disabled."
)

// replyErr turns an engine error into its RESP error line.
func (d *Dispatcher) replyErr(c *Client, err error) {
	switch {
	case errors.Is(err, engine.ErrPayloadTooLarge):
		c.W.Error("ERR payload exceeds max-payload-bytes (" + strconv.Itoa(d.opts.maxPayload()) + ")")
	case errors.Is(err, engine.ErrMaxJobs):
		c.W.Error("OOM max-jobs reached (" + d.opts.Config["max-jobs"] + ")")
	case errors.Is(err, engine.ErrBadID):
		c.W.Error("ERR invalid id: an id is 1 to 256 bytes")
	case errors.Is(err, engine.ErrKeyTooLong):
		c.W.Error("ERR key too long: a queue name is at most 16384 bytes")
	case errors.Is(err, engine.ErrClosed):
		c.W.Error("ERR server is shutting down")
	case errors.Is(err, engine.ErrNotLeader):
		// Leadership moved between route's check and the engine.
		c.W.Error(d.notLeader(c.slot))
	default:
		c.W.Error(ErrorLine(err))
	}
}

// ErrorLine is the error line (without its '-') that replaces the reply of
// a write whose log write or commit failed, and of any engine error without
// a wording of its own. A write that may not have committed because
// leadership changed (engine.ErrNotCommitted) gets TRYAGAIN, which
// go-redis, ioredis, redis-py and rueidis retry on their own.
func ErrorLine(err error) string {
	if errors.Is(err, engine.ErrNotCommitted) {
		return "TRYAGAIN " + err.Error()
	}
	if errors.Is(err, engine.ErrLog) {
		// Redis's wording when it cannot write its AOF, with the cause.
		return "MISCONF Errors writing to the AOF file: " + strings.TrimPrefix(err.Error(), engine.ErrLog.Error()+": ")
	}
	if msg := err.Error(); strings.HasPrefix(msg, "ERR ") {
		return msg // worded for the client already (the cluster's membership errors)
	}
	return "ERR " + err.Error()
}

func (o Options) maxPayload() int {
	n, err := strconv.Atoi(o.Config["max-payload-bytes"])
	if err != nil {
		return 0
	}
	return n
}

// parseInt parses a decimal int64 as Redis's string2ll does (no '+', no
// spaces) except that leading zeros are accepted: redis-benchmark's
// __rand_int__ is zero-padded ("000000012345"), and a delay written that way
// means what it says.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<64-1)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// engineFor is the engine a handler of c's command works on. Handlers reach
// the engine only through it, never through d.eng, so that the commands of a
// transaction can run on the engine held for the whole EXEC, and so that
// nothing reaches an engine still loading its log: it is nil while the log
// loads, which only handlers flagged Loading ever see. One atomic load.
func (d *Dispatcher) engineFor(c *Client) *engine.Engine {
	if c.tx.eng != nil {
		return c.tx.eng
	}
	return d.eng.Load()
}
