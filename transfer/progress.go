package transfer

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress shows how far an export or an import is: on a terminal a bar
// redrawn in place (jobs, jobs/s, ETA), elsewhere (a log, CI) a plain line
// every PlainEvery, so a file of it stays readable.
type Progress struct {
	Out  io.Writer
	TTY  bool
	What string // "export", "import"
	// Total is the jobs expected, or TotalBytes the input's size (the bar
	// then measures Bytes against it); neither known: no bar, no ETA.
	Total, TotalBytes int64
	Jobs, Bytes       atomic.Int64

	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup
}

// PlainEvery is how often a Progress writes a line when not on a terminal.
var PlainEvery = 5 * time.Second

// Start begins reporting, until Stop.
func (p *Progress) Start() {
	p.start = time.Now()
	p.stop = make(chan struct{})
	every := PlainEvery
	if p.TTY {
		every = 200 * time.Millisecond
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.show(false)
			}
		}
	}()
}

// Stop ends reporting with the figures at the end (and the newline a bar
// left out).
func (p *Progress) Stop() {
	if p.stop == nil {
		return
	}
	close(p.stop)
	p.done.Wait()
	p.stop = nil
	if p.TTY {
		p.show(true)
	}
}

func (p *Progress) show(last bool) {
	el := time.Since(p.start)
	jobs := p.Jobs.Load()
	rate := float64(jobs) / max(el.Seconds(), 1e-3)
	frac := -1.0
	switch {
	case p.TotalBytes > 0:
		frac = float64(p.Bytes.Load()) / float64(p.TotalBytes)
	case p.Total > 0:
		frac = float64(jobs) / float64(p.Total)
	}
	frac = min(frac, 1)
	of := ""
	if p.Total > 0 {
		of = fmt.Sprintf("/%d", p.Total)
	}
	line := fmt.Sprintf("%s: %d%s jobs, %.0f jobs/s", p.What, jobs, of, rate)
	if frac > 0 && !last {
		eta := time.Duration(float64(el) * (1 - frac) / frac).Round(time.Second)
		line += fmt.Sprintf(", ETA %s", eta)
	}
	if !p.TTY {
		fmt.Fprintln(p.Out, line)
		return
	}
	bar := ""
	if frac >= 0 {
		const width = 30
		n := int(frac * width)
		bar = "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "] "
	}
	end := ""
	if last {
		end = "\n"
	}
	fmt.Fprintf(p.Out, "\r\x1b[K%s%s%s", bar, line, end)
}
