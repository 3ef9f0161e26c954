package main

import (
	"context"
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

// clientFlags are how export and import reach a server: the flags and the
// variable of delayd backup.
type clientFlags struct {
	addr, user, pass      *string
	tls, insecure         *bool
	cacert, cert, keyFile *string
}

func connFlags(fs *pflag.FlagSet) *clientFlags {
	return &clientFlags{
		addr:     fs.String("addr", "127.0.0.1:6380", "the server's host:port (any node of a cluster)"),
		user:     fs.String("user", "", "ACL user (AUTH user password)"),
		pass:     fs.String("password", "", "password (requirepass, or the user's); also $DELAYD_PASSWORD"),
		tls:      fs.Bool("tls", false, "connect with TLS"),
		cacert:   fs.String("cacert", "", "PEM CA certificates to verify the server with (TLS)"),
		cert:     fs.String("cert", "", "PEM client certificate (TLS, tls-auth-clients yes)"),
		keyFile:  fs.String("key", "", "PEM private key of --cert"),
		insecure: fs.Bool("insecure", false, "do not verify the server's certificate (TLS)"),
	}
}

func (f *clientFlags) server() (transfer.Server, error) {
	s := transfer.Server{Addr: *f.addr, User: *f.user, Password: *f.pass}
	if s.Password == "" {
		s.Password = os.Getenv("DELAYD_PASSWORD")
	}
	if *f.tls {
		var err error
		s.TLS, err = clientTLS(*f.cacert, *f.cert, *f.keyFile, *f.insecure) // cmd_backup.go
		return s, err
	}
	return s, nil
}
