package acl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Handle is one user as connections hold it: the current settings, swapped
// whole by SETUSER, so an authenticated connection sees changes at its next
// command (as in Redis) at the cost of one atomic load.
type Handle struct {
	p    atomic.Pointer[User]
	gone atomic.Bool // deleted (DELUSER, or missing after a LOAD)
}

// User is the user's current settings.
func (h *Handle) User() *User { return h.p.Load() }

// Gone reports whether the user was deleted: its connections must close.
func (h *Handle) Gone() bool { return h.gone.Load() }

// Store holds the users. The default user always exists.
type Store struct {
	known Names
	mu    sync.Mutex
	users map[string]*Handle
}

// NewStore makes a store with only the default user (on, nopass, every
// command on every key), or with password pass if pass is not empty (as
// requirepass does). known says which command names exist.
func NewStore(known Names, pass string) *Store {
	s := &Store{known: known, users: map[string]*Handle{}}
	s.users["default"] = &Handle{}
	s.users["default"].p.Store(defaultUser(pass))
	return s
}

func defaultUser(pass string) *User {
	u := &User{Name: "default", On: true, NoPass: true, AllCmds: true, Keys: []KeyPattern{{"*", Read | Write}}}
	if pass != "" {
		u.NoPass, u.Hashes = false, []string{Hash(pass)}
	}
	return u.finish()
}

// Get finds a user, or nil.
func (s *Store) Get(name string) *Handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users[name]
}

// Default is the default user.
func (s *Store) Default() *Handle { return s.Get("default") }

// Authenticate finds the user that name and pass open, as AUTH does. A
// missing user costs the same hashing as a wrong password.
func (s *Store) Authenticate(name, pass string) (*Handle, bool) {
	h := s.Get(name)
	if h == nil {
		(&User{On: true}).CheckPassword(pass)
		return nil, false
	}
	return h, h.User().CheckPassword(pass)
}

// NeedsPassword reports whether any user must give a password, which is
// when the HTTP side must ask for one too.
func (s *Store) NeedsPassword() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.users {
		if u := h.User(); u.On && !u.NoPass {
			return true
		}
	}
	return false
}

// SetUser creates or changes a user. The rules apply all or none, as Redis
// applies them; a new user starts off, with no password, no key and no
// command.
func (s *Store) SetUser(name string, rules []string) error {
	if hasSpaces(name) {
		return ErrBadName
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.users[name]
	var u *User
	if h == nil {
		u = newUser(name)
	} else {
		u = h.User().clone()
	}
	rules, unclosed := MergeSelectors(rules)
	if unclosed != "" {
		return errors.New("Unmatched parenthesis in acl selector starting at '" + unclosed + "'.")
	}
	for _, r := range rules {
		if err := u.apply(r, s.known); err != nil {
			return &RuleError{Rule: r, Err: err}
		}
	}
	if h == nil {
		h = &Handle{}
		s.users[name] = h
	}
	h.p.Store(u.finish())
	return nil
}

// ErrDefault is DELUSER default's refusal.
var ErrDefault = errors.New("ERR The 'default' user cannot be removed")

// DelUser deletes users and returns their handles (their connections must
// close) and how many existed.
func (s *Store) DelUser(names []string) ([]*Handle, error) {
	if slices.Contains(names, "default") {
		return nil, ErrDefault
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []*Handle
	for _, n := range names {
		if h := s.users[n]; h != nil {
			delete(s.users, n)
			h.gone.Store(true)
			gone = append(gone, h)
		}
	}
	return gone, nil
}

// Users is every user, by name.
func (s *Store) Users() []*User {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*User, 0, len(s.users))
	for _, h := range s.users {
		out = append(out, h.User())
	}
	slices.SortFunc(out, func(a, b *User) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Save is the users in the aclfile format (ACL LIST's lines), one a line.
func (s *Store) Save() string {
	var b strings.Builder
	for _, u := range s.Users() {
		b.WriteString(u.Describe())
		b.WriteByte('\n')
	}
	return b.String()
}

// Parse reads an aclfile: "user <name> rule ..." lines, split on single
// spaces as Redis splits them (so "user  on" is the user named "", as ACL
// SAVE writes it); blank lines and lines starting with '#' are skipped.
// Errors name the line, as Redis's do.
func Parse(text, file string, known Names) (map[string]*User, error) {
	users := map[string]*User{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.Trim(line, " \t\r\n")
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, " ")
		where := fmt.Sprintf("%s:%d: ", file, i+1)
		if f[0] != "user" || len(f) < 2 {
			return nil, errors.New(where + "should start with user keyword followed by the username")
		}
		name := f[1]
		if hasSpaces(name) {
			return nil, errors.New(where + "username '" + name + "' contains invalid characters")
		}
		if _, dup := users[name]; dup {
			return nil, errors.New(where + "Duplicate user '" + name + "' found")
		}
		u := newUser(name)
		rules, unclosed := MergeSelectors(f[2:])
		if unclosed != "" {
			return nil, errors.New(where + "Unmatched parenthesis in selector definition.")
		}
		for _, r := range rules {
			if err := u.apply(strings.Trim(r, "\t\r\n"), known); err != nil {
				return nil, errors.New(where + err.Error() + ". ")
			}
		}
		users[name] = u.finish()
	}
	return users, nil
}

// Load replaces every user with the file's, all or nothing: on an error the
// users stay as they were. A file without the default user keeps the
// current one, as Redis does. It returns the handles of users that are gone.
func (s *Store) Load(text, file string) ([]*Handle, error) {
	users, err := Parse(text, file, s.known)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []*Handle
	for name, h := range s.users {
		if _, ok := users[name]; !ok && name != "default" {
			delete(s.users, name)
			h.gone.Store(true)
			gone = append(gone, h)
		}
	}
	for name, u := range users {
		h := s.users[name]
		if h == nil {
			h = &Handle{}
			s.users[name] = h
		}
		h.p.Store(u)
	}
	return gone, nil
}
