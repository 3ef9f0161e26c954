package commands

import (
	"bytes"
	"strconv"
)

// Options of the DELAY.* commands, parsed in one place so that every
// command refuses bad input the same way and says which word it could not
// use. Redis's own errors say only "syntax error"; the prefix stays, so a
// client library maps these to the exception it always did, and the rest
// names the word: a misspelt option (ACKTIMOUT) used to cost a user a
// guessing game, and a repeated one (ID a ID b) silently kept the last.

// optSpec is one option: its name, as written in errors (matched without
// regard to case), and how many values follow it.
type optSpec struct {
	name  string
	nargs int
}

// scanOptions walks args, which must be all options, and calls set with
// each option's name (as in specs) and values, in the order given. It
// returns the first error line: an unknown word, an option given twice or
// missing a value, or what set returned. O(len(args) × len(specs)).
func scanOptions(args [][]byte, specs []optSpec, set func(name string, v [][]byte) string) string {
	var seen uint64
	for i := 0; i < len(args); {
		k := -1
		for n, s := range specs {
			if bytes.EqualFold(args[i], []byte(s.name)) {
				k = n
				break
			}
		}
		if k < 0 {
			return errUnknownOption(args[i])
		}
		s := specs[k]
		if seen&(1<<k) != 0 {
			return "ERR syntax error: option '" + s.name + "' given twice"
		}
		seen |= 1 << k
		if len(args)-i-1 < s.nargs {
			if s.nargs == 1 {
				return "ERR syntax error: option '" + s.name + "' needs a value"
			}
			return "ERR syntax error: option '" + s.name + "' needs " + strconv.Itoa(s.nargs) + " values"
		}
		if msg := set(s.name, args[i+1:i+1+s.nargs]); msg != "" {
			return msg
		}
		i += 1 + s.nargs
	}
	return ""
}

// redactOption redacts, in out (MONITOR's and SLOWLOG's copy of args), the
// value of each option named name from position from on.
func redactOption(args [][]byte, out []string, from int, name string) {
	for i := from; i+1 < len(args); i++ {
		if bytes.EqualFold(args[i], []byte(name)) {
			out[i+1] = redacted
			i++
		}
	}
}

// errUnknownOption names a word no option of the command matches.
func errUnknownOption(word []byte) string {
	return "ERR syntax error: unknown option '" + clip(word) + "'"
}

// jobOption reads the options every job carries, whether a client adds it
// or a schedule's firing does (ACKTIMEOUT, RETRY, DEADLETTER), so the two
// commands give them one range and one message. ok is false for any other
// option; msg is its error, "" when the value is good.
func jobOption(name string, v [][]byte, ackTimeout, retry *int64, deadLetter *[]byte) (msg string, ok bool) {
	switch name {
	case "ACKTIMEOUT":
		if *ackTimeout, ok = intIn(v[0], 0, maxAckTimeout); !ok {
			return errAckTimeout, true
		}
	case "RETRY":
		if *retry, ok = intIn(v[0], 0, maxRetry); !ok {
			return errRetry, true
		}
	case "DEADLETTER":
		*deadLetter = v[0]
	default:
		return "", false
	}
	return "", true
}

// laneOption reads the options that place a job in a queue's lanes (GROUP,
// PRIORITY), as jobOption does: DELAY.ADD and DELAY.IMPORT give them one
// range and one message.
func laneOption(name string, v [][]byte, group *[]byte, priority *uint8) (msg string, ok bool) {
	switch name {
	case "GROUP":
		if len(v[0]) == 0 || len(v[0]) > 256 {
			return errGroup, true
		}
		*group = v[0]
	case "PRIORITY":
		n, ok := intIn(v[0], 0, 9)
		if !ok {
			return errPriority, true
		}
		*priority = uint8(n)
	default:
		return "", false
	}
	return "", true
}

// intIn parses an option's value, an integer from lo to hi.
func intIn(v []byte, lo, hi int64) (int64, bool) {
	n, ok := parseInt(v)
	return n, ok && n >= lo && n <= hi
}

// Each option value's own error, with its range.
const (
	errAckTimeout = "ERR ACKTIMEOUT must be a number of ms from 0 to 4294967295"
	errRetry      = "ERR RETRY must be an integer from 0 to 2147483647"
	errUnique     = "ERR UNIQUE must be a positive number of ms"
	errDebounce   = "ERR DEBOUNCE must be a positive number of ms"
	errPriority   = "ERR PRIORITY must be an integer from 0 to 9"
	errGroup      = "ERR invalid group: a group is 1 to 256 bytes"
	errBadID      = "ERR invalid id: an id is 1 to 256 bytes"
	errEvery      = "ERR EVERY must be a positive number of ms"
	errMisfire    = "ERR MISFIRE must be skip, once or all"
	errReplaceID  = "ERR REPLACE needs ID"
	errIdentID    = "ERR UNIQUE and DEBOUNCE need ID"
	errReason     = "ERR ERROR text must be 1 to 1024 bytes"
)

// errTime is the error of START, END and other absolute times.
func errTime(name string) string {
	return "ERR " + name + " must be a unix time in ms, 0 or more"
}

// Bounds of the options that take them.
const (
	maxAckTimeout = 1<<32 - 1
	maxRetry      = 1<<31 - 1
)
