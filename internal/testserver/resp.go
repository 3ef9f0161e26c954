package testserver

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The harness speaks raw RESP, with a fresh connection for each question:
// it must work before the server is ready and whatever client library the
// test package uses, and a connection it leaves open would show in the
// server's client counts.

// Ping reports whether a raw PING to addr gets a reply other than
// -LOADING.
func Ping(addr string) bool { return PingAuth(addr, nil, "") }

// PingAuth is Ping over TLS with cfg (nil: plain TCP), after AUTH pass when
// pass is not empty: true when the PING's reply is anything but -LOADING
// (-NOAUTH included: the server is up, its password is not the one given).
func PingAuth(addr string, cfg *tls.Config, pass string) bool {
	c, err := dial(addr, cfg)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	req := "*1\r\n$4\r\nPING\r\n"
	if pass != "" {
		req = command("AUTH", pass) + req
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return false
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if pass != "" && err == nil {
		line, err = r.ReadString('\n') // the PING's, after AUTH's +OK or error
	}
	return err == nil && (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-")) &&
		!strings.HasPrefix(line, "-LOADING")
}

func dial(addr string, cfg *tls.Config) (net.Conn, error) {
	if cfg != nil {
		return tls.DialWithDialer(&net.Dialer{Timeout: 200 * time.Millisecond}, "tcp", addr, cfg)
	}
	return net.DialTimeout("tcp", addr, 200*time.Millisecond)
}

// command encodes args as a RESP array of bulk strings.
func command(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// Do sends one command to s (after AUTH with its password, over its TLS)
// and returns a status, integer or bulk reply as a string; an error reply
// is an error. Within 3 s.
func (s *Server) Do(args ...string) (string, error) {
	c, err := dial(s.Addr(), s.TLS)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	req := command(args...)
	pass := s.Password()
	if pass != "" {
		req = command("AUTH", pass) + req
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	if pass != "" {
		if _, err := readReply(r); err != nil {
			return "", fmt.Errorf("AUTH: %w", err)
		}
	}
	return readReply(r)
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bulk reply %q", line)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("reply %q: not a status, integer or bulk string", line)
}

// InfoField finds "field:value" in an INFO text.
func InfoField(text, field string) (string, bool) {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v, true
		}
	}
	return "", false
}
