package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The dashboard's formatting: numbers, sizes, times, and payloads and names
// that may be any bytes. Everything here returns plain strings; the
// templates escape them (html/template), so a payload can never become
// markup.

// viewFuncs are the templates' helpers.
var viewFuncs = template.FuncMap{
	"num":         fmtNum,
	"bytes":       fmtBytes,
	"show":        showName,
	"when":        fmtWhen,
	"ms":          fmtMs,
	"rate":        fmtRate,
	"queueURL":    queueURL,
	"jobURL":      jobURL,
	"schedTable":  schedTable,
	"text":        str,
	"qesc":        url.QueryEscape,
	"bulkForm":    bulkForm,
	"bulkConfirm": bulkConfirm,
	"bulkLabel":   bulkLabel,
	"checkbox":    checkbox,
	"pager": func(first, next, k string, n int) map[string]any {
		return map[string]any{"First": first, "Next": next, "K": k, "N": n}
	},
	"int64": func(n int) int64 { return int64(n) },
	"div": func(a, b int64) int64 {
		if b == 0 {
			return 0
		}
		return a / b
	},
}

// fmtNum writes an integer with thin groups: 1234567 -> "1,234,567".
func fmtNum(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// fmtBytes is a size in binary units, to three significant digits.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit || u == "TiB" {
			switch {
			case f < 10:
				return fmt.Sprintf("%.2f %s", f, u)
			case f < 100:
				return fmt.Sprintf("%.1f %s", f, u)
			}
			return fmt.Sprintf("%.0f %s", f, u)
		}
	}
	return ""
}

// fmtRate is a per-second rate; negative means not known yet (one sample).
func fmtRate(r float64) string {
	switch {
	case r < 0:
		return "…"
	case r == 0:
		return "0"
	case r < 10:
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return fmtNum(int64(r + 0.5))
}

// fmtMs is a duration given in milliseconds, with its unit.
func fmtMs(ms int64) string {
	return fmtDur(time.Duration(ms) * time.Millisecond)
}

// fmtDur rounds a duration to what a person reads: 850ms, 12.3s, 4m10s,
// 3h12m, 2d4h.
func fmtDur(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		s = strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		s = strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		s = fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
	if neg {
		return "-" + s
	}
	return s
}

// fmtWhen is a unix-ms time in UTC, to the millisecond.
func fmtWhen(ms int64) string {
	if ms <= 0 {
		return "—"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000Z")
}

// showName renders a key or id that may hold any bytes: printable text as
// it is, anything else as a \xNN escape, so two different names never look
// the same and no control character reaches the page.
func showName(s string) string {
	if s == "" {
		return `""`
	}
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean && !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case (r == utf8.RuneError && n == 1) || !unicode.IsPrint(r):
			for _, c := range []byte(s[i : i+n]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// queueURL and jobURL are the pages' addresses. Names go in the query, so a
// queue called "a/b?c" or holding any byte still has a page.
func queueURL(key string) string {
	return "/queue?" + url.Values{"key": {key}}.Encode()
}

func jobURL(key, id string) string {
	return "/job?" + url.Values{"key": {key}, "id": {id}}.Encode()
}

// payloadView is a payload as a page shows it.
type payloadView struct {
	Size      int
	Binary    bool
	JSON      bool   // a JSON object or array, shown indented
	Text      string // the text shown, or the hex dump for binary
	Truncated bool   // Text shows only the first Shown bytes
	Shown     int
}

// isText says whether a payload reads as text: valid UTF-8 without control
// characters other than tab and line breaks.
func isText(p []byte) bool {
	if !utf8.Valid(p) {
		return false
	}
	for _, r := range string(p) {
		if r == '\n' || r == '\r' || r == '\t' {
			continue
		}
		if unicode.IsControl(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// viewPayload shows up to limit bytes of a payload: as text, or as a hex
// dump when it is binary. A cut falls on a rune boundary.
//
// A JSON object or array that fits is shown indented (json.Indent: keys,
// order and numbers as they were sent, only the white space changes); one
// too long to show whole is shown as sent, since half a document cannot be
// laid out.
func viewPayload(p []byte, limit int) payloadView {
	v := payloadView{Size: len(p), Binary: !isText(p)}
	if !v.Binary && (limit <= 0 || len(p) <= limit) && isJSONDoc(p) {
		var b bytes.Buffer
		if json.Indent(&b, p, "", "  ") == nil {
			v.JSON, v.Text, v.Shown = true, b.String(), len(p)
			return v
		}
	}
	shown := p
	if limit > 0 && len(p) > limit {
		cut := limit
		if !v.Binary {
			for cut > 0 && !utf8.RuneStart(p[cut]) {
				cut--
			}
		}
		shown = p[:cut]
		v.Truncated = true
	}
	v.Shown = len(shown)
	if v.Binary {
		v.Text = hexDump(shown)
	} else {
		v.Text = string(shown)
	}
	return v
}

// isJSONDoc says whether p is a JSON object or array (a bare string or
// number is shown as the text it is).
func isJSONDoc(p []byte) bool {
	t := bytes.TrimLeft(p, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(p)
}

// preview is a payload in one table cell: the start of its text on one
// line, or the first bytes in hex.
func preview(p []byte) string {
	const maxRunes, maxHex = 60, 16
	if !isText(p) {
		n := min(len(p), maxHex)
		s := fmt.Sprintf("binary, %d bytes: % x", len(p), p[:n])
		if n < len(p) {
			s += " …"
		}
		return s
	}
	s := strings.Join(strings.Fields(string(p)), " ")
	if utf8.RuneCountInString(s) > maxRunes {
		r := []rune(s)
		s = string(r[:maxRunes]) + " …"
	}
	return s
}

// hexDump is the layout of hexdump -C: offset, 16 bytes in hex, the bytes
// as ASCII with '.' for the rest.
func hexDump(p []byte) string {
	var b strings.Builder
	for off := 0; off < len(p); off += 16 {
		row := p[off:min(off+16, len(p))]
		fmt.Fprintf(&b, "%08x  ", off)
		for i := range 16 {
			if i < len(row) {
				fmt.Fprintf(&b, "%02x ", row[i])
			} else {
				b.WriteString("   ")
			}
			if i == 7 {
				b.WriteByte(' ')
			}
		}
		b.WriteString(" |")
		for _, c := range row {
			if c >= 0x20 && c < 0x7f {
				b.WriteByte(c)
			} else {
				b.WriteByte('.')
			}
		}
		b.WriteString("|\n")
	}
	return b.String()
}
