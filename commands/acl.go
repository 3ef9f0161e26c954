package commands

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/delayd/delayd/acl"
)

// ACL users (package acl holds them): the categories of each command, the
// check before every handler, AUTH as a user, the ACL command and ACL LOG.

// init gives every command its categories and what it does to its keys,
// derived from its flags and group, so a new command gets them without a
// line of its own unless it is dangerous or only reads metadata.
func init() {
	for _, cmd := range table {
		cmd.cats, cmd.keyPerm = categories(cmd)
		_, cmd.container = subcommandSpecs[cmd.Name]
	}
}

// dangerous are the commands Redis puts in @dangerous (and @admin): they
// change or reveal the server, or wipe data.
var dangerous = map[string]bool{
	"flushall": true, "flushdb": true, "shutdown": true, "config": true, "bgrewriteaof": true,
	"monitor": true, "cluster": true, "acl": true, "client": true, "slowlog": true, "keys": true,
	"debug": true, "info": true,
}

// readsContent are the writes that also hand the key's contents back (a
// pop), which need %R as well as %W, as Redis's ACCESS key flag does.
var readsContent = map[string]bool{
	"delay.pop": true, "delay.mpop": true, "lpop": true, "rpop": true, "blpop": true, "brpop": true,
	"lmove": true, "blmove": true, "rpoplpush": true, "brpoplpush": true,
}

// metadataOnly are the reads that see only a key's existence, type or size:
// like Redis's RO keys without ACCESS, any pattern that matches will do.
var metadataOnly = map[string]bool{
	"exists": true, "type": true, "ttl": true, "pttl": true, "llen": true, "delay.stats": true, "watch": true,
}

// subcommandSpec is what ACL knows of a container's subcommands: rules
// may name them ("+config|get", "-client|kill"), NOPERM and ACL LOG name
// them, and each has its own categories, as in Redis 7, where CLIENT ID is
// @slow @connection but CLIENT KILL also @admin @dangerous. All are @slow;
// admin ones are those Redis 7.2 flags ADMIN (src/commands/*.json), which
// makes them @admin @dangerous; group is the category Redis gives all of a
// container's subcommands, if any.
type subcommandSpec struct {
	group string
	plain []string
	admin []string
	read  []string // read a key's contents: @read
}

// subcommandSpecs are the subcommands each container answers (a test
// checks each is dispatched).
var subcommandSpecs = map[string]subcommandSpec{
	"acl": {plain: []string{"cat", "genpass", "help", "whoami"},
		admin: []string{"deluser", "dryrun", "getuser", "list", "load", "log", "save", "setuser", "users"}},
	"client": {group: "connection",
		plain: []string{"caching", "getname", "getredir", "help", "id", "info", "no-touch", "reply", "setinfo", "setname", "tracking", "trackinginfo"},
		admin: []string{"kill", "list", "no-evict", "unblock"}},
	"cluster": {plain: []string{"countkeysinslot", "getkeysinslot", "groups", "help", "info", "keyslot", "myid", "myshardid", "nodes", "shards", "slots"},
		admin: []string{"addslots", "bumpepoch", "delslots", "failover", "forget", "handover", "join", "meet", "replicate", "reset", "setslot", "slotchange", "slotindex"}},
	"command": {group: "connection", plain: []string{"count", "docs", "getkeys", "info", "list"}},
	"config":  {admin: []string{"get", "resetstat", "rewrite", "set"}},
	"memory":  {plain: []string{"help", "stats"}, read: []string{"usage"}},
	"slowlog": {plain: []string{"help"}, admin: []string{"get", "len", "reset"}},
}

// subArity is Redis 7.2's arity of the subcommands of the containers whose
// handlers check it (src/commands/*.json; it counts the container and the
// subcommand): a call with the wrong count gets Redis's arity error,
// which names the subcommand.
var subArity = map[string]int{
	"acl|cat": -2, "acl|deluser": -3, "acl|dryrun": -4, "acl|genpass": -2, "acl|getuser": 3,
	"acl|help": 2, "acl|list": 2, "acl|load": 2, "acl|log": -2, "acl|save": 2, "acl|setuser": -3,
	"acl|users": 2, "acl|whoami": 2, "client|caching": 3, "client|getname": 2, "client|getredir": 2,
	"client|help": 2, "client|id": 2, "client|info": 2, "client|kill": -3, "client|list": -2,
	"client|no-evict": 3, "client|no-touch": 3, "client|pause": -3, "client|reply": 3,
	"client|setinfo": 4, "client|setname": 3, "client|tracking": -3, "client|trackinginfo": 2,
	"client|unblock": -3, "client|unpause": 2, "config|get": -3, "config|help": 2,
	"config|resetstat": 2, "config|rewrite": 2, "config|set": -4, "slowlog|get": -2, "slowlog|help": 2,
	"slowlog|len": 2, "slowlog|reset": 2,
}

