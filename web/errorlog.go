package web

import (
	"log"
	"strings"

	"github.com/rs/zerolog"
)

// errorLog is net/http's ErrorLog routed into the server's logger: left
// nil, net/http writes to the standard logger, so every TLS handshake a
// scanner or a client without a certificate fails would land on stderr
// beside, and unlike, the JSON log.
func errorLog(l zerolog.Logger) *log.Logger {
	return log.New(httpErrorWriter{l}, "", 0)
}

// httpErrorWriter sorts net/http's lines by what they mean. A failed
// handshake is the client's doing and comes at debug, as RESP's does
// (resp/tls.go); so do HTTP/2's chatter and requests that break off. An
// accept that failed, a handler's panic or misuse of the ResponseWriter is
// the server's and comes at warn or error. Lines hold addresses and TLS or
// runtime errors, never a request's body or credentials: net/http does not
// log those.
type httpErrorWriter struct{ l zerolog.Logger }

func (w httpErrorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	ev := w.l.Warn()
	switch {
	case strings.HasPrefix(msg, "http: TLS handshake error"), strings.HasPrefix(msg, "http2:"),
		strings.Contains(msg, "connection reset by peer"), strings.Contains(msg, "broken pipe"):
		ev = w.l.Debug()
	case strings.HasPrefix(msg, "http: panic serving"):
		// The stack follows on the next lines: a field of its own, so the
		// message stays one line.
		var stack string
		msg, stack, _ = strings.Cut(msg, "\n")
		ev = w.l.Error().Str("stack", stack)
	}
	ev.Str("component", "http").Msg(msg)
	return len(p), nil
}
