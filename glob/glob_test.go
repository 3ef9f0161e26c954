package glob

import (
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", false}, // as stringmatchlen; KEYS and SCAN treat a lone * apart
		{"*", "anything", true},
		{"", "", true},
		{"", "a", false},
		{"jobs:*", "jobs:", true},
		{"jobs:*", "jobs:email", true},
		{"jobs:*", "job", false},
		{"*:email", "jobs:email", true},
		{"*a*b*", "xaxxbx", true},
		{"*a*b*", "xbxxax", false},
		{"a**b", "ab", true},
		{"h?llo", "hello", true},
		{"h?llo", "hllo", false},
		{"h[ae]llo", "hallo", true},
		{"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true},
		{"h[^e]llo", "hello", false},
		{"h[a-b]llo", "hbllo", true},
		{"h[b-a]llo", "hallo", true}, // a reversed range is the same range
		{"h[a-b]llo", "hcllo", false},
		{"[a-]", "-", false}, // a to ']'
		{"[a-]", "]", true},  // ...so ']' is in it
		{"[]]", "]", false},  // ']' right after '[' closes an empty set
		{`[\]]`, "]", true},  // an escaped ']' in a set
		{`[\-]`, "-", true},
		{`h\*llo`, "h*llo", true},
		{`h\*llo`, "hello", false},
		{`\?`, "?", true},
		{`\?`, "a", false},
		{`a\`, `a\`, true},    // a trailing backslash is literal
		{"[abc", "a", true},   // an unclosed set runs to the end
		{"[abc", "ab", false}, // ...and the pattern is then done
		{"[", "a", false},
		{"a[", "a", false},
		{"[^", "a", true}, // an empty, unclosed, negated set
		{"*[", "abc", false},
		{"a*", "a", true},
		{"*?", "", false},
		{"?*", "x", true},
		{"\x00*", "\x00a", true}, // bytes, not text
		{"[\xff]", "\xff", true},
	} {
		if got := Match(c.pattern, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

// TestGlobMatchNotExponential: stars that cannot match fail at once.
func TestGlobMatchNotExponential(t *testing.T) {
	s := strings.Repeat("a", 5000)
	if Match(strings.Repeat("a*", 30)+"b", s) {
		t.Fatal("matched")
	}
}

// naiveGlob is the plain backtracking matcher: every star tries every
// length. Slow, obviously right given matchSet; the reference for the fuzz.
func naiveGlob(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for i := 0; i <= len(s); i++ {
				if naiveGlob(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
		case '[':
			if len(s) == 0 {
				return false
			}
			var ok bool
			ok, p = matchSet(p[1:], s[0])
			if !ok {
				return false
			}
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			if len(s) == 0 || p[0] != s[0] {
				return false
			}
		default:
			if len(s) == 0 || p[0] != s[0] {
				return false
			}
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}

func FuzzGlobMatch(f *testing.F) {
	for _, seed := range [][2]string{{"*a*b", "xaxb"}, {"[a-c]?*", "bzz"}, {`\[*`, "[x"}, {"[^a", "b"}, {"a*[", "ab"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 24 || len(s) > 24 || strings.Count(p, "*") > 6 {
			return // keep the naive matcher fast
		}
		want := naiveGlob(p, s)
		if s == "" {
			want = p == "" // stringmatchlen matches nothing else against ""
		}
		if got := Match(p, s); got != want {
			t.Fatalf("Match(%q, %q) = %v, the naive matcher says %v", p, s, got, want)
		}
	})
}