// checkSubArity answers a known subcommand called with the wrong number of
// arguments as Redis 7.2's processCommand does; false means it answered.
func checkSubArity(c *Client, container string, args [][]byte) bool {
	name := container + "|" + strings.ToLower(string(args[1]))
	a, ok := subArity[name]
	if !ok || a > 0 && len(args) == a || a < 0 && len(args) >= -a {
		return true
	}
	c.W.Error("ERR wrong number of arguments for '" + clip([]byte(name)) + "' command")
	return false
}

// subError answers a subcommand the handler cannot run: Redis's "unknown
// subcommand" for one it does not know, and for a known one whose
// arguments do not fit (addReplySubcommandSyntaxError) the longer form.
func subError(c *Client, container string, args [][]byte) {
	if _, ok := subArity[container+"|"+strings.ToLower(string(args[1]))]; ok {
		c.W.Error("ERR unknown subcommand or wrong number of arguments for '" + clip(args[1]) + "'. Try " + upper(container) + " HELP.")
		return
	}
	c.W.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try " + upper(container) + " HELP.")
}

// subcommandCats maps "container|sub" to its categories, in ACL CAT's
// order; built from subcommandSpecs.
var subcommandCats = func() map[string][]string {
	m := map[string][]string{}
	for cont, spec := range subcommandSpecs {
		add := func(subs []string, cats ...string) {
			for _, sub := range subs {
				var c []string
				if slices.Contains(cats, "read") {
					c = append(c, "read")
				}
				if spec.group != "" {
					c = append(c, spec.group)
				}
				c = append(c, "slow")
				if slices.Contains(cats, "admin") {
					c = append(c, "admin", "dangerous")
				}
				m[cont+"|"+sub] = c
			}
		}
		add(spec.plain)
		add(spec.admin, "admin")
		add(spec.read, "read")
	}
	return m
}()

// aclName is the name ACL rules, NOPERM and ACL LOG use for a call:
// "container|sub" for a container's known subcommand, with that
// subcommand's categories; else the command's own.
func aclName(cmd *Command, args [][]byte) (string, []string) {
	if _, ok := subcommandSpecs[cmd.Name]; !ok || len(args) < 2 || len(args[1]) > 32 {
		return cmd.Name, cmd.cats
	}
	name := cmd.Name + "|" + strings.ToLower(string(args[1]))
	if cats, ok := subcommandCats[name]; ok {
		return name, cats
	}
	return cmd.Name, cmd.cats
}

// ruleName says what a name in an ACL rule is (acl.Names).
func (d *Dispatcher) ruleName(name string) acl.Kind {
	cont, _, isSub := strings.Cut(name, "|")
	if d.byName[cont] == nil {
		return acl.Unknown
	}
	_, container := subcommandSpecs[cont]
	switch {
	case isSub && subcommandCats[name] != nil:
		return acl.Subcommand
	case isSub:
		return acl.Unknown
	case container:
		return acl.Container
	}
	return acl.Command
}

