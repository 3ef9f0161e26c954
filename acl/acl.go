// Package acl owns the users of Redis 7's ACL, the subset a delay server
// needs: users on or off, passwords kept as SHA-256 hex, key patterns with
// read and write permissions, and command rules by name and category; the
// parser of ACL SETUSER's rules and of aclfiles, and the check a command must
// pass before it runs. Rules may name a whole command ("+config") or one
// subcommand of a container ("+config|get", "-client|kill"), as Redis 7
// does; selectors ("(...)") are refused. It knows nothing of the command
// table: the caller says which names exist (a Names function) and which
// categories a command or subcommand belongs to. Rules may also name
// Redis's commands and categories that delayd lacks, so that Redis's
// aclfiles load; they grant nothing here.
package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"github.com/delayd/delayd/glob"
)

// Perm is what a command does to a key.
type Perm uint8

const (
	Read  Perm = 1 << iota // the command reads the key's contents (%R~)
	Write                  // the command changes the key (%W~)
)

// Categories are Redis 7's, in its order, then delayd's own: ACL CAT lists
// them so. Every one may be named in a rule, so Redis's aclfiles load; those
// of data types delayd lacks (@hash, @set, ...) hold no command here.
var Categories = []string{"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous",
	"connection", "transaction", "scripting", "delay"}

// Kind is what a name in a command rule is; a Names function answers it.
type Kind uint8

const (
	Unknown    Kind = iota // no such command
	Command                // a command without subcommands ("delay.pop")
	Container              // a command with subcommands ("config")
	Subcommand             // a container's subcommand ("config|get")
)

// Names says what a lower-case name is: a command, a container, or a
// container's subcommand written "container|sub".
type Names func(name string) Kind

// KeyPattern is one ~pattern, %R~pattern or %W~pattern.
type KeyPattern struct {
	Pattern string
	Perm    Perm
}

func (k KeyPattern) String() string {
	switch k.Perm {
	case Read:
		return "%R~" + k.Pattern
	case Write:
		return "%W~" + k.Pattern
	}
	return "~" + k.Pattern
}

// User is one user's settings. A User is never changed once published: a
// SETUSER builds a new one and swaps it into the user's Handle, so a
// connection checks its commands without a lock.
type User struct {
	Name   string
	On     bool
	NoPass bool
	Hashes []string // SHA-256 hex of each password, in the order added
	Keys   []KeyPattern
	// AllCmds is the base of the command rules (+@all or -@all); Rules the
	// rules after it, oldest first, each "+name", "-name", "+@cat" or
	// "-@cat", a name being a command or "container|sub". The last rule
	// that names the command, its container (for a subcommand) or one of
	// its categories decides; none does: AllCmds. That is Redis's bitmap
	// of command ids with the rules applied in order, without the bitmap.
	AllCmds bool
	Rules   []string
	// open: every command on every key, so Check costs one branch.
	open bool
}

func newUser(name string) *User { return &User{Name: name} }

func (u *User) clone() *User {
	c := *u
	c.Hashes = slices.Clone(u.Hashes)
	c.Keys = slices.Clone(u.Keys)
	c.Rules = slices.Clone(u.Rules)
	return &c
}

// Hash is a password's SHA-256 in lower-case hex, as Redis stores it.
func Hash(pass string) string {
	h := sha256.Sum256([]byte(pass))
	return hex.EncodeToString(h[:])
}

// CheckPassword reports whether pass opens this user (disabled users open to
// nothing). Hashes are compared in constant time; hashing first also hides
// the password's length.
func (u *User) CheckPassword(pass string) bool {
	if !u.On {
		return false
	}
	if u.NoPass {
		return true
	}
	h := []byte(Hash(pass))
	ok := 0
	for _, want := range u.Hashes {
		ok |= subtle.ConstantTimeCompare(h, []byte(want))
	}
	return ok == 1
}

// Key is one key a command touches and what it does to it.
type Key struct {
	Name []byte
	Perm Perm
}

// Reason says why Check refused.
type Reason uint8

const (
	OK         Reason = iota
	DenyCmd           // the command is not allowed
	DenyKey           // a key is outside the user's patterns
	DenyAuth          // a failed AUTH (ACL LOG's "auth")
	reasonLast        // for tests
)

func (r Reason) String() string {
	switch r {
	case DenyCmd:
		return "command"
	case DenyKey:
		return "key"
	case DenyAuth:
		return "auth"
	}
	return "ok"
}

// Check says whether the user may run the command (its name in lower case,
// "container|sub" for a subcommand, with its categories) on these keys; on
// a refusal, why, and the command or the key refused. The caller checks
// arity first, as Redis does.
func (u *User) Check(cmd string, cats []string, keys []Key) (Reason, string) {
	if u.open {
		return OK, ""
	}
	if !u.CommandAllowed(cmd, cats) {
		return DenyCmd, cmd
	}
	for _, k := range keys {
		if !u.KeyAllowed(k) {
			return DenyKey, string(k.Name)
		}
	}
	return OK, ""
}

