package commands

import "strings"

// Flags describe a command for the dispatcher and for COMMAND INFO.
type Flags uint16

const (
	Write    Flags = 1 << iota // changes jobs; refused with OOM-style errors when full
	ReadOnly                   // only reads
	Blocking                   // may park the client
	Admin                      // server administration
	NoAuth                     // allowed before AUTH (AUTH, HELLO, QUIT)
	Fast                       // O(1) or O(log n)
	Loading                    // allowed while loading
)

var flagNames = []struct {
	f    Flags
	name string
}{
	{Write, "write"}, {ReadOnly, "readonly"}, {Blocking, "blocking"}, {Admin, "admin"},
	{NoAuth, "no_auth"}, {Fast, "fast"}, {Loading, "loading"},
}

// Arg documents one argument for COMMAND DOCS (redis-cli builds its hints
// from these) and for the README's command reference.
type Arg struct {
	Name     string
	Type     string // key, integer, double, string, pure-token, block, oneof
	Token    string // the literal that introduces it, for options
	Optional bool
	Multiple bool
	Args     []Arg // for block and oneof
}

// Command is one row of the command table: the table is data, and the
// dispatcher checks arity, auth and flags once so handlers never recount.
type Command struct {
	Name       string // lower case, as COMMAND reports it
	Arity      int    // Redis style: n counts the name; -n means at least n
	Flags      Flags
	FirstKey   int // position of the first key argument, 0 if none
	LastKey    int // -1: the last argument, -2: the one before it
	Step       int
	Group      string
	Since      string
	Summary    string
	Complexity string
	Args       []Arg
	Handler    func(d *Dispatcher, c *Client, args [][]byte)
}

// Synopsis renders the usage line, e.g. "DELAY.CANCEL key id [id ...]".
func (cmd *Command) Synopsis() string {
	s := upper(cmd.Name)
	for _, a := range cmd.Args {
		s += " " + a.synopsis()
	}
	return s
}