func categories(cmd *Command) ([]string, acl.Perm) {
	var cats []string
	var perm acl.Perm
	switch {
	case cmd.Flags&Write != 0:
		cats = append(cats, "write")
		perm = acl.Write
		if readsContent[cmd.Name] {
			perm |= acl.Read
		}
	case cmd.Flags&ReadOnly != 0:
		cats = append(cats, "read")
		if !metadataOnly[cmd.Name] {
			perm = acl.Read
		}
	}
	switch cmd.Group {
	case "delay", "list", "connection":
		cats = append(cats, cmd.Group)
	case "generic":
		cats = append(cats, "keyspace")
	case "transactions":
		cats = append(cats, "transaction")
	case "pubsub":
		cats = append(cats, "pubsub")
	}
	if cmd.Name == "del" || cmd.Name == "exists" || cmd.Name == "type" || cmd.Name == "flushdb" || cmd.Name == "flushall" {
		cats = append(cats, "keyspace")
	}
	if cmd.Flags&Fast != 0 {
		cats = append(cats, "fast")
	} else {
		cats = append(cats, "slow")
	}
	if cmd.Flags&Blocking != 0 {
		cats = append(cats, "blocking")
	}
	if cmd.Flags&Admin != 0 || dangerous[cmd.Name] {
		if cmd.Name != "keys" && cmd.Name != "info" { // @dangerous only, as Redis
			cats = append(cats, "admin")
		}
		cats = append(cats, "dangerous")
	}
	return cats, perm
}

// checkACL is the permission check, after arity as Redis does it; false
// means it answered NOPERM. A user with every command on every key pays one
// branch.
func (d *Dispatcher) checkACL(c *Client, cmd *Command, args [][]byte) bool {
	if msg := d.denied(c, cmd, args); msg != "" {
		d.reject(c, cmd, msg)
		return false
	}
	return true
}

// denied is the NOPERM line for a command c's user may not run, logged in
// ACL LOG, or "".
func (d *Dispatcher) denied(c *Client, cmd *Command, args [][]byte) string {
	h := c.user.Load()
	if h == nil {
		return ""
	}
	u := h.User()
	if u.Open() || cmd.Flags&NoAuth != 0 { // AUTH, HELLO, QUIT: always, as Redis
		return ""
	}
	var keys []acl.Key
	if cmd.FirstKey > 0 || cmd.keys != nil || cmd.keyOptions {
		for _, k := range commandKeys(cmd, args) {
			keys = append(keys, acl.Key{Name: k, Perm: cmd.keyPerm})
		}
	}
	name, cats := aclName(cmd, args)
	reason, obj := u.Check(name, cats, keys)
	switch reason {
	case acl.OK:
		return ""
	case acl.DenyCmd:
		d.aclLog.add(d, c, reason, name, u.Name)
		return "NOPERM User " + clip([]byte(u.Name)) + " has no permissions to run the '" + clip([]byte(name)) + "' command"
	default:
		d.aclLog.add(d, c, reason, obj, u.Name)
		return errNoPermKey
	}
}

// errNoPermKey is Redis 7.2's refusal of a key (getAclErrorMessage, not
// verbose): it names neither the user nor the key.
const errNoPermKey = "NOPERM No permissions to access a key"

// userName is the user c is authenticated as (CLIENT LIST's user=).
func (c *Client) userName() string {
	if h := c.user.Load(); h != nil {
		return h.User().Name
	}
	return "default"
}

// User is the name of the user c runs as.
func (c *Client) User() string { return c.userName() }

// Authenticate checks a user name and password as AUTH does (for the HTTP
// side).
func (d *Dispatcher) Authenticate(user, pass string) bool {
	_, ok := d.acl.Authenticate(user, pass)
	return ok
}

// HasUser reports whether an ACL user has this name.
func (d *Dispatcher) HasUser(name string) bool { return d.acl.Get(name) != nil }

// NeedsAuth reports whether some user must give a password, so the HTTP
// side must ask for one.
func (d *Dispatcher) NeedsAuth() bool { return d.acl.NeedsPassword() }

// DefaultNeedsPassword reports whether the default user (the one a client
// is before AUTH) needs a password or is off: protected mode's question.
func (d *Dispatcher) DefaultNeedsPassword() bool {
	h := d.acl.Get("default")
	if h == nil {
		return true
	}
	u := h.User()
	return !u.On || !u.NoPass
}

// SetUser makes c run as the user named (the HTTP side sets its request's
// user); false if there is no such user.
func (d *Dispatcher) SetUser(c *Client, name string) bool {
	h := d.acl.Get(name)
	if h == nil {
		return false
	}
	c.user.Store(h)
	c.Authed = true
	return true
}

// auth authenticates c as user (nil: default) with pass; on a failure it
// logs the attempt and answers WRONGPASS.
func (d *Dispatcher) auth(c *Client, user, pass []byte) bool {
	name := "default"
	if user != nil {
		name = string(user)
	}
	h, ok := d.acl.Authenticate(name, string(pass))
	if !ok {
		d.aclLog.add(d, c, acl.DenyAuth, "AUTH", name)
		c.W.Error(errWrongPass)
		return false
	}
	c.user.Store(h)
	c.Authed = true
	return true
}