// CommandAllowed applies the command rules alone. cmd is "container|sub"
// for a subcommand: a rule for the container applies to it too. O(rules).
func (u *User) CommandAllowed(cmd string, cats []string) bool {
	parent, _, isSub := strings.Cut(cmd, "|")
	for i := len(u.Rules) - 1; i >= 0; i-- {
		r := u.Rules[i]
		name := r[1:]
		match := false
		if name[0] == '@' {
			match = slices.Contains(cats, name[1:])
		} else {
			match = name == cmd || isSub && name == parent
		}
		if match {
			return r[0] == '+'
		}
	}
	return u.AllCmds
}

// KeyAllowed reports whether one pattern both matches the key and grants
// every permission the command needs on it, as Redis 7.0 checks.
func (u *User) KeyAllowed(k Key) bool {
	for _, p := range u.Keys {
		if p.Perm&k.Perm == k.Perm && (p.Pattern == "*" || glob.Match(p.Pattern, string(k.Name))) {
			return true
		}
	}
	return false
}

// Describe is the user's rules as ACL LIST and aclfiles show them
// ("user worker on #... ~jobs:* resetchannels -@all +delay.pop").
func (u *User) Describe() string {
	var b strings.Builder
	b.WriteString("user ")
	b.WriteString(u.Name)
	if u.On {
		b.WriteString(" on")
	} else {
		b.WriteString(" off")
	}
	if u.NoPass {
		b.WriteString(" nopass")
	}
	for _, h := range u.Hashes {
		b.WriteString(" #" + h)
	}
	for _, k := range u.Keys {
		b.WriteString(" " + k.String())
	}
	b.WriteString(" resetchannels ")
	b.WriteString(u.Commands())
	return b.String()
}

// Commands is the command rules as ACL GETUSER shows them: "+@all",
// "-@all +delay.pop +delay.ack".
func (u *User) Commands() string {
	s := "-@all"
	if u.AllCmds {
		s = "+@all"
	}
	for _, r := range u.Rules {
		s += " " + r
	}
	return s
}

// Flags is ACL GETUSER's flags list.
func (u *User) Flags() []string {
	f := []string{"off"}
	if u.On {
		f[0] = "on"
	}
	if u.NoPass {
		f = append(f, "nopass")
	}
	return f
}

// Open reports whether the user may run every command on every key, so
// the check can be skipped.
func (u *User) Open() bool { return u.open }

func (u *User) finish() *User {
	u.open = u.AllCmds && len(u.Rules) == 0 && slices.Contains(u.Keys, KeyPattern{"*", Read | Write})
	return u
}

