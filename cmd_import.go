package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/delayd/delayd/transfer"
	"github.com/delayd/delayd/transfer/fromredis"
)

// readFromRedis is fromredis.Read; a test replaces it to see what the flags
// make of it.
var readFromRedis = fromredis.Read

// importCmd is "delayd import --addr host:port [-i file] [--skip N]", the
// JSON lines of delayd export, or "delayd import --addr host:port
// --from-redis URL --format asynq|bullmq|sidekiq|zset [--queue q ...]", the
// delayed jobs a Redis-based library keeps. Each job is written with
// DELAY.IMPORT, pipelined; an id the server holds already changes nothing,
// so a rerun is safe, and --skip spares it the lines a stopped run had
// done (it says how many).
func importCmd(args []string, stderr io.Writer) int {
	return runImport(args, os.Stdin, stderr)
}

func runImport(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := pflag.NewFlagSet("delayd import", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := connFlags(fs)
	in := fs.StringP("input", "i", "-", "file of JSON lines to read (-: stdin)")
	skip := fs.Int64("skip", 0, "lines to pass over first: where a stopped import got to")
	from := fs.String("from-redis", "", "read a Redis-based library's delayed jobs from this redis:// or rediss:// URL instead")
	format := fs.String("format", "", "with --from-redis: asynq, bullmq, sidekiq or zset")
	queues := fs.StringArray("queue", nil, "with --from-redis: a queue of the library (zset: a key) to read; repeat for more (default: every one found)")
	prefix := fs.String("prefix", "", "with --from-redis: the library's key prefix, where it has one (BullMQ: bull)")
	after := fs.Int64("after", 0, "with --from-redis: leave jobs due before this unix ms to the old system (a cut-over's first pass)")
	raw := fs.Bool("raw", false, "with --from-redis: the payload is the library's payload alone, without the envelope naming the task type")
	scoreUnit := fs.String("score-unit", "", "with --from-redis --format zset: the scores' unit, ms (default) or s")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usage := ""
	switch {
	case *from == "" && (*format != "" || len(*queues) > 0 || *prefix != "" || *after != 0 || *raw || *scoreUnit != ""):
		usage = "--format, --queue, --prefix, --after, --raw and --score-unit go with --from-redis"
	case *scoreUnit != "" && (*format != "zset" || (*scoreUnit != "ms" && *scoreUnit != "s")):
		usage = "--score-unit is ms or s, with --format zset"
	case *after < 0:
		usage = "--after is a unix time in ms, 0 or more"
	case *from != "" && !slices.Contains([]string{"asynq", "bullmq", "sidekiq", "zset"}, *format):
		usage = "--from-redis needs --format asynq, bullmq, sidekiq or zset"
	case *from != "" && (*skip != 0 || *in != "-"):
		usage = "--skip and --input read JSON lines, not --from-redis"
	case *skip < 0:
		usage = "--skip must be 0 or more"
	}
	if usage != "" {
		fmt.Fprintln(stderr, "delayd import:", usage)
		return 2
	}
	srv, err := conn.server()
	if err != nil {
		fmt.Fprintln(stderr, "delayd import:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := stdin
	var size int64
	if *from == "" && *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintln(stderr, "delayd import:", err)
			return 1
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		r = f
	}
	c, err := transfer.Dial(ctx, srv)
	if err != nil {
		fmt.Fprintln(stderr, "delayd import:", err)
		return 1
	}
	defer c.Close()

	prog := &transfer.Progress{Out: stderr, TTY: isTerminal(stderr), What: "import", TotalBytes: size}
	prog.Start()
	im := transfer.NewImporter(ctx, c, prog)
	type result struct {
		rep *fromredis.Report // --from-redis only
		err error
	}
	read := make(chan result, 1)
	go func() {
		if *from != "" {
			rp, err := readFromRedis(ctx, fromredis.Options{
				URL: *from, Format: *format, Queues: *queues, Prefix: *prefix,
				After: *after, Raw: *raw, ScoreUnit: *scoreUnit,
			}, im.Add)
			read <- result{&rp, err}
			return
		}
		read <- result{nil, transfer.ReadLines(r, *skip, im, prog)}
	}()
	var rep *fromredis.Report
	select {
	case res := <-read:
		rep, err = res.rep, res.err
		if cerr := im.Close(); err == nil {
			err = cerr
		}
	case <-ctx.Done():
		// Interrupted. The reader may be blocked on its input (a pipe
		// that says nothing): it is left, and the resume point is the
		// batches done by now.
		err = context.Cause(ctx)
	}
	prog.Stop()

	if rep != nil {
		fmt.Fprintf(stderr, "delayd import: from redis: read %d, skipped %d%s\n", rep.Read, rep.Skipped, reasons(rep.Reasons))
	}
	counts := im.Counts()
	fmt.Fprintln(stderr, "delayd import:", counts)
	if err != nil {
		if *from == "" {
			at := *skip + im.Done()
			fmt.Fprintf(stderr, "delayd import: stopped after line %d: %v; rerun with --skip %d to go on\n", at, err, at)
		} else {
			fmt.Fprintf(stderr, "delayd import: stopped: %v; a rerun adds only what is missing\n", err)
		}
		return 1
	}
	if counts.Failed > 0 {
		return 1
	}
	return 0
}

// reasons renders a count of reasons: " (why: n; ...)".
func reasons(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	var rs []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		rs = append(rs, k+": "+strconv.FormatInt(m[k], 10))
	}
	return " (" + strings.Join(rs, "; ") + ")"
}
