package commands

import (
	"strings"

	"github.com/delayd/delayd/acl"
)

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
	NoMulti                    // refused inside MULTI (it would make no sense queued)
	NoQueue                    // runs at once even inside MULTI: MULTI, EXEC, DISCARD, WATCH, QUIT
)

var flagNames = []struct {
	f    Flags
	name string
}{
	{Write, "write"}, {ReadOnly, "readonly"}, {Blocking, "blocking"}, {Admin, "admin"},
	{NoAuth, "no_auth"}, {Fast, "fast"}, {Loading, "loading"}, {NoMulti, "no_multi"},
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
	stat       int // its place in a dispatcher's command counters (metrics.go)

	keyOptions bool // an option takes a key (route.go)
	// keys finds the keys of a command whose keys move (DELAY.MPOP's
	// follow a count), where FirstKey, LastKey and Step are 0, as Redis's
	// movablekeys commands report them.
	keys func(args [][]byte) [][]byte

	cats      []string // ACL categories (acl.go)
	keyPerm   acl.Perm // what ACL key patterns must grant on its keys
	container bool     // has subcommands (acl.go's subcommandSpecs)
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
		if a.Type == "oneof" && !a.Optional && a.Token == "" && strings.Contains(s, " ") {
			s = "(" + s + ")" // alternatives of several words
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
	opt(tok("UNIQUE", integer("ttl-ms"))),
	opt(tok("DEBOUNCE", integer("max-wait-ms"))),
	opt(tok("GROUP", str("group"))),
	opt(tok("PRIORITY", integer("priority"))),
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
		Summary:    "Ends a reserved job's delivery: ready again now, or delayed for delay-ms; ERROR text (1 to 1024 bytes) becomes the job's last failure reason, kept through retries, dead letters and requeues; replies 1, or 0 if not reserved.",
		Complexity: "O(1)",
		Args:       []Arg{key("key"), str("id"), opt(integer("delay-ms")), opt(tok("ERROR", str("text")))},
		Handler:    cmdNack},
	{Name: "delay.touch", Arity: 3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Starts a reserved job's ack deadline again; replies 1, or 0 if not reserved.",
		Complexity: "O(1)",
		Args:       []Arg{key("key"), str("id")},
		Handler:    cmdTouch},
	{Name: "delay.get", Arity: 3, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Shows a job: id, queue, state, due, payload, deliveries, and ack_deadline, group, priority, a dead-lettered job's origin queue and its last failure reason (error) when it has them.",
		Complexity: "O(1)",
		Args:       []Arg{key("key"), str("id")},
		Handler:    cmdGet},
	{Name: "delay.stats", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Counts a queue's delayed, ready and reserved jobs; latency: ms its oldest ready job has waited since its due time (0 with none); its adds, deliveries, redeliveries, acks, nacks, expired and dead-lettered jobs; paused is 1 while DELAY.PAUSE holds it.",
		Complexity: "O(1); O(L) for a queue with L lanes of priorities and groups",
		Args:       []Arg{key("key")},
		Handler:    cmdStats},
	{Name: "delay.peek", Arity: -2, Flags: ReadOnly, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.1.0",
		Summary:    "Shows the next ready jobs of a queue without removing them.",
		Complexity: "O(N) where N is count",
		Args:       []Arg{key("key"), opt(integer("count"))},
		Handler:    cmdPeek},
	{Name: "delay.mpop", Arity: -4, Flags: Write | Blocking, Group: "delay", Since: "0.2.0",
		Summary:    "As BLMPOP: takes up to count ready jobs (default 1) of the first of numkeys queues that has one, each as DELAY.POP takes it, blocking up to timeout seconds (0: forever); replies [key, [[id, payload], ...]].",
		Complexity: "O(N+M) where N is the number of keys and M the jobs taken",
		Args:       []Arg{double("timeout"), integer("numkeys"), many(key("key")), opt(tok("COUNT", integer("count")))},
		Handler:    cmdMPop, keys: mpopKeys},
	{Name: "delay.reschedule", Arity: 4, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Moves a delayed or ready job to delay-ms from now (ready now if 0), keeping its id, payload, options and deliveries; replies 1, or 0 if it is not delayed or ready.",
		Complexity: "O(1)",
		Args:       []Arg{key("key"), str("id"), integer("delay-ms")},
		Handler:    cmdReschedule},
	{Name: "delay.rescheduleat", Arity: 4, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "DELAY.RESCHEDULE to an absolute unix time in milliseconds; a time now or past makes the job ready now.",
		Complexity: "O(1)",
		Args:       []Arg{key("key"), str("id"), integer("unix-ms")},
		Handler:    cmdRescheduleAt},
	{Name: "delay.promote", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Makes delayed jobs ready now, at the tail of the ready list in the order given; replies how many moved.",
		Complexity: "O(N) where N is the number of ids",
		Args:       []Arg{key("key"), many(str("id"))},
		Handler:    cmdPromote},
	{Name: "delay.limit", Arity: -2, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Sets a queue's flow limit (jobs reserved at once, takes per window, jobs reserved per group), removes it (OFF), or shows it (no option).",
		Complexity: "O(1), or O(G) where G is the number of groups of the queue when GROUPCONCURRENCY changes",
		Args: []Arg{key("key"), opt(oneof(
			block("limits",
				opt(tok("CONCURRENCY", integer("n"))),
				opt(block("rate", token("RATE"), integer("n"), integer("per-ms"))),
				opt(tok("GROUPCONCURRENCY", integer("n")))),
			token("OFF")))},
		Handler: cmdLimit},
	{Name: "delay.schedule", Arity: -6, Flags: Write, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Creates or replaces (by name) a recurring schedule; each firing adds a job with id name:T (T: fire time, unix ms).",
		Complexity: "O(1)",
		Args: []Arg{key("key"), str("name"),
			oneof(Arg{Name: "cron", Type: "block", Token: "CRON", Args: []Arg{str("expr"), opt(tok("TZ", str("zone")))}}, tok("EVERY", integer("ms"))),
			str("payload"), opt(tok("ACKTIMEOUT", integer("ms"))), opt(tok("RETRY", integer("n"))), opt(tok("DEADLETTER", key("dlq"))),
			opt(tok("MISFIRE", oneof(token("SKIP"), token("ONCE"), token("ALL")))), opt(tok("START", integer("unix-ms"))), opt(tok("END", integer("unix-ms")))},
		Handler: cmdSchedule},
	{Name: "delay.unschedule", Arity: 3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Removes a recurring schedule (the jobs it made stay); replies 1, or 0 if there was none.",
		Complexity: "O(1)",
		Args:       []Arg{key("key"), str("name")},
		Handler:    cmdUnschedule},
	{Name: "delay.schedules", Arity: -1, Flags: ReadOnly, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Lists a queue's recurring schedules (every queue's without a key): name, spec, next and last fire time, fired count.",
		Complexity: "O(N log N) where N is the number of schedules",
		Args:       []Arg{opt(key("key"))},
		Handler:    cmdSchedules},
	{Name: "delay.upcoming", Arity: -2, Flags: ReadOnly, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Shows the next delayed jobs of a queue in the order they will become ready, each as [id, due, payload]; count defaults to 10, at most 1000. AFTER due id starts after that job (the last of the page before), so a whole queue can be listed page by page.",
		Complexity: "O(J log N) where J is the delayed jobs of every queue due before the N-th of this one; at worst O(S) where S is all jobs (a sequential scan)",
		Args:       []Arg{key("key"), opt(integer("count")), opt(block("after", token("AFTER"), integer("due"), str("id")))},
		Handler:    cmdUpcoming},
	{Name: "delay.reserved", Arity: -2, Flags: ReadOnly, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Shows a queue's reserved jobs, the first whose ack deadline passes first, each as [id, ack-deadline, deliveries, payload]; count defaults to 10, at most 1000. AFTER ack-deadline id starts after that job, as DELAY.UPCOMING's.",
		Complexity: "O(J log N) where J is the wheel's jobs (delayed or reserved, any queue) due before the N-th of these; at worst O(S) where S is all jobs (a sequential scan)",
		Args:       []Arg{key("key"), opt(integer("count")), opt(block("after", token("AFTER"), integer("ack-deadline"), str("id")))},
		Handler:    cmdReserved},
	{Name: "delay.requeue", Arity: -3, Flags: Write, FirstKey: 1, LastKey: -1, Step: 2, Group: "delay", Since: "0.2.0",
		Summary:    "Moves ready dead-lettered jobs of key (one, or ALL) back to the queue they came from with the options they had there, or to to-key, deliveries reset; replies how many moved.",
		Complexity: "O(1) for one id, O(N) for ALL where N is the ready jobs of key",
		Args:       []Arg{key("key"), oneof(str("id"), token("ALL")), opt(key("to-key"))},
		Handler:    cmdRequeue},
	{Name: "delay.pause", Arity: 2, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Pauses a queue: it keeps its jobs and their timing but hands nothing out until DELAY.RESUME; survives restarts.",
		Complexity: "O(1)",
		Args:       []Arg{key("key")},
		Handler:    cmdPause},
	{Name: "delay.resume", Arity: 2, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.2.0",
		Summary:    "Resumes a paused queue and serves its blocked clients.",
		Complexity: "O(1), plus the blocked clients served",
		Args:       []Arg{key("key")},
		Handler:    cmdResume},
	{Name: "delay.scan", Arity: -3, Flags: ReadOnly, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.3.0",
		Summary:    "Iterates over a queue's jobs in every state, as SCAN does over keys: replies [next-cursor, [job, ...]], each job a map of DELAY.GET's fields but the queue (id, state, due, payload, deliveries, and ack_deadline, group, priority, origin and error when it has them), then seq, ack_timeout, retry, and deadletter and a dead letter's origin_ack_timeout, origin_retry, origin_deadletter when it has them; start with cursor 0, stop when it comes back 0. A job present for the whole iteration is returned exactly once, or at least once if it went between memory and the far-future buckets on disk meanwhile (--far-buckets); a page may hold fewer than count jobs, even none. COUNT defaults to 100, at most 10000.",
		Complexity: "O(N) for every call, where N is the job slots visited: at most 16 times count, and 4096 at least; O(S) for a complete iteration, where S is the job slots of every queue",
		Args:       []Arg{key("key"), integer("cursor"), opt(tok("COUNT", integer("count")))},
		Handler:    cmdScanJobs},
	{Name: "delay.import", Arity: -5, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "delay", Since: "0.3.0",
		Summary:    "Writes a job as another server had it (delayd import): with its id, due time (now or past: ready now, at the tail), options, DELIVERIES count, a dead letter's ORIGIN queue and options (ack-timeout-ms -1: the default; retry -1: unlimited; dead-letter-key \"\": none) and last failure reason (ERROR); replies the id, or nil if the queue holds that id already, which changes nothing.",
		Complexity: "O(1)",
		Args: []Arg{key("key"), str("id"), integer("unix-ms"), str("payload"),
			opt(tok("ACKTIMEOUT", integer("ms"))), opt(tok("RETRY", integer("n"))), opt(tok("DEADLETTER", key("dead-letter-key"))),
			opt(tok("GROUP", str("group"))), opt(tok("PRIORITY", integer("priority"))), opt(tok("DELIVERIES", integer("n"))),
			opt(block("origin", token("ORIGIN"), str("queue"), integer("ack-timeout-ms"), integer("retry"), str("dead-letter-key"))),
			opt(tok("ERROR", str("text")))},
		Handler: cmdImport},

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
		Summary: "Removes every job of the queues, in any state; replies how many held a job. The jobs are freed in the background.", Complexity: "O(N) queues",
		Args: []Arg{many(key("key"))}, Handler: cmdDel},
	{Name: "unlink", Arity: -2, Flags: Write | Fast, FirstKey: 1, LastKey: -1, Step: 1, Group: "list", Since: "4.0.0",
		Summary: "DEL: both free the jobs in the background.", Complexity: "O(N) queues",
		Args: []Arg{many(key("key"))}, Handler: cmdDel},
	{Name: "exists", Arity: -2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: -1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Counts the keys that hold a job in any state.", Complexity: "O(N) keys",
		Args: []Arg{many(key("key"))}, Handler: cmdExists},
	{Name: "type", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "list if the key holds a job, else none.", Complexity: "O(1)",
		Args: []Arg{key("key")}, Handler: cmdType},
	{Name: "lmove", Arity: 5, Flags: Write, FirstKey: 1, LastKey: 2, Step: 1, Group: "list", Since: "6.2.0",
		Summary: "Moves the ready job at one end of source to one end of destination's ready list (one log record; the job keeps its id, payload and options); replies its payload.", Complexity: "O(1)",
		Args: []Arg{key("source"), key("destination"), oneof(token("LEFT"), token("RIGHT")), oneof(token("LEFT"), token("RIGHT"))}, Handler: cmdLMove},
	{Name: "blmove", Arity: 6, Flags: Write | Blocking, FirstKey: 1, LastKey: 2, Step: 1, Group: "list", Since: "6.2.0",
		Summary: "LMOVE, blocking up to timeout seconds in source's queue of waiters; a null array on timeout.", Complexity: "O(1)",
		Args: []Arg{key("source"), key("destination"), oneof(token("LEFT"), token("RIGHT")), oneof(token("LEFT"), token("RIGHT")), double("timeout")}, Handler: cmdBLMove},
	{Name: "rpoplpush", Arity: 3, Flags: Write, FirstKey: 1, LastKey: 2, Step: 1, Group: "list", Since: "1.2.0",
		Summary: "LMOVE source destination RIGHT LEFT.", Complexity: "O(1)",
		Args: []Arg{key("source"), key("destination")}, Handler: cmdRPopLPush},
	{Name: "brpoplpush", Arity: 4, Flags: Write | Blocking, FirstKey: 1, LastKey: 2, Step: 1, Group: "list", Since: "2.2.0",
		Summary: "BLMOVE source destination RIGHT LEFT timeout.", Complexity: "O(1)",
		Args: []Arg{key("source"), key("destination"), double("timeout")}, Handler: cmdBRPopLPush},
	{Name: "lrem", Arity: 4, Flags: Write, FirstKey: 1, LastKey: 1, Step: 1, Group: "list", Since: "1.0.0",
		Summary: "Removes ready jobs whose payload is element: count > 0 the first count from the head, < 0 from the tail, 0 all; replies how many.", Complexity: "O(N) ready jobs",
		Args: []Arg{key("key"), integer("count"), str("element")}, Handler: cmdLRem},

	{Name: "scan", Arity: -2, Flags: ReadOnly, Group: "generic", Since: "2.8.0",
		Summary: "Iterates the keys (queues holding a job in any state): replies the next cursor (0: done) and a batch of names.", Complexity: "O(1) per call, O(queues) for a whole scan",
		Args: []Arg{integer("cursor"), opt(tok("MATCH", str("pattern"))), opt(tok("COUNT", integer("count"))), opt(tok("TYPE", str("type")))}, Handler: cmdScan},
	{Name: "ttl", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "generic", Since: "1.0.0",
		Summary: "-1 for a queue holding a job (queues never expire), -2 for no such key.", Complexity: "O(1)",
		Args: []Arg{key("key")}, Handler: cmdTTL},
	{Name: "pttl", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "generic", Since: "2.6.0",
		Summary: "TTL: -1 for a queue holding a job, -2 for no such key.", Complexity: "O(1)",
		Args: []Arg{key("key")}, Handler: cmdTTL},
	{Name: "keys", Arity: 2, Flags: ReadOnly, Group: "generic", Since: "1.0.0",
		Summary: "The keys matching a glob pattern (`*`, `?`, `[a-z]`, `[^a]`, `\\` escapes).", Complexity: "O(queues)",
		Args: []Arg{str("pattern")}, Handler: cmdKeys},
	{Name: "wait", Arity: 3, Group: "generic", Since: "3.0.0",
		Summary: "Cluster mode: waits up to timeout ms (0: forever) until numreplicas followers hold the client's writes; replies how many do. A single node replies 0 at once.", Complexity: "O(1)",
		Args: []Arg{integer("numreplicas"), integer("timeout")}, Handler: cmdWait},

	{Name: "ping", Arity: -1, Flags: Fast, Group: "connection", Since: "1.0.0",
		Summary: "Returns PONG, or the message given.", Complexity: "O(1)",
		Args: []Arg{opt(str("message"))}, Handler: cmdPing},
	{Name: "echo", Arity: 2, Flags: Fast, Group: "connection", Since: "1.0.0",
		Summary: "Returns the message given.", Complexity: "O(1)",
		Args: []Arg{str("message")}, Handler: cmdEcho},
	{Name: "quit", Arity: -1, Flags: NoAuth | Fast | NoQueue | Loading, Group: "connection", Since: "1.0.0",
		Summary: "Closes the connection.", Complexity: "O(1)", Handler: cmdQuit},
	{Name: "subscribe", Arity: -2, Flags: Loading | NoMulti, Group: "pubsub", Since: "2.0.0",
		Summary: "Only for __redis__:invalidate: a RESP2 connection that CLIENT TRACKING ... REDIRECT names gets the invalidations as messages.", Complexity: "O(N) channels",
		Args: []Arg{many(str("channel"))}, Handler: cmdSubscribe},
	{Name: "unsubscribe", Arity: -1, Flags: Loading | NoMulti, Group: "pubsub", Since: "2.0.0",
		Summary: "Leaves __redis__:invalidate (every channel without arguments).", Complexity: "O(N) channels",
		Args: []Arg{opt(many(str("channel")))}, Handler: cmdUnsubscribe},
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
		Summary: "Connections: SETNAME, GETNAME, ID, SETINFO, INFO, LIST [TYPE t] [ID id ...], KILL (ip:port, or ID, ADDR, LADDR, USER, SKIPME, MAXAGE filters), UNBLOCK id [TIMEOUT or ERROR], NO-EVICT, NO-TOUCH, TRACKING (on or off, REDIRECT id, BCAST, PREFIX p, OPTIN, OPTOUT, NOLOOP), CACHING, GETREDIR, TRACKINGINFO, REPLY (ON, OFF or SKIP), HELP.", Complexity: "O(1), LIST and KILL O(N) clients",
		Args: []Arg{str("subcommand"), opt(many(str("arg")))}, Handler: cmdClient},
	{Name: "command", Arity: -1, Flags: Loading, Group: "server", Since: "2.8.13",
		Summary: "Describes the commands: COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND DOCS, COMMAND LIST, COMMAND GETKEYS command [arg ...].", Complexity: "O(N) commands",
		Args: []Arg{opt(str("subcommand")), opt(many(str("command-name")))}, Handler: cmdCommand},
	{Name: "info", Arity: -1, Flags: Loading, Group: "server", Since: "1.0.0",
		Summary: "Reports server, clients, memory, persistence, stats, replication, cpu and queues; commandstats and lateness when named.", Complexity: "O(queues)",
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
		Summary: "CONFIG GET pattern: a read-only view of the settings; CONFIG RESETSTAT zeroes the statistics, as Redis.", Complexity: "O(N) settings",
		Args: []Arg{str("subcommand"), opt(many(str("parameter")))}, Handler: cmdConfig},
	{Name: "acl", Arity: -2, Flags: Admin | Loading, Group: "server", Since: "6.0.0",
		Summary:    "ACL SETUSER, GETUSER, DELUSER, USERS, LIST, WHOAMI, CAT, LOG, SAVE, LOAD: users, their passwords, commands and key patterns.",
		Complexity: "O(N) users or rules", Args: []Arg{str("subcommand"), opt(many(str("arg")))}, Handler: cmdACL},
	{Name: "bgrewriteaof", Arity: 1, Flags: Admin, Group: "server", Since: "1.0.0",
		Summary: "Rewrites the append-only log in the background.", Complexity: "O(1) to start",
		Handler: cmdBgRewrite},
	{Name: "bgsave", Arity: -1, Flags: Admin | NoMulti, Group: "server", Since: "0.3.0",
		Summary:    "Writes a backup (every job, schedule, limit, pause and tombstone) to delayd.backup in the data directory in the background; captured at once, on a cluster on the leader at a Raft index.",
		Complexity: "O(N) jobs, copied under the lock", Args: []Arg{opt(token("SCHEDULE"))}, Handler: cmdBgsave},
	{Name: "lastsave", Arity: 1, Flags: Fast | Loading, Group: "server", Since: "0.3.0",
		Summary: "Returns the unix time of the last successful BGSAVE (the server's start before any).", Complexity: "O(1)",
		Handler: cmdLastsave},
	{Name: "sync", Arity: 1, Flags: Admin | NoMulti, Group: "server", Since: "0.3.0",
		Summary:    "Sends a backup file as one bulk string, then closes the connection: what redis-cli --rdb and delayd backup read.",
		Complexity: "O(N) jobs, copied under the lock", Handler: cmdSync},
	{Name: "replconf", Arity: -1, Flags: Admin | Fast, Group: "server", Since: "0.3.0",
		Summary: "Accepts what redis-cli --rdb sends before SYNC (capa, rdb-only, rdb-filter-only); refuses a replica's options.", Complexity: "O(1)",
		Args: []Arg{opt(many(str("argument")))}, Handler: cmdReplconf},
	{Name: "shutdown", Arity: -1, Flags: Admin | Loading | NoMulti, Group: "server", Since: "1.0.0",
		Summary: "Stops the server; the log is flushed and fsynced either way.", Complexity: "O(N) jobs with SAVE",
		Args: []Arg{opt(oneof(token("NOSAVE"), token("SAVE")))}, Handler: cmdShutdown},
	{Name: "flushdb", Arity: -1, Flags: Write, Group: "server", Since: "1.0.0",
		Summary: "Removes every job of every queue (one log record); blocked clients stay blocked.", Complexity: "O(queues)",
		Args: []Arg{opt(oneof(token("ASYNC"), token("SYNC")))}, Handler: cmdFlush},
	{Name: "flushall", Arity: -1, Flags: Write, Group: "server", Since: "1.0.0",
		Summary: "FLUSHDB: there is one database.", Complexity: "O(queues)",
		Args: []Arg{opt(oneof(token("ASYNC"), token("SYNC")))}, Handler: cmdFlush},
	{Name: "memory", Arity: -2, Flags: ReadOnly, Group: "server", Since: "4.0.0",
		Summary: "MEMORY USAGE key [SAMPLES n]: the bytes a queue holds (null if it is not a key); MEMORY STATS; MEMORY HELP.", Complexity: "O(1)",
		Args: []Arg{str("subcommand"), opt(many(str("arg")))}, Handler: cmdMemory},

	{Name: "multi", Arity: 1, Flags: Fast | Loading | NoQueue, Group: "transactions", Since: "1.2.0",
		Summary: "Starts a transaction: the commands that follow are queued until EXEC.", Complexity: "O(1)",
		Handler: cmdMulti},
	{Name: "exec", Arity: 1, Flags: NoQueue, Group: "transactions", Since: "1.2.0",
		Summary:    "Runs the queued commands with no other client's command in between, logged as one unit; replies their replies, or null if a watched key changed.",
		Complexity: "The sum of the queued commands' costs", Handler: cmdExec},
	{Name: "discard", Arity: 1, Flags: Fast | Loading | NoQueue, Group: "transactions", Since: "2.0.0",
		Summary: "Drops the queued commands and every WATCH.", Complexity: "O(N) queued commands",
		Handler: cmdDiscard},
	{Name: "watch", Arity: -2, Flags: Fast | NoQueue, FirstKey: 1, LastKey: -1, Step: 1, Group: "transactions", Since: "2.2.0",
		Summary: "Makes the next EXEC run nothing (and reply null) if any of these queues changes before it.", Complexity: "O(1) per key",
		Args: []Arg{many(key("key"))}, Handler: cmdWatch},
	{Name: "unwatch", Arity: 1, Flags: Fast, Group: "transactions", Since: "2.2.0",
		Summary: "Forgets every WATCH of the connection.", Complexity: "O(N) watched keys",
		Handler: cmdUnwatch},

	{Name: "cluster", Arity: -2, Flags: Loading, Group: "cluster", Since: "3.0.0",
		Summary: "Cluster mode: INFO, MYID, MYSHARDID, NODES, SLOTS, SHARDS (one shard per Raft group: its leader as master, followers as replicas), KEYSLOT key, COUNTKEYSINSLOT slot, GETKEYSINSLOT slot count, MEET ip port [bus-port] (sent to a node in no group: it joins that member's cluster, and to a cluster of several groups brings a group of its own), FORGET node-id (OK again for a node already forgotten; of an address of a group add-node brought, once it owns no slot, removes that group and its node), REPLICATE node-id (OK for the address's own leader, and at a replica of a group owning no slot: what del-node sends), RESET [HARD|SOFT] (OK on a node no group holds, what del-node sends it), JOIN node-id bus-addr client-addr, FAILOVER [FORCE|TAKEOVER] (on a replica: its group's leadership handed to it), HANDOVER node-id, GROUPS (each group's slots, this node's address for it, empty when it holds no replica, its voters, and 1 for a group add-node brought), SETSLOT slot IMPORTING|MIGRATING|NODE node-id | STABLE (moves a slot between Raft groups, through group 0's log), ADDSLOTS slot ... (the slots become this group's), DELSLOTS slot ... (refused for a slot this group owns: none is left unassigned), BUMPEPOCH (STILL: epochs are terms), SLOTCHANGE json (what SETSLOT sends group 0's leader; answers the entry's index), SLOTINDEX (group 0's leader: the index it applied, what a new leader of another group waits for), HELP.", Complexity: "O(1); NODES, SLOTS, SHARDS O(N) nodes; COUNTKEYSINSLOT, GETKEYSINSLOT O(queues)",
		Args: []Arg{str("subcommand"), opt(many(str("arg")))}, Handler: cmdCluster},
	{Name: "readonly", Arity: 1, Flags: Fast | Loading, Group: "cluster", Since: "3.0.0",
		Summary: "Cluster mode: a follower serves this connection's reads, from state that may lag the leader's, instead of redirecting them.", Complexity: "O(1)",
		Handler: cmdReadOnly},
	{Name: "readwrite", Arity: 1, Flags: Fast | Loading, Group: "cluster", Since: "3.0.0",
		Summary: "Cluster mode: ends READONLY; reads go to the leader again.", Complexity: "O(1)",
		Handler: cmdReadOnly},
	{Name: "migrate", Arity: -6, Flags: Write | Admin | NoMulti, Group: "cluster", Since: "0.3.0",
		Summary:    "Cluster mode, several Raft groups: moves whole queues (every job in its state, schedules, limit, pause) to the leader of another group, as redis-cli --cluster reshard sends it: MIGRATE host port \"\" 0 timeout [COPY] [REPLACE] [AUTH password | AUTH2 username password] KEYS key [key ...]. The target commits each queue as one entry of its log, then this group drops it; meanwhile commands on those queues get TRYAGAIN. REPLACE changes nothing: a queue the target has takes the jobs it lacks. NOKEY when no queue holds anything.",
		Complexity: "O(N) jobs and schedules of the queues",
		Args: []Arg{str("host"), integer("port"), str("key"), integer("destination-db"), integer("timeout"),
			opt(tok("COPY", Arg{Name: "copy", Type: "pure-token"})), opt(tok("REPLACE", Arg{Name: "replace", Type: "pure-token"})),
			opt(tok("AUTH", str("password"))), opt(tok("AUTH2", block("auth2", str("username"), str("password")))),
			opt(block("keys", token("KEYS"), many(str("key"))))},
		Handler: cmdMigrate, keys: migrateKeys},
	{Name: "restore-asking", Arity: -4, Flags: Write | Admin | NoMulti, FirstKey: 1, LastKey: 1, Step: 1, Group: "cluster", Since: "0.3.0",
		Summary:    "Cluster mode, several Raft groups: what MIGRATE sends the target, RESTORE-ASKING key 0 payload [REPLACE]: applies a queue as the source exported it, as one entry of this group's log, taking only the jobs it lacks; runs on a slot this group imports.",
		Complexity: "O(N) records of the payload",
		Args:       []Arg{key("key"), integer("ttl"), str("serialized-value"), opt(tok("REPLACE", Arg{Name: "replace", Type: "pure-token"}))},
		Handler:    cmdRestoreAsking},
	{Name: "asking", Arity: 1, Flags: Fast, Group: "cluster", Since: "3.0.0",
		Summary: "Cluster mode: the next command may run on a slot this Raft group imports (CLUSTER SETSLOT IMPORTING), as a client does after an ASK redirection.", Complexity: "O(1)",
		Handler: cmdAsking},
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
	"delay":        "delay queue",
	"list":         "Redis list commands on ready lists",
	"generic":      "keyspace",
	"connection":   "connection",
	"server":       "server",
	"transactions": "transactions",
	"cluster":      "cluster",
}
