// Package glob matches Redis glob patterns (KEYS, SCAN MATCH, ACL key
// patterns); a leaf, so commands and acl share one matcher.
package glob

// Match reports whether s matches a Redis glob pattern, with the
// semantics of Redis's stringmatchlen (util.c), which KEYS, SCAN MATCH and
// every other pattern in Redis use:
//
//   - `*` any run of bytes, `?` any one byte;
//   - `[abc]` one of the set, `[^abc]` none of it, `[a-z]` a range (either
//     order: `[z-a]` is the same range), `\x` inside a set a literal x;
//   - `\x` elsewhere the literal x; a `\` at the very end is a literal `\`;
//   - a `[` never closed takes the rest of the pattern as its set;
//   - an empty s matches only an empty pattern (KEYS and SCAN treat a lone
//     `*` apart, so it matches every key, "" included).
//
// Patterns are never rejected: a malformed one simply matches what Redis's
// would. Bytes, not runes, as Redis. No library was used: path.Match and
// filepath.Match stop `*` at '/' and reject malformed sets, gobwas/glob
// has another syntax, and tidwall/match knows no sets or escapes.
//
// Cost: O(len(pattern) * len(s)) at worst. After a `*` fails to match the
// rest of the pattern at every later position of s, no earlier `*` can do
// better (it would only start the rest later still), so the whole match
// fails at once rather than backtracking into the earlier stars (Redis does
// the same since 7.0; without it `a*a*a*a*b` against a long run of a's is
// exponential).
func Match(pattern, s string) bool {
	give := false
	return globFrom(pattern, s, &give, 0)
}

// globFrom matches s against pattern; giveUp is set when the failure proves
// that no longer match of an earlier star can succeed.
func globFrom(p, s string, giveUp *bool, depth int) bool {
	if depth > 1000 { // as Redis: abusive nesting of stars matches nothing
		return false
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for ; len(s) > 0; s = s[1:] {
				if globFrom(p[1:], s, giveUp, depth+1) {
					return true
				}
				if *giveUp {
					return false
				}
			}
			*giveUp = true
			return false
		case '?':
		case '[':
			var ok bool
			ok, p = matchSet(p[1:], s[0])
			if !ok {
				return false
			}
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			if p[0] != s[0] {
				return false
			}
		default:
			if p[0] != s[0] {
				return false
			}
		}
		p, s = p[1:], s[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
		}
	}
	return len(p) == 0 && len(s) == 0
}

// matchSet matches c against the set that p (just after its `[`) opens. It
// returns the pattern left at the set's last byte (its `]`, or the
// pattern's last byte when the set is never closed), so the caller steps
// past it as past any other pattern byte.
func matchSet(p string, c byte) (bool, string) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	match := false
	for {
		switch {
		case len(p) >= 2 && p[0] == '\\':
			p = p[1:]
			match = match || p[0] == c
		case len(p) > 0 && p[0] == ']':
			return match != not, p
		case len(p) == 0:
			// Never closed: the set ran to the end of the pattern. Hand
			// back one byte for the caller to step over (the pattern is
			// then done, whatever that byte was).
			return match != not, "\x00"
		case len(p) >= 3 && p[1] == '-':
			lo, hi := p[0], p[2]
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || (c >= lo && c <= hi)
			p = p[2:]
		default:
			match = match || p[0] == c
		}
		p = p[1:]
	}
}