// LoadACLFile reads --aclfile at start; a missing file means no users yet
// (ACL SAVE creates it), a bad one is an error, as Redis refuses to start.
func (d *Dispatcher) LoadACLFile() error {
	if d.opts.ACLFile == "" {
		return nil
	}
	b, err := os.ReadFile(d.opts.ACLFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = d.acl.Load(string(b), d.opts.ACLFile)
	return err
}

// aclHelp is ACL HELP's lines: the subcommands delayd has.
var aclHelp = []string{
	"CAT [<category>]",
	"    List all commands that belong to <category>, or all command categories",
	"    when no category is specified.",
	"DELUSER <username> [<username> ...]",
	"    Delete a list of users.",
	"DRYRUN <username> <command> [<arg> ...]",
	"    Returns whether the user can execute the given command without executing the command.",
	"GENPASS [<bits>]",
	"    Generate a secure 256-bit user password. The optional `bits` argument can",
	"    be used to specify a different size.",
	"GETUSER <username>",
	"    Get the user's details.",
	"LIST",
	"    Show users details in config file format.",
	"LOAD",
	"    Reload users from the ACL file.",
	"LOG [<count> | RESET]",
	"    Show the ACL log entries.",
	"SAVE",
	"    Save the current config to the ACL file.",
	"SETUSER <username> <attribute> [<attribute> ...]",
	"    Create or modify a user with the specified attributes.",
	"USERS",
	"    List all the registered usernames.",
	"WHOAMI",
	"    Return the current connection username.",
}

const errNoACLFile = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."

func cmdACL(d *Dispatcher, c *Client, args [][]byte) {
	if !checkSubArity(c, "acl", args) {
		return
	}
	sub := strings.ToLower(string(args[1]))
	w := c.W
	wrongArgs := func() { w.Error("ERR wrong number of arguments for 'acl|" + sub + "' command") }
	switch sub {
	case "setuser":
		if len(args) < 3 {
			wrongArgs()
			return
		}
		rules := make([]string, len(args)-3)
		for i, a := range args[3:] {
			rules[i] = string(a)
		}
		if err := d.acl.SetUser(string(args[2]), rules); err != nil {
			w.Error("ERR " + err.Error())
			return
		}
		w.Status("OK")
	case "getuser":
		if len(args) != 3 {
			wrongArgs()
			return
		}
		h := d.acl.Get(string(args[2]))
		if h == nil {
			w.Null()
			return
		}
		u := h.User()
		w.Map(6)
		w.BulkString("flags")
		w.Array(len(u.Flags()))
		for _, f := range u.Flags() {
			w.BulkString(f)
		}
		w.BulkString("passwords")
		w.Array(len(u.Hashes))
		for _, p := range u.Hashes {
			w.BulkString(p)
		}
		w.BulkString("commands")
		w.BulkString(u.Commands())
		keys := make([]string, len(u.Keys))
		for i, k := range u.Keys {
			keys[i] = k.String()
		}
		w.BulkString("keys")
		w.BulkString(strings.Join(keys, " "))
		w.BulkString("channels")
		w.BulkString("")
		w.BulkString("selectors")
		w.Array(0)
	case "deluser":
		if len(args) < 3 {
			wrongArgs()
			return
		}
		names := make([]string, len(args)-2)
		for i, a := range args[2:] {
			names[i] = string(a)
		}
		gone, err := d.acl.DelUser(names)
		if err != nil {
			w.Error(err.Error())
			return
		}
		d.dropUsers(c, gone)
		w.Int(int64(len(gone)))
	case "users":
		users := d.acl.Users()
		w.Array(len(users))
		for _, u := range users {
			w.BulkString(u.Name)
		}
	case "list":
		users := d.acl.Users()
		w.Array(len(users))
		for _, u := range users {
			w.BulkString(u.Describe())
		}
	case "whoami":
		w.BulkString(c.userName())
	case "cat":
		if len(args) > 3 {
			subError(c, "acl", args)
			return
		}
		if len(args) == 2 {
			w.Array(len(acl.Categories))
			for _, cat := range acl.Categories {
				w.BulkString(cat)
			}
			return
		}
		cat := strings.ToLower(string(args[2]))
		if !slices.Contains(acl.Categories, cat) {
			w.Error("ERR Unknown category '" + clip(args[2]) + "'")
			return
		}
		// As Redis 7: a container's subcommands are listed by their own
		// categories, the container itself only if it runs bare (COMMAND).
		var names []string
		for _, cmd := range d.cmds {
			spec, container := subcommandSpecs[cmd.Name]
			if slices.Contains(cmd.cats, cat) && (!container || cmd.Arity == -1) {
				names = append(names, cmd.Name)
			}
			if !container {
				continue
			}
			var subs []string
			for _, l := range [][]string{spec.plain, spec.admin, spec.read} {
				for _, sub := range l {
					if slices.Contains(subcommandCats[cmd.Name+"|"+sub], cat) {
						subs = append(subs, cmd.Name+"|"+sub)
					}
				}
			}
			slices.Sort(subs)
			names = append(names, subs...)
		}
		w.Array(len(names))
		for _, n := range names {
			w.BulkString(n)
		}
	case "log":
		if len(args) > 3 {
			subError(c, "acl", args)
			return
		}
		d.aclLog.reply(c, args[2:])
	case "save":
		if d.opts.ACLFile == "" {
			w.Error(errNoACLFile)
			return
		}
		if err := writeFileAtomic(d.opts.ACLFile, []byte(d.acl.Save())); err != nil {
			w.Error("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
			d.opts.Log.Error().Err(err).Str("file", d.opts.ACLFile).Msg("ACL SAVE")
			return
		}
		w.Status("OK")
	case "load":
		if d.opts.ACLFile == "" {
			w.Error(errNoACLFile)
			return
		}
		b, err := os.ReadFile(d.opts.ACLFile)
		if err != nil {
			w.Error("ERR Error loading ACLs, opening file '" + d.opts.ACLFile + "': " + err.Error())
			return
		}
		gone, err := d.acl.Load(string(b), d.opts.ACLFile)
		if err != nil {
			w.Error("ERR " + err.Error())
			return
		}
		d.dropUsers(c, gone)
		w.Status("OK")
	case "help":
		writeHelp(w, "ACL", aclHelp)
	case "dryrun":
		aclDryRun(d, c, args)
	case "genpass":
		if len(args) > 3 {
			subError(c, "acl", args)
			return
		}
		bits := int64(256)
		if len(args) == 3 {
			n, ok := parseInt(args[2])
			if !ok {
				w.Error(errNotInteger)
				return
			}
			bits = n
		}
		if bits <= 0 || bits > 4096 {
			w.Error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
			return
		}
		w.BulkString(randomHex(int(bits+7) / 8)[:(bits+3)/4]) // bits/4 hex digits, rounded up, as Redis
	default:
		subError(c, "acl", args)
	}
}

// aclDryRun is ACL DRYRUN user command [arg ...]: whether the user may run
// it, without running it, in Redis 7.2's words (the verbose ones, which
// name the key).
func aclDryRun(d *Dispatcher, c *Client, args [][]byte) {
	h := d.acl.Get(string(args[2]))
	if h == nil {
		c.W.Error("ERR User '" + clip(args[2]) + "' not found")
		return
	}
	call := args[3:]
	cmd := d.lookup(call[0])
	if cmd == nil || cmd.container && len(call) > 1 && subcommandCats[cmd.Name+"|"+strings.ToLower(string(call[1]))] == nil {
		c.W.Error("ERR Command '" + clip(call[0]) + "' not found")
		return
	}
	name, cats := aclName(cmd, call)
	if cmd.Arity > 0 && len(call) != cmd.Arity || cmd.Arity < 0 && len(call) < -cmd.Arity {
		c.W.Error("ERR wrong number of arguments for '" + name + "' command")
		return
	}
	u := h.User()
	if u.Open() || cmd.Flags&NoAuth != 0 {
		c.W.Status("OK")
		return
	}
	var keys []acl.Key
	for _, k := range commandKeys(cmd, call) {
		keys = append(keys, acl.Key{Name: k, Perm: cmd.keyPerm})
	}
	switch reason, obj := u.Check(name, cats, keys); reason {
	case acl.DenyCmd:
		c.W.BulkString("User " + u.Name + " has no permissions to run the '" + name + "' command")
	case acl.DenyKey:
		c.W.BulkString("User " + u.Name + " has no permissions to access the '" + obj + "' key")
	default:
		c.W.Status("OK")
	}
}

// dropUsers closes the connections of deleted users, as Redis does; the
// calling client's own closes after its reply.
func (d *Dispatcher) dropUsers(self *Client, gone []*acl.Handle) {
	if len(gone) == 0 {
		return
	}
	d.mu.Lock()
	var kill []*Client
	for _, cl := range d.clients {
		if slices.Contains(gone, cl.user.Load()) {
			kill = append(kill, cl)
		}
	}
	d.mu.Unlock()
	for _, cl := range kill {
		if cl == self {
			self.Quit = true
		} else if cl.Conn != nil {
			cl.Conn.Kill()
		}
	}
}

func writeFileAtomic(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".acl-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}

// aclLog is ACL LOG: the latest denials, newest first, a repeat of the same
// denial within a minute of its last counted on its entry (among the 10
// newest), as Redis 7.2's ACLLOG does.
type aclLog struct {
	mu      sync.Mutex
	entries []*aclEntry // newest first, at most aclLogMax
	nextID  int64       // entry-id of the next new entry; RESET keeps counting, as Redis
}

const aclLogMax = 128 // Redis's acllog-max-len default

type aclEntry struct {
	id, count                         int64
	reason, context, object, username string
	created, updated                  time.Time
	clientInfo                        string
}

func (l *aclLog) add(d *Dispatcher, c *Client, reason acl.Reason, object, user string) {
	switch reason {
	case acl.DenyAuth:
		d.aclDenied[0].Add(1)
	case acl.DenyCmd:
		d.aclDenied[1].Add(1)
	case acl.DenyKey:
		d.aclDenied[2].Add(1)
	}
	ctx := "toplevel"
	if c.tx.multi || c.tx.eng != nil {
		ctx = "multi"
	}
	info := d.clientLine(c)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.entries[:min(10, len(l.entries))] {
		if e.reason == reason.String() && e.context == ctx && e.object == object && e.username == user &&
			now.Sub(e.updated) < time.Minute {
			e.count++
			e.updated, e.clientInfo = now, info
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = e
			return
		}
	}
	e := &aclEntry{id: l.nextID, count: 1, reason: reason.String(), context: ctx, object: object, username: user,
		created: now, updated: now, clientInfo: info}
	l.nextID++
	l.entries = append([]*aclEntry{e}, l.entries...)
	if len(l.entries) > aclLogMax {
		l.entries = l.entries[:aclLogMax]
	}
}

func (l *aclLog) reply(c *Client, args [][]byte) {
	n := 10
	if len(args) > 1 {
		c.W.Error(errSyntax)
		return
	}
	if len(args) == 1 {
		if strings.EqualFold(string(args[0]), "reset") {
			l.mu.Lock()
			l.entries = nil
			l.mu.Unlock()
			c.W.Status("OK")
			return
		}
		v, ok := parseInt(args[0])
		if !ok {
			c.W.Error(errNotInteger)
			return
		}
		n = int(max(v, 0)) // as Redis 7.2: a negative count lists nothing
	}
	l.mu.Lock()
	entries := slices.Clone(l.entries[:min(n, len(l.entries))])
	l.mu.Unlock()
	now := time.Now()
	w := c.W
	w.Array(len(entries))
	for _, e := range entries {
		w.Map(10)
		w.BulkString("count")
		w.Int(e.count)
		w.BulkString("reason")
		w.BulkString(e.reason)
		w.BulkString("context")
		w.BulkString(e.context)
		w.BulkString("object")
		w.BulkString(e.object)
		w.BulkString("username")
		w.BulkString(e.username)
		w.BulkString("age-seconds") // since the last update, as Redis's
		w.BulkString(strconv.FormatFloat(float64(now.Sub(e.updated).Milliseconds())/1000, 'f', -1, 64))
		w.BulkString("client-info")
		w.BulkString(e.clientInfo)
		w.BulkString("entry-id")
		w.Int(e.id)
		w.BulkString("timestamp-created")
		w.Int(e.created.UnixMilli())
		w.BulkString("timestamp-last-updated")
		w.Int(e.updated.UnixMilli())
	}
}
