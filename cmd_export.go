package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/delayd/delayd/transfer"
)

// exportCmd is "delayd export --addr host:port [--queue q ...] [-o file]":
// every job of the queues (all by default) as JSON lines, to stdout or a
// file, with a progress bar on stderr when it is a terminal.
func exportCmd(args []string, stderr io.Writer) int {
	return runExport(args, os.Stdout, stderr)
}

func runExport(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("delayd export", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := connFlags(fs)
	queues := fs.StringArray("queue", nil, "a queue to export (repeat for more; default: every queue)")
	out := fs.StringP("output", "o", "-", "file to write the JSON lines to (-: stdout)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	srv, err := conn.server()
	if err != nil {
		fmt.Fprintln(stderr, "delayd export:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := transfer.Dial(ctx, srv)
	if err != nil {
		fmt.Fprintln(stderr, "delayd export:", err)
		return 1
	}
	defer c.Close()
	names := *queues
	if len(names) == 0 {
		if names, err = transfer.Queues(ctx, c); err != nil {
			fmt.Fprintln(stderr, "delayd export: listing the queues:", err)
			return 1
		}
	}
	w := stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(stderr, "delayd export:", err)
			return 1
		}
		defer f.Close()
		w = f
	}
	prog := &transfer.Progress{Out: stderr, TTY: isTerminal(stderr), What: "export"}
	prog.Total, _ = transfer.CountJobs(ctx, c, names) // only for the bar: 0 if it cannot
	prog.Start()
	n, err := transfer.Export(ctx, c, names, w, prog)
	prog.Stop()
	if err == nil && *out != "-" {
		err = w.(*os.File).Close()
	}
	if err != nil {
		fmt.Fprintf(stderr, "delayd export: stopped after %d jobs: %v\n", n, err)
		return 1
	}
	fmt.Fprintf(stderr, "delayd export: %d jobs of %d queues\n", n, len(names))
	return 0
}

// clientFlags are how export and import reach a server.
type clientFlags struct {
	addr, user, pass             *string
	tls, insecure                *bool
	cacert, cert, key, tlsServer *string
}

func connFlags(fs *pflag.FlagSet) *clientFlags {
	return &clientFlags{
		addr:      fs.String("addr", "127.0.0.1:6379", "host:port of the server (any node of a cluster)"),
		user:      fs.String("user", "", "ACL user (default: the default user)"),
		pass:      fs.String("pass", "", "password (default: $DELAYD_AUTH)"),
		tls:       fs.Bool("tls", false, "connect with TLS"),
		insecure:  fs.Bool("insecure", false, "with --tls: do not verify the server's certificate"),
		cacert:    fs.String("cacert", "", "with --tls: CA certificate file to verify the server with"),
		cert:      fs.String("cert", "", "with --tls: client certificate file"),
		key:       fs.String("key", "", "with --tls: client private key file"),
		tlsServer: fs.String("sni", "", "with --tls: server name to verify (default: the host of --addr)"),
	}
}

func (f *clientFlags) server() (transfer.Server, error) {
	s := transfer.Server{Addr: *f.addr, User: *f.user, Password: *f.pass}
	if s.Password == "" {
		s.Password = os.Getenv("DELAYD_AUTH")
	}
	if !*f.tls {
		return s, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: *f.insecure, ServerName: *f.tlsServer, MinVersion: tls.VersionTLS12}
	if *f.cacert != "" {
		pem, err := os.ReadFile(*f.cacert)
		if err != nil {
			return s, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return s, errors.New(*f.cacert + ": no certificate in it")
		}
	}
	if *f.cert != "" || *f.key != "" {
		pair, err := tls.LoadX509KeyPair(*f.cert, *f.key)
		if err != nil {
			return s, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	s.TLS = cfg
	return s, nil
}
