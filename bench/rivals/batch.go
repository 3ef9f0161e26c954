package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// The batch workers are what a worker written for throughput does with
// delayd: it never waits for an ACK's reply before asking for more work.
// Its ACK of the jobs it just finished and its next pop go out in one
// write; the ACK's reply comes back first (the server answers it before the
// pop blocks), and that reply is when the jobs count as finished, as for
// the one-at-a-time worker. go-redis's pipelines return only when every
// reply is in, which would date the ACK by the next pop's reply (up to a
// second later when the queue is empty), so these workers speak RESP on a
// plain connection. That also makes their client side cheaper than
// go-redis's; the server side (its CPU per job, pinned on its own CPU) is
// what the comparison is about.

// respConn is one worker's connection: a buffered writer for the requests
// and a reader for the replies.
type respConn struct {
	nc net.Conn
	r  *bufio.Reader
	w  *bufio.Writer
}

func dialResp(addr string) (*respConn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &respConn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 16<<10)}, nil
}

// cmd appends one request to the write buffer.
func (c *respConn) cmd(args ...string) {
	c.w.WriteByte('*')
	c.w.WriteString(strconv.Itoa(len(args)))
	c.w.WriteString("\r\n")
	for _, a := range args {
		c.w.WriteByte('$')
		c.w.WriteString(strconv.Itoa(len(a)))
		c.w.WriteString("\r\n")
		c.w.WriteString(a)
		c.w.WriteString("\r\n")
	}
}

// reply reads one reply: string, int64, []any, nil (null), or an error
// for a RESP error line.
func (c *respConn) reply() (any, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, fmt.Errorf("short reply %q", line)
	}
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errors.New(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = c.reply(); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

// batchWorkers runs n workers that each pop up to count jobs (count 1:
// DELAY.POP, else DELAY.MPOP ... COUNT count) and send the ACK of the
// jobs they got in the same write as their next pop.
func batchWorkers(addr string, n, count int, rec *recorder) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	secs := strconv.FormatFloat(popTimeout.Seconds(), 'f', -1, 64)
	cs := strconv.Itoa(count)
	conns := make([]*respConn, 0, n)
	for i := 0; i < n; i++ {
		c, err := dialResp(addr)
		if err != nil {
			for _, c := range conns {
				c.nc.Close()
			}
			cancel()
			return nil, err
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.nc.Close()
			var ids, payloads []string // taken, not yet acknowledged
			for ctx.Err() == nil {
				if err := batchRound(c, count, secs, cs, &ids, &payloads, rec); err != nil {
					if ctx.Err() == nil {
						rec.fail(err)
					}
					return // the stream may be out of step: this worker stops
				}
			}
		}()
	}
	return func() { cancel(); wg.Wait() }, nil
}

// batchRound sends the ACK of the jobs held (if any) and the next pop in
// one write, then reads both replies.
func batchRound(c *respConn, count int, secs, cs string, ids, payloads *[]string, rec *recorder) error {
	c.nc.SetDeadline(time.Now().Add(popTimeout + 10*time.Second))
	acking := len(*ids) > 0
	if acking {
		c.cmd(append([]string{"DELAY.ACK", queue}, *ids...)...)
	}
	if count == 1 {
		c.cmd("DELAY.POP", queue, secs)
	} else {
		c.cmd("DELAY.MPOP", secs, "1", queue, "COUNT", cs)
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	if acking {
		v, err := c.reply()
		if err != nil {
			return err
		}
		if k, _ := v.(int64); k != int64(len(*ids)) {
			return fmt.Errorf("DELAY.ACK of %d jobs replied %v", len(*ids), v)
		}
		for _, p := range *payloads {
			rec.done(p)
		}
		*ids, *payloads = (*ids)[:0], (*payloads)[:0]
	}
	v, err := c.reply()
	if err != nil {
		return err
	}
	a, _ := v.([]any)
	if a == nil {
		return nil // the pop timed out
	}
	if count == 1 {
		if len(a) != 3 {
			return fmt.Errorf("DELAY.POP replied %v", v)
		}
		id, _ := a[1].(string)
		p, _ := a[2].(string)
		*ids, *payloads = append(*ids, id), append(*payloads, p)
		return nil
	}
	if len(a) != 2 {
		return fmt.Errorf("DELAY.MPOP replied %v", v)
	}
	jobs, _ := a[1].([]any)
	for _, j := range jobs {
		jp, _ := j.([]any)
		if len(jp) != 2 {
			return fmt.Errorf("DELAY.MPOP replied %v", v)
		}
		id, _ := jp[0].(string)
		p, _ := jp[1].(string)
		*ids, *payloads = append(*ids, id), append(*payloads, p)
	}
	return nil
}
