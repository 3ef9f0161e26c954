// Package acl owns the users of Redis 7's ACL, the subset a delay server
// needs: users on or off, passwords kept as SHA-256 hex, key patterns with
// read and write permissions, and command rules by name and category; the
// parser of ACL SETUSER's rules and of aclfiles, and the check a command must
// pass before it runs. It knows nothing of the command table: the caller says
// which command names exist and which categories a command belongs to.
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

// Categories a command may belong to; ACL CAT lists them in this order.
var Categories = []string{"keyspace", "read", "write", "list", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "delay"}

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
	// "-@cat". The last rule that names a command or one of its categories
	// decides; none does: AllCmds.
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
// with its categories) on these keys; on a refusal, why, and the command or
// the key refused. The caller checks arity first, as Redis does.
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

// CommandAllowed applies the command rules alone.
func (u *User) CommandAllowed(cmd string, cats []string) bool {
	for i := len(u.Rules) - 1; i >= 0; i-- {
		r := u.Rules[i]
		name := r[1:]
		match := false
		if name[0] == '@' {
			match = slices.Contains(cats, name[1:])
		} else {
			match = name == cmd
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
	ErrBadHash     = errors.New("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
	ErrNoSuchPass  = errors.New("The password you are trying to remove from the user does not exist")
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
func (u *User) apply(rule string, known func(string) bool) error {
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
	}
	if rule == "" {
		return ErrSyntax
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
		u.Keys = addKey(u.Keys, KeyPattern{rule[i+1:], p})
	case '&':
		return nil // channel patterns: no Pub/Sub here
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
		} else if !known(name) {
			return ErrUnknownName
		}
		r := rule[:1] + name
		// A later rule for the same name overrides an earlier one, so the
		// earlier one is dropped and rules never grow past the names.
		u.Rules = slices.DeleteFunc(u.Rules, func(s string) bool { return s[1:] == name })
		u.Rules = append(u.Rules, r)
	default:
		return ErrSyntax
	}
	return nil
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
