package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delayd/delayd/backup"
)

// backupCmd is "delayd backup --addr host:port -o FILE": it asks a running
// server for a backup (SYNC, the command redis-cli --rdb sends), follows
// MOVED from a cluster's follower to its leader, writes the file beside
// FILE, checks it whole, and renames it into place. Exit 0: FILE is a
// verified backup.
func backupCmd(args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("delayd backup", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:6380", "the server's host:port (any node of a cluster)")
	out := fs.StringP("output", "o", "", "the backup file to write (required)")
	user := fs.String("user", "", "ACL user (AUTH user password)")
	pass := fs.String("password", "", "password (requirepass, or the user's); also $DELAYD_PASSWORD")
	useTLS := fs.Bool("tls", false, "connect with TLS")
	caFile := fs.String("cacert", "", "PEM CA certificates to verify the server with (TLS)")
	certFile := fs.String("cert", "", "PEM client certificate (TLS, tls-auth-clients yes)")
	keyFile := fs.String("key", "", "PEM private key of --cert")
	insecure := fs.Bool("insecure", false, "do not verify the server's certificate (TLS)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: delayd backup --addr host:port -o FILE [--user U] [--password P] [--tls ...]")
		return 2
	}
	if *pass == "" {
		*pass = os.Getenv("DELAYD_PASSWORD")
	}
	var tcfg *tls.Config
	if *useTLS {
		var err error
		if tcfg, err = clientTLS(*caFile, *certFile, *keyFile, *insecure); err != nil {
			fmt.Fprintln(stderr, "delayd backup:", err)
			return 1
		}
	}
	d := dialer{user: *user, pass: *pass, tls: tcfg, deadline: time.Now().Add(*timeout)}
	h, size, err := d.fetch(*addr, *out)
	if err != nil {
		fmt.Fprintln(stderr, "delayd backup:", err)
		return 1
	}
	at := "at the moment the server took it"
	if h.Mode == backup.Cluster {
		at = fmt.Sprintf("at Raft index %d (the cluster's acknowledged writes up to it)", h.Index)
	}
	fmt.Fprintf(stderr, "%s: ok: %d jobs, %d records, %d bytes, taken %s from delayd %s, exact %s\n",
		*out, h.Jobs, h.Records, size, time.UnixMilli(h.Created).UTC().Format(time.RFC3339), h.Server, at)
	return 0
}

// dialer is how the CLI's clients connect: address, credentials, TLS.
type dialer struct {
	user, pass string
	tls        *tls.Config
	deadline   time.Time
}

// fetch asks addr for a backup and writes it to path, following MOVED to a
// cluster's leader (a few hops: leadership may move meanwhile).
// A leader busy with writes that do not commit (TRYAGAIN), or an election
// (CLUSTERDOWN), is asked again after a pause, until the deadline.
func (d dialer) fetch(addr, path string) (backup.Header, int64, error) {
	first := addr
	for hop := 0; ; hop++ {
		h, size, moved, err := d.fetchOnce(addr, path)
		switch {
		case err == nil || hop == 20:
			return h, size, err
		case moved != "":
			addr = moved
		case retryable(err) && time.Now().Add(time.Second).Before(d.deadline):
			time.Sleep(500 * time.Millisecond)
			addr = first // the leader may have changed
		default:
			return h, size, err
		}
	}
}

func retryable(err error) bool {
	var re replyError
	return errors.As(err, &re) && (strings.HasPrefix(string(re), "TRYAGAIN") || strings.HasPrefix(string(re), "CLUSTERDOWN"))
}

// replyError is an error reply, without its '-'.
type replyError string

func (e replyError) Error() string { return string(e) }

func (d dialer) fetchOnce(addr, path string) (h backup.Header, size int64, moved string, err error) {
	conn, err := d.dial(addr)
	if err != nil {
		return h, 0, "", err
	}
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 1<<20)
	line, err := roundTrip(conn, br, "SYNC")
	if err != nil {
		return h, 0, "", fmt.Errorf("%s: %w", addr, err)
	}
	if f := strings.Fields(line); len(f) == 3 && f[0] == "-MOVED" {
		return h, 0, f[2], fmt.Errorf("%s: %s", addr, line[1:])
	}
	if strings.HasPrefix(line, "-") {
		return h, 0, "", fmt.Errorf("%s: SYNC: %w", addr, replyError(line[1:]))
	}
	if !strings.HasPrefix(line, "$") {
		return h, 0, "", fmt.Errorf("%s: SYNC: unexpected reply %q", addr, line)
	}
	n, err := strconv.ParseInt(line[1:], 10, 64)
	if err != nil || n < 0 {
		return h, 0, "", fmt.Errorf("%s: SYNC: unexpected reply %q", addr, line)
	}
	h, err = saveChecked(io.LimitReader(br, n), path)
	return h, n, "", err
}

// dial connects and authenticates.
func (d dialer) dial(addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: 10 * time.Second}
	var conn net.Conn
	var err error
	if d.tls != nil {
		conn, err = tls.DialWithDialer(&nd, "tcp", addr, d.tls)
	} else {
		conn, err = nd.Dial("tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(d.deadline)
	if d.pass != "" {
		args := []string{"AUTH", d.pass}
		if d.user != "" {
			args = []string{"AUTH", d.user, d.pass}
		}
		line, err := roundTrip(conn, bufio.NewReader(conn), args...)
		if err == nil && line != "+OK" {
			err = errors.New(strings.TrimPrefix(line, "-"))
		}
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("%s: AUTH: %w", addr, err)
		}
	}
	return conn, nil
}

// roundTrip sends one command and reads its first reply line (without
// CRLF). AUTH's reader may be thrown away: nothing follows its one line.
func roundTrip(w io.Writer, br *bufio.Reader, args ...string) (string, error) {
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	if _, err := w.Write(b); err != nil {
		return "", err
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// saveChecked writes r to path.tmp, checks it whole (header, checksum,
// every record), fsyncs and renames it to path: path is a verified backup
// or untouched.
func saveChecked(r io.Reader, path string) (backup.Header, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return backup.Header{}, err
	}
	h, err := func() (backup.Header, error) {
		if _, err := io.Copy(f, r); err != nil {
			return backup.Header{}, err
		}
		if err := f.Sync(); err != nil {
			return backup.Header{}, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return backup.Header{}, err
		}
		h, _, err := backup.Check(bufio.NewReaderSize(f, 1<<20))
		return h, err
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return h, err
}

// clientTLS is the TLS configuration of the CLI's connections, with
// redis-cli's flags.
func clientTLS(caFile, certFile, keyFile string, insecure bool) (*tls.Config, error) {
	cfg := &tls.Config{InsecureSkipVerify: insecure, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", caFile)
		}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