// ErrSyntax and the others are the reasons a rule is refused, worded as
// Redis words them after "Error in ACL SETUSER modifier '...': ".
var (
	ErrSyntax      = errors.New("Syntax error")
	ErrUnknownName = errors.New("Unknown command or category name in ACL")
	// ErrFirstArgSub is Redis's refusal of "+config|get|appendonly".
	ErrFirstArgSub = errors.New("Allowing first-arg of a subcommand is not supported")
	// ErrFirstArg refuses "+select|0" on a command without subcommands,
	// which Redis 7 still takes (deprecated) and delayd does not.
	ErrFirstArg = errors.New("Allowing first-arg of a command without subcommands is not supported (rules may name a subcommand of a container, as +config|get)")
	// ErrSelectors refuses Redis 7's selectors: SPEC's subset is the root
	// permissions only.
	ErrSelectors  = errors.New("Selectors are not supported: a user has one set of permissions (its root selector) in delayd")
	ErrBadHash    = errors.New("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
	ErrNoSuchPass = errors.New("The password you are trying to remove from the user does not exist")
	// ErrBadName refuses a user name an aclfile line could not hold.
	ErrBadName = errors.New("Usernames can't contain spaces or null characters")
)

// RuleError is a refused rule, worded as Redis's ACL SETUSER reply.
type RuleError struct {
	Rule string
	Err  error
}

func (e *RuleError) Error() string {
	return "Error in ACL SETUSER modifier '" + e.Rule + "': " + e.Err.Error()
}

func (e *RuleError) Unwrap() error { return e.Err }

// apply changes u by one rule; known says which command names exist.
func (u *User) apply(rule string, known Names) error {
	switch strings.ToLower(rule) {
	case "on":
		u.On = true
		return nil
	case "off":
		u.On = false
		return nil
	case "nopass":
		u.NoPass, u.Hashes = true, nil
		return nil
	case "resetpass":
		u.NoPass, u.Hashes = false, nil
		return nil
	case "allkeys":
		u.Keys = addKey(u.Keys[:0], KeyPattern{"*", Read | Write})
		return nil
	case "resetkeys":
		u.Keys = nil
		return nil
	case "allcommands":
		u.AllCmds, u.Rules = true, nil
		return nil
	case "nocommands":
		u.AllCmds, u.Rules = false, nil
		return nil
	case "reset":
		*u = User{Name: u.Name}
		return nil
	case "allchannels", "resetchannels":
		return nil // no Pub/Sub here; accepted so Redis's aclfiles load
	case "clearselectors":
		return nil // there never are selectors to clear
	}
	if rule == "" {
		return nil // as Redis: an empty argument changes nothing
	}
	switch rule[0] {
	case '>':
		h := Hash(rule[1:])
		if !slices.Contains(u.Hashes, h) {
			u.Hashes = append(u.Hashes, h)
		}
		u.NoPass = false
	case '#':
		h := rule[1:]
		if !validHash(h) {
			return ErrBadHash
		}
		if !slices.Contains(u.Hashes, h) {
			u.Hashes = append(u.Hashes, h)
		}
		u.NoPass = false
	case '<', '!':
		h := rule[1:]
		if rule[0] == '<' {
			h = Hash(h)
		} else if !validHash(h) {
			return ErrBadHash
		}
		i := slices.Index(u.Hashes, h)
		if i < 0 {
			return ErrNoSuchPass
		}
		u.Hashes = slices.Delete(u.Hashes, i, i+1)
	case '~':
		if hasSpaces(rule[1:]) {
			return ErrSyntax
		}
		u.Keys = addKey(u.Keys, KeyPattern{rule[1:], Read | Write})
	case '%':
		i := strings.IndexByte(rule, '~')
		if i < 2 {
			return ErrSyntax
		}
		var p Perm
		for _, c := range rule[1:i] {
			switch c {
			case 'R', 'r':
				p |= Read
			case 'W', 'w':
				p |= Write
			default:
				return ErrSyntax
			}
		}
		if hasSpaces(rule[i+1:]) {
			return ErrSyntax
		}
		u.Keys = addKey(u.Keys, KeyPattern{rule[i+1:], p})
	case '&':
		return nil // channel patterns: no Pub/Sub here
	case '(':
		return ErrSelectors
	case '+', '-':
		name := strings.ToLower(rule[1:])
		if name == "" {
			return ErrSyntax
		}
		if name == "@all" {
			u.AllCmds, u.Rules = rule[0] == '+', nil
			return nil
		}
		if c, ok := strings.CutPrefix(name, "@"); ok {
			if !slices.Contains(Categories, c) {
				return ErrUnknownName
			}
		} else if err := checkName(name, rule[0] == '+', withRedis(known)); err != nil {
			return err
		}
		r := rule[:1] + name
		// A later rule for the same name overrides an earlier one, and a
		// rule for a whole command those for its subcommands, so they are
		// dropped and rules never grow past the names (Redis 7.2's
		// ACLSelectorRemoveCommandRule: "+config|get +config" is "+config").
		u.Rules = slices.DeleteFunc(u.Rules, func(s string) bool {
			return s[1:] == name || strings.HasPrefix(s[1:], name+"|")
		})
		u.Rules = append(u.Rules, r)
	default:
		return ErrSyntax
	}
	return nil
}

// checkName says whether a command rule's name (no @) may be used, as
// Redis 7.2's ACLSetSelector decides: a command or a container's
// subcommand; for +, the part before the last '|' is looked up first, so
// that "+config|get|x" is a first-arg of a subcommand and "+get|x|y"
// unknown.
func checkName(name string, allow bool, known Names) error {
	i := strings.LastIndexByte(name, '|')
	if i < 0 {
		if known(name) == Unknown {
			return ErrUnknownName
		}
		return nil
	}
	if !allow {
		if known(name) != Subcommand {
			return ErrUnknownName
		}
		return nil
	}
	parent := known(name[:i])
	switch {
	case parent == Unknown:
		return ErrUnknownName
	case parent == Subcommand:
		return ErrFirstArgSub
	case i == len(name)-1:
		return ErrSyntax // "+config|"
	case parent == Command:
		return ErrFirstArg
	case known(name) != Subcommand:
		return ErrUnknownName
	}
	return nil
}

// MergeSelectors joins the arguments of a selector split on spaces
// ("(~a" "+get)") into one rule, as Redis's ACLMergeSelectorArguments does,
// so the refusal names the whole selector. It returns the rule where an
// unclosed one starts, or "".
func MergeSelectors(rules []string) ([]string, string) {
	var out []string
	open := -1
	for i, r := range rules {
		if open < 0 && strings.HasPrefix(r, "(") && !strings.HasSuffix(r, ")") {
			open = i
			out = append(out, r)
			continue
		}
		if open >= 0 {
			out[len(out)-1] += " " + r
			if strings.HasSuffix(r, ")") {
				open = -1
			}
			continue
		}
		out = append(out, r)
	}
	if open >= 0 {
		return nil, rules[open]
	}
	return out, ""
}

// addKey adds a pattern, merging permissions with the same pattern's.
func addKey(keys []KeyPattern, k KeyPattern) []KeyPattern {
	for i := range keys {
		if keys[i].Pattern == k.Pattern {
			keys[i].Perm |= k.Perm
			return keys
		}
	}
	return append(keys, k)
}

// hasSpaces reports whether s holds a space or a NUL (C's isspace, as
// Redis's ACLStringHasSpaces): names and patterns with them are refused, so
// an aclfile line, split on spaces, always reads back as it was written.
func hasSpaces(s string) bool {
	return strings.ContainsAny(s, " \t\n\v\f\r\x00")
}

func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range []byte(h) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