func (a Arg) synopsis() string {
	var s string
	switch a.Type {
	case "pure-token":
		s = a.Token
	case "block", "oneof":
		sep := " "
		if a.Type == "oneof" {
			sep = "|"
		}
		for i, sub := range a.Args {
			if i > 0 {
				s += sep
			}
			s += sub.synopsis()
		}
		if a.Token != "" {
			s = a.Token + " " + s
		}
	default:
		s = a.Name
		if a.Token != "" {
			s = a.Token + " " + s
		}
	}
	if a.Multiple {
		s += " [" + s + " ...]"
	}
	if a.Optional {
		s = "[" + s + "]"
	}
	return s
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

func key(name string) Arg             { return Arg{Name: name, Type: "key"} }
func str(name string) Arg             { return Arg{Name: name, Type: "string"} }
func integer(name string) Arg         { return Arg{Name: name, Type: "integer"} }
func double(name string) Arg          { return Arg{Name: name, Type: "double"} }
func token(t string) Arg              { return Arg{Name: lower(t), Type: "pure-token", Token: t} }
func opt(a Arg) Arg                   { a.Optional = true; return a }
func many(a Arg) Arg                  { a.Multiple = true; return a }
func tok(t string, a Arg) Arg         { a.Token = t; return a }
func oneof(args ...Arg) Arg           { return Arg{Name: "option", Type: "oneof", Args: args} }
func block(n string, args ...Arg) Arg { return Arg{Name: n, Type: "block", Args: args} }

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

// addOptions are the options DELAY.ADD and DELAY.ADDAT share.
var addOptions = []Arg{
	opt(tok("ID", str("id"))),
	opt(token("REPLACE")),
	opt(tok("ACKTIMEOUT", integer("ms"))),
	opt(tok("RETRY", integer("n"))),
	opt(tok("DEADLETTER", key("dead-letter-key"))),
}

// table lists every command. COMMAND, COMMAND DOCS and the README's reference
// are generated from it.
var table = []*Command{
	{Name: "delay.add", Arity: -4, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Adds a job that becomes ready for the queue's workers after delay-ms milliseconds.",
		Complexity: "O(1)",
		Args:       append([]Arg{key("key"), integer("delay-ms"), str("payload")}, addOptions...),
		Handler:    cmdAdd},
	{Name: "delay.addat", Arity: -4, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Adds a job that becomes ready at an absolute unix time in milliseconds.",
		Complexity: "O(1)",
		Args:       append([]Arg{key("key"), integer("unix-ms"), str("payload")}, addOptions...),
		Handler:    cmdAddAt},
	{Name: "delay.cancel", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Removes jobs by id, whatever their state; replies how many existed.",
		Complexity: "O(N) where N is the number of ids",
		Args:       []Arg{key("key"), many(str("id"))},
		Handler:    cmdCancel},
	{Name: "delay.pop", Arity: -3, Flags: Write | Blocking, FirstKey: 1, LastKey: -2, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Takes the next ready job of the first non-empty queue, blocking up to timeout seconds (0: forever).",
		Complexity: "O(N) where N is the number of keys",
		Args:       []Arg{many(key("key")), double("timeout")},
		Handler:    cmdPop},
	{Name: "delay.ack", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Acknowledges reserved jobs, which deletes them; replies how many were reserved.",
		Complexity: "O(N) where N is the number of ids",
		Args:       []Arg{key("key"), many(str("id"))},
		Handler:    cmdAck},
	{Name: "delay.nack", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Ends a reserved job's delivery: ready again now, or delayed for delay-ms; replies 1, or 0 if not reserved.",
		Complexity: "O(1)",
		Args:       []Arg{key("key"), str("id"), opt(integer("delay-ms"))},
		Handler:    cmdNack},
	{Name: "delay.touch", Arity: 3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Starts a reserved job's ack deadline again; replies 1, or 0 if not reserved.",
		Complexity: "O(1)",
		Args:       []Arg{key("key"), str("id")},
		Handler:    cmdTouch},
	{Name: "delay.get", Arity: 3, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Shows a job: id, queue, state, due, payload, deliveries.",
		Complexity: "O(1)",
		Args:       []Arg{key("key"), str("id")},
		Handler:    cmdGet},
	{Name: "delay.stats", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Counts a queue's delayed, ready and reserved jobs, and its deliveries, redeliveries, acks, nacks, expired and dead-lettered jobs.",
		Complexity: "O(1)",
		Args:       []Arg{key("key")},
		Handler:    cmdStats},
	{Name: "delay.peek", Arity: -2, Flags: ReadOnly, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Shows the next ready jobs of a queue without removing them.",
		Complexity: "O(N) where N is count",
		Args:       []Arg{key("key"), opt(integer("count"))},
		Handler:    cmdPeek},

	{Name: "llen", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Length of a queue's ready list.", Complexity: "O(1)",
		Args: []Arg{key("key")}, Handler: cmdLLen},
	{Name: "lrange", Arity: 4, Flags: ReadOnly, FirstKey: 1, LastKey: 1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Payloads of ready jobs start..stop (negative counts from the end).", Complexity: "O(S+N)",
		Args: []Arg{key("key"), integer("start"), integer("stop")}, Handler: cmdLRange},
	{Name: "lpop", Arity: -2, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Removes and returns ready jobs' payloads from the head, whatever their ack timeout.", Complexity: "O(N) where N is count",
		Args: []Arg{key("key"), opt(integer("count"))}, Handler: cmdLPop},
	{Name: "rpop", Arity: -2, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Removes and returns ready jobs' payloads from the tail, whatever their ack timeout.", Complexity: "O(N) where N is count",
		Args: []Arg{key("key"), opt(integer("count"))}, Handler: cmdRPop},
	{Name: "blpop", Arity: -3, Flags: Write | Blocking, FirstKey: 1, LastKey: -2, Step: 1, Group: "list", Since: "2.0.0",
		Summary: "LPOP of the first non-empty queue, blocking up to timeout seconds; replies [key, payload].", Complexity: "O(N) where N is the number of keys",
		Args: []Arg{many(key("key")), double("timeout")}, Handler: cmdBLPop},
	{Name: "brpop", Arity: -3, Flags: Write | Blocking, FirstKey: 1, LastKey: -2, Step: 1, Group: "list", Since: "2.0.0",
		Summary: "RPOP of the first non-empty queue, blocking up to timeout seconds; replies [key, payload].", Complexity: "O(N) where N is the number of keys",
		Args: []Arg{many(key("key")), double("timeout")}, Handler: cmdBRPop},
	{Name: "rpush", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Adds ready jobs with server-made ids at the tail; replies the ready length.", Complexity: "O(N) payloads",
		Args: []Arg{key("key"), many(str("payload"))}, Handler: cmdRPush},
	{Name: "lpush", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Adds ready jobs with server-made ids at the head; replies the ready length.", Complexity: "O(N) payloads",
		Args: []Arg{key("key"), many(str("payload"))}, Handler: cmdLPush},
	{Name: "del", Arity: -2, Flags: Write, FirstKey: 1, LastKey: -1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Removes every job of the queues, in any state; replies how many held a job.", Complexity: "O(N) jobs removed",
		Args: []Arg{many(key("key"))}, Handler: cmdDel},
	{Name: "exists", Arity: -2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: -1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Counts the keys that hold a job in any state.", Complexity: "O(N) keys",
		Args: []Arg{many(key("key"))}, Handler: cmdExists},
	{Name: "type", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "list if the key holds a job, else none.", Complexity: "O(1)",
		Args: []Arg{key("key")}, Handler: cmdType},

	{Name: "ping", Arity: -1, Flags: Fast, Group: "connection", Since: "1.0.0",
		Summary: "Returns PONG, or the message given.", Complexity: "O(1)",
		Args: []Arg{opt(str("message"))}, Handler: cmdPing},
	{Name: "echo", Arity: 2, Flags: Fast, Group: "connection", Since: "1.0.0",
		Summary: "Returns the message given.", Complexity: "O(1)",
		Args: []Arg{str("message")}, Handler: cmdEcho},
	{Name: "quit", Arity: -1, Flags: NoAuth | Fast, Group: "connection", Since: "1.0.0",
		Summary: "Closes the connection.", Complexity: "O(1)", Handler: cmdQuit},
	{Name: "select", Arity: 2, Flags: Fast | Loading, Group: "connection", Since: "1.0.0",
		Summary: "Selects database 0, the only one.", Complexity: "O(1)",
		Args: []Arg{integer("index")}, Handler: cmdSelect},
	{Name: "hello", Arity: -1, Flags: NoAuth | Fast | Loading, Group: "connection", Since: "6.0.0",
		Summary: "Handshakes: picks RESP2 or RESP3, authenticates, names the client.", Complexity: "O(1)",
		Args: []Arg{opt(block("arguments", integer("protover"),
			opt(block("auth", token("AUTH"), str("username"), str("password"))),
			opt(tok("SETNAME", str("clientname")))))},
		Handler: cmdHello},
	{Name: "auth", Arity: -2, Flags: NoAuth | Fast | Loading, Group: "connection", Since: "1.0.0",
		Summary: "Authenticates the connection.", Complexity: "O(1)",
		Args: []Arg{opt(str("username")), str("password")}, Handler: cmdAuth},
	{Name: "client", Arity: -2, Flags: Fast | Loading, Group: "connection", Since: "2.4.0",
		Summary: "Connections: SETNAME, GETNAME, ID, SETINFO, INFO, LIST [TYPE t] [ID id ...], KILL (ip:port, or ID, ADDR, LADDR, USER, SKIPME, MAXAGE filters), UNBLOCK id [TIMEOUT or ERROR], NO-EVICT, NO-TOUCH, TRACKING (on or off, REDIRECT id, BCAST, PREFIX p, OPTIN, OPTOUT, NOLOOP), CACHING, GETREDIR, TRACKINGINFO, HELP.", Complexity: "O(1), LIST and KILL O(N) clients",
		Args: []Arg{str("subcommand"), opt(many(str("arg")))}, Handler: cmdClient},
	{Name: "command", Arity: -1, Flags: Loading, Group: "server", Since: "2.8.13",
		Summary: "Describes the commands: COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND DOCS, COMMAND LIST.", Complexity: "O(N) commands",
		Args: []Arg{opt(str("subcommand")), opt(many(str("command-name")))}, Handler: cmdCommand},
	{Name: "info", Arity: -1, Flags: Loading, Group: "server", Since: "1.0.0",
		Summary: "Reports server, clients, memory, persistence, stats, replication and queues.", Complexity: "O(queues)",
		Args: []Arg{opt(many(str("section")))}, Handler: cmdInfo},
	{Name: "monitor", Arity: 1, Flags: Admin | Loading, Group: "server", Since: "1.0.0",
		Summary: "Streams every command the server runs, passwords and payloads redacted.", Complexity: "O(N) monitors per command",
		Handler: cmdMonitor},
	{Name: "slowlog", Arity: -2, Flags: Admin | Loading, Group: "server", Since: "2.2.12",
		Summary: "SLOWLOG GET [count], LEN, RESET, HELP: the last commands slower than slowlog-log-slower-than microseconds.", Complexity: "O(N) entries",
		Args: []Arg{str("subcommand"), opt(str("argument"))}, Handler: cmdSlowlog},
	{Name: "dbsize", Arity: 1, Flags: ReadOnly | Fast, Group: "server", Since: "1.0.0",
		Summary: "Counts the queues that hold at least one job.", Complexity: "O(queues)", Handler: cmdDBSize},
	{Name: "time", Arity: 1, Flags: Fast | Loading, Group: "server", Since: "2.6.0",
		Summary: "Returns the server's unix time: seconds and microseconds.", Complexity: "O(1)", Handler: cmdTime},
	{Name: "config", Arity: -2, Flags: Admin | Loading, Group: "server", Since: "2.0.0",
		Summary: "CONFIG GET pattern: a read-only view of the settings.", Complexity: "O(N) settings",
		Args: []Arg{str("subcommand"), opt(many(str("parameter")))}, Handler: cmdConfig},
	{Name: "bgrewriteaof", Arity: 1, Flags: Admin, Group: "server", Since: "1.0.0",
		Summary: "Rewrites the append-only log in the background.", Complexity: "O(1) to start",
		Handler: cmdBgRewrite},
	{Name: "shutdown", Arity: -1, Flags: Admin | Loading, Group: "server", Since: "1.0.0",
		Summary: "Stops the server; the log is flushed and fsynced either way.", Complexity: "O(N) jobs with SAVE",
		Args: []Arg{opt(oneof(token("NOSAVE"), token("SAVE")))}, Handler: cmdShutdown},
}

// Table returns the command table, in reference order.
func Table() []*Command { return table }

// Reference renders the command table as the README's Markdown reference.
func Reference() string {
	var sb strings.Builder
	group := ""
	for _, cmd := range table {
		if cmd.Group != group {
			group = cmd.Group
			sb.WriteString("\n| " + groupTitles[group] + " | what it does | cost |\n| --- | --- | --- |\n")
		}
		// A pipe inside a table cell must be escaped, even in code.
		syn := strings.ReplaceAll(cmd.Synopsis(), "|", "\\|")
		sb.WriteString("| `" + syn + "` | " + cmd.Summary + " | " + cmd.Complexity + " |\n")
	}
	return sb.String()
}

var groupTitles = map[string]string{
	"delay":      "delay queue",
	"list":       "Redis list commands on ready lists",
	"connection": "connection",
	"server":     "server",
}
