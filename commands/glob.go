package commands

import "github.com/delayd/delayd/glob"

// globMatch is Redis's stringmatchlen (package glob), shared with ACL key
// patterns.
func globMatch(pattern, s string) bool { return glob.Match(pattern, s) }
