package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// The dashboard: server-rendered pages (html/template), one small
// stylesheet and one small script embedded in the binary. Every number on
// a page comes from a command reply (Server.Do), the charts' from replies
// sampled into a ring (dashboard_charts.go); every button posts an action
// that runs its commands, one per job at most (dashboard_actions.go). On
// a cluster follower the pages read its own copy and offer no action
// (dashboard_node.go).
//
// Live updates: the script fetches the page's own address every second
// with the header X-Delayd-Live and gets back only <main>; it swaps in the
// regions (data-live) whose HTML changed. The server renders both from the
// same templates, so there is one way a number is shown.

//go:embed ui
var uiFiles embed.FS

const liveHeader = "X-Delayd-Live"

// dashboard holds the parsed templates and what the pages remember between
// requests: counter samples for rates, and the queue list for a second.
type dashboard struct {
	s       *Server
	pages   map[string]*template.Template
	assetV  string // a hash of the embedded assets, to version their URLs
	rates   rateBook
	queues  queueCache
	leaders leaderBook
	charts  chartBook
	started time.Time
}

// dashboardRoutes registers the dashboard's pages, the actions they post,
// and the embedded assets.
func (s *Server) dashboardRoutes() {
	d := newDashboard(s)
	s.dash = d
	s.mux.HandleFunc("GET /{$}", d.page("overview", d.overview))
	s.mux.HandleFunc("GET /queues", d.page("queues", d.queueList))
	s.mux.HandleFunc("GET /queue", d.page("queue", d.queue))
	s.mux.HandleFunc("GET /job", d.page("job", d.job))
	s.mux.HandleFunc("GET /schedules", d.page("schedules", d.schedules))
	s.mux.HandleFunc("GET /job/payload", d.payload)
	s.mux.Handle("POST /action", http.NewCrossOriginProtection().Handler(http.HandlerFunc(d.action)))
	s.mux.Handle("GET /ui/", d.assets())
	// Browsers ask for /favicon.ico whatever the page says; the icon is an
	// SVG, which they take from there too.
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		b, _ := uiFiles.ReadFile("ui/icon.svg")
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		_, _ = w.Write(b)
	})
}

func newDashboard(s *Server) *dashboard {
	d := &dashboard{s: s, pages: map[string]*template.Template{}, started: time.Now()}
	sum := sha256.New()
	_ = fs.WalkDir(uiFiles, "ui", func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			b, _ := uiFiles.ReadFile(p)
			sum.Write(b)
		}
		return nil
	})
	d.assetV = hex.EncodeToString(sum.Sum(nil))[:12]
	funcs := template.FuncMap{"act": d.act}
	for k, v := range viewFuncs {
		funcs[k] = v
	}
	for _, name := range []string{"overview", "queues", "queue", "job", "schedules", "confirm", "result"} {
		d.pages[name] = template.Must(template.New(name).Funcs(funcs).
			ParseFS(uiFiles, "ui/layout.html", "ui/parts.html", "ui/"+name+".html"))
	}
	return d
}

// view is what every page's template gets.
type view struct {
	Title  string
	Nav    string // the menu entry to mark: overview, queues or schedules
	Self   string // this page's address, where actions come back to
	AssetV string
	Host   string
	// ReadOnly: this node cannot run the pages' actions (a cluster
	// follower), so none is offered.
	ReadOnly bool
	Node     nodeView
	Data     any
}

// page serves one page: the whole document, or only <main> for a live
// update.
func (d *dashboard) page(name string, load func(ctx context.Context, r *http.Request) (string, any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d.startSampler() // from the first page on (dashboard_charts.go)
		ctx := r.Context()
		node := d.node(ctx)
		if node.Follower {
			ctx = WithReadOnly(ctx) // its own copy, not MOVED (dashboard_node.go)
		}
		title, data := load(ctx, r)
		nav := name
		if name == "queue" || name == "job" {
			nav = "queues"
		}
		d.render(w, r, http.StatusOK, name, view{Title: title, Nav: nav, Self: r.URL.RequestURI(),
			Node: node, ReadOnly: node.Follower, Data: data})
	}
}

func (d *dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	v.AssetV = d.assetV
	v.Host = r.Host
	tmpl := "layout"
	if r.Header.Get(liveHeader) != "" {
		tmpl = "body"
	}
	var buf bytes.Buffer
	if err := d.pages[name].ExecuteTemplate(&buf, tmpl, v); err != nil {
		d.s.opts.Log.Error().Err(err).Str("page", name).Msg("dashboard template")
		http.Error(w, "dashboard: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	securityHeaders(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", liveHeader)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// securityHeaders: no script, style or frame from anywhere else, so even a
// payload that got past escaping could not run.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
}

// assets serves ui/*.css, *.js and *.svg. Their URLs carry the assets'
// hash, so a browser may keep them for a long time.
func (d *dashboard) assets() http.Handler {
	sub, _ := fs.Sub(uiFiles, "ui")
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch path.Ext(r.URL.Path) {
		case ".css", ".js", ".svg":
		default:
			http.NotFound(w, r)
			return
		}
		securityHeaders(w.Header())
		if r.URL.Query().Get("v") == d.assetV {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	})
}

// do runs one command; see Server.Do.
func (d *dashboard) do(ctx context.Context, args ...string) (any, error) {
	return d.s.Do(ctx, args...)
}

// --- overview

type overviewData struct {
	Err                           string
	Jobs, Delayed, Ready          int64
	Reserved, Queues              int64
	AddRate, DeliverRate, AckRate float64
	Totals                        []counter
	Clients, Blocked              int64
	ClientRows                    []clientLine
	ClientsMore                   int
	ClientsErr                    string
	LogOn                         bool
	LogSize, LogBase              int64
	LogFsync, LogRewriting        string
	Memory, Payloads              int64
	// Disk is what the horizon keeps out of memory (INFO memory); nil
	// when the horizon is off (no log, a cluster, --horizon 0).
	Disk          *diskView
	Uptime        string
	Version, Role string
	Lateness      *histogram
	Charts        chartsView
	// LatencyMs is INFO queues' latency_max_ms: the longest any ready job
	// has waited since its due time; -1 when the server does not say.
	LatencyMs int64
}

// diskView is the overview's "on disk" line: jobs due beyond the horizon
// out of memory in the far-future buckets, and payloads of jobs still in
// memory kept in the log (docs/decisions/far-future-buckets.md,
// payloads-on-disk.md).
type diskView struct {
	HorizonMs, FarJobs, FarBytes, Payloads, PayloadBytes int64
}

type counter struct {
	Name, Key string
	Help      string // what exactly is counted, where the name is not enough
	Value     int64
}

// overviewCounters are INFO stats' job counters, in the order shown. Each
// name says what its engine counter counts (engine.Stats): jobs_fired, for
// one, counts delayed jobs that came due, not schedule firings (a firing
// adds its ready job without touching either counter).
var overviewCounters = []counter{
	{Name: "jobs added", Key: "jobs_added", Help: "DELAY.ADD, DELAY.ADDAT, LPUSH, RPUSH"},
	{Name: "delayed jobs that came due", Key: "jobs_fired", Help: "moved from delayed to ready when their due time came"},
	{Name: "deliveries", Key: "jobs_delivered", Help: "every pop, first deliveries and redeliveries"},
	{Name: "redeliveries", Key: "jobs_redelivered", Help: "pops of a job delivered before"},
	{Name: "acked", Key: "jobs_acked"},
	{Name: "nacked", Key: "jobs_nacked"},
	{Name: "ack timeouts", Key: "jobs_expired", Help: "reservations whose ack deadline passed"},
	{Name: "taken back from workers that left", Key: "jobs_requeued", Help: "deliveries returned to the queue because the client disconnected"},
	{Name: "dead-lettered", Key: "jobs_dead_lettered"},
	{Name: "dropped", Key: "jobs_dropped", Help: "out of deliveries with no dead-letter queue"},
	{Name: "cancelled", Key: "jobs_cancelled", Help: "DELAY.CANCEL"},
}

// maxClientRows is how many connections the overview lists.
const maxClientRows = 20

func (d *dashboard) overview(ctx context.Context, r *http.Request) (string, any) {
	o := &overviewData{}
	v, err := d.do(ctx, "INFO", "server", "clients", "memory", "persistence", "stats", "replication", "queues", "lateness")
	if err != nil {
		o.Err = err.Error()
		return "Overview", o
	}
	now := time.Now()
	in := parseInfo(v)
	if in["persistence"]["loading"] == "1" {
		o.Err = "Loading: the server is replaying its log; queues and jobs show once it is done."
	}
	o.Jobs, o.Delayed = in.int("queues", "jobs"), in.int("queues", "delayed")
	o.Ready, o.Reserved, o.Queues = in.int("queues", "ready"), in.int("queues", "reserved"), in.int("queues", "queues")
	o.LatencyMs = -1
	if _, ok := in["queues"]["latency_max_ms"]; ok {
		o.LatencyMs = in.int("queues", "latency_max_ms")
	}
	o.AddRate = d.rates.observe("jobs_added", now, in.int("stats", "jobs_added"))
	o.DeliverRate = d.rates.observe("jobs_delivered", now, in.int("stats", "jobs_delivered"))
	o.AckRate = d.rates.observe("jobs_acked", now, in.int("stats", "jobs_acked"))
	for _, c := range overviewCounters {
		if _, ok := in["stats"][c.Key]; ok {
			c.Value = in.int("stats", c.Key)
			o.Totals = append(o.Totals, c)
		}
	}
	o.Clients, o.Blocked = in.int("clients", "connected_clients"), in.int("clients", "blocked_clients")
	o.LogOn = in["persistence"]["aof_enabled"] == "1"
	o.LogSize, o.LogBase = in.int("persistence", "aof_current_size"), in.int("persistence", "aof_base_size")
	o.LogFsync = in["persistence"]["aof_fsync"]
	if in["persistence"]["aof_rewrite_in_progress"] == "1" {
		o.LogRewriting = "rewriting"
	}
	o.Memory, o.Payloads = in.int("memory", "used_memory"), in.int("memory", "used_memory_payloads")
	if h := in.int("memory", "payload_horizon_ms"); h > 0 {
		o.Disk = &diskView{HorizonMs: h, FarJobs: in.int("memory", "far_jobs"), FarBytes: in.int("memory", "far_disk_bytes"),
			Payloads: in.int("memory", "payloads_on_disk"), PayloadBytes: in.int("memory", "payloads_on_disk_bytes")}
	}
	o.Uptime = fmtDur(time.Duration(in.int("server", "uptime_in_seconds")) * time.Second)
	o.Version = in["server"]["delayd_version"]
	o.Role = in["replication"]["role"]
	o.Lateness = parseLateness(in["lateness"])
	o.Charts = d.chartsFor("", now)

	cl, err := d.do(ctx, "CLIENT", "LIST")
	if err != nil {
		o.ClientsErr = err.Error()
	}
	for _, c := range parseClients(cl) {
		if c["addr"] == "http" {
			continue // the dashboard's own in-process connections
		}
		if len(o.ClientRows) == maxClientRows {
			o.ClientsMore++
			continue
		}
		o.ClientRows = append(o.ClientRows, c)
	}
	return "Overview", o
}

// --- one queue

type queueData struct {
	Key       string
	StatsErr  string
	Stats     []field
	Counts    struct{ Delayed, Ready, Reserved, Total int64 }
	Paused    bool
	HasPaused bool // DELAY.STATS has the paused field
	// LatencyMs is DELAY.STATS's latency (how long the oldest ready job
	// has waited); -1 when the server does not say.
	LatencyMs int64
	DeadLet   int64
	AddRate   float64
	DelRate   float64

	Upcoming    []jobRow
	UpcomingErr string
	Ready       []jobRow
	ReadyErr    string
	Reserved    []jobRow
	ReservedErr string
	DeadHere    bool // some listed ready job was dead-lettered here
	ErrorsHere  bool // some listed ready job carries a failure reason
	Limit       []field
	Schedules   []scheduleRow
	SchedErr    string
	Show        int
	Charts      chartsView
	// Paging through the delayed and reserved jobs (AFTER due id): the
	// next page's address when this one is full, and the first page's when
	// this is not it.
	UpNext, UpFirst   string
	ResNext, ResFirst string
}

type jobRow struct {
	ID, Preview string
	Due         int64 // the due time, or a reserved job's ack deadline
	Deliveries  int64
	Origin      string // the queue a dead-lettered job came from
	Error       string // its last failure reason (DELAY.NACK ... ERROR), if any
}

// queueShow is how many jobs of each state a queue page lists.
const queueShow = 25

func (d *dashboard) queue(ctx context.Context, r *http.Request) (string, any) {
	key := r.URL.Query().Get("key")
	q := &queueData{Key: key, Show: queueShow, AddRate: -1, DelRate: -1, LatencyMs: -1}
	show := strconv.Itoa(queueShow)
	if v, err := d.do(ctx, "DELAY.STATS", key); err != nil {
		q.StatsErr = err.Error()
	} else {
		q.Stats = fields(v)
		for _, f := range q.Stats {
			switch f.Name {
			case "delayed":
				q.Counts.Delayed = num(f.Value)
			case "ready":
				q.Counts.Ready = num(f.Value)
			case "reserved":
				q.Counts.Reserved = num(f.Value)
			case "dead_lettered":
				q.DeadLet = num(f.Value)
			case "added":
				q.AddRate = d.rates.observe("added\x00"+key, time.Now(), num(f.Value))
			case "deliveries":
				q.DelRate = d.rates.observe("delivered\x00"+key, time.Now(), num(f.Value))
			case "latency":
				q.LatencyMs = num(f.Value)
			case "paused":
				q.HasPaused = true
				q.Paused = num(f.Value) == 1 || str(f.Value) == "yes" || str(f.Value) == "true"
			}
		}
		q.Counts.Total = q.Counts.Delayed + q.Counts.Ready + q.Counts.Reserved
	}
	qv := r.URL.Query()
	pageURL := func(prefix, due, id string) string {
		v := url.Values{}
		for k, vs := range qv {
			if !strings.HasPrefix(k, prefix) {
				v[k] = vs
			}
		}
		if id != "" {
			v.Set(prefix+"due", due)
			v.Set(prefix+"id", id)
		}
		return "/queue?" + v.Encode()
	}
	after := func(args []string, prefix string) []string {
		if id := qv.Get(prefix + "id"); id != "" {
			return append(args, "AFTER", qv.Get(prefix+"due"), id)
		}
		return args
	}
	if qv.Get("uid") != "" {
		q.UpFirst = pageURL("u", "", "")
	}
	if qv.Get("rid") != "" {
		q.ResFirst = pageURL("r", "", "")
	}
	if v, err := d.do(ctx, after([]string{"DELAY.UPCOMING", key, show}, "u")...); err != nil {
		q.UpcomingErr = err.Error()
	} else {
		for _, e := range list(v) {
			if t := list(e); len(t) >= 3 {
				q.Upcoming = append(q.Upcoming, jobRow{ID: str(t[0]), Due: num(t[1]), Preview: preview(bytesOf(t[2]))})
			}
		}
		if n := len(q.Upcoming); n == queueShow {
			q.UpNext = pageURL("u", strconv.FormatInt(q.Upcoming[n-1].Due, 10), q.Upcoming[n-1].ID)
		}
	}
	if v, err := d.do(ctx, "DELAY.PEEK", key, show); err != nil {
		q.ReadyErr = err.Error()
	} else {
		for _, e := range list(v) {
			if t := list(e); len(t) >= 2 {
				row := jobRow{ID: str(t[0]), Preview: preview(bytesOf(t[1]))}
				// DELAY.GET names a dead-lettered job's origin (only those
				// get a Requeue button) and a failed job's last error (25
				// look-ups of about 5µs).
				if g, err := d.do(ctx, "DELAY.GET", key, row.ID); err == nil {
					m := fieldMap(g)
					row.Origin, row.Error = str(m["origin"]), str(m["error"])
				}
				q.DeadHere = q.DeadHere || row.Origin != ""
				q.ErrorsHere = q.ErrorsHere || row.Error != ""
				q.Ready = append(q.Ready, row)
			}
		}
	}
	if v, err := d.do(ctx, after([]string{"DELAY.RESERVED", key, show}, "r")...); err != nil {
		q.ReservedErr = err.Error()
	} else {
		for _, e := range list(v) {
			if t := list(e); len(t) >= 4 {
				q.Reserved = append(q.Reserved, jobRow{ID: str(t[0]), Due: num(t[1]), Deliveries: num(t[2]), Preview: preview(bytesOf(t[3]))})
			}
		}
		if n := len(q.Reserved); n == queueShow {
			q.ResNext = pageURL("r", strconv.FormatInt(q.Reserved[n-1].Due, 10), q.Reserved[n-1].ID)
		}
	}
	if v, err := d.do(ctx, "DELAY.LIMIT", key); err == nil {
		q.Limit = fields(v)
	}
	if v, err := d.do(ctx, "DELAY.SCHEDULES", key); err != nil {
		q.SchedErr = err.Error()
	} else {
		q.Schedules = scheduleRows(v)
	}
	q.Charts = d.chartsFor(key, time.Now())
	return "Queue " + showName(key), q
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func bytesOf(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return nil
}

// --- one job

type jobData struct {
	Key, ID  string
	Err      string
	Found    bool
	Fields   []jobField
	State    string
	Payload  payloadView
	Full     bool
	FullURL  string
	RawURL   string
	Reserved bool
	Origin   string
	Error    string // the last failure reason (DELAY.GET's error)
}

type jobField struct {
	Name, Text string
	Time       int64 // a unix-ms time, shown as one
	Link       string
}

// payloadLimit is how much of a payload a job page shows at first;
// payloadFull how much it shows when asked for all of it (the rest is a
// download).
const (
	payloadLimit = 4 << 10
	payloadFull  = 1 << 20
)

func (d *dashboard) job(ctx context.Context, r *http.Request) (string, any) {
	qv := r.URL.Query()
	j := &jobData{Key: qv.Get("key"), ID: qv.Get("id"), Full: qv.Get("full") == "1"}
	j.FullURL = jobURL(j.Key, j.ID) + "&full=1"
	j.RawURL = strings.Replace(jobURL(j.Key, j.ID), "/job?", "/job/payload?", 1)
	title := "Job " + showName(j.ID)
	if j.ID == "" {
		j.Err = "no job id given"
		return title, j
	}
	v, err := d.do(ctx, "DELAY.GET", j.Key, j.ID)
	if err != nil {
		j.Err = err.Error()
		return title, j
	}
	if v == nil {
		return title, j
	}
	j.Found = true
	for _, f := range fields(v) {
		jf := jobField{Name: f.Name, Text: str(f.Value)}
		switch f.Name {
		case "payload":
			limit := payloadLimit
			if j.Full {
				limit = payloadFull
			}
			j.Payload = viewPayload(bytesOf(f.Value), limit)
			continue
		case "due", "ack_deadline":
			jf.Time = num(f.Value)
		case "queue", "origin", "dead_letter", "deadletter":
			if jf.Text != "" {
				jf.Link = queueURL(jf.Text)
			}
			if f.Name == "origin" {
				j.Origin = jf.Text
			}
		case "state":
			j.State = jf.Text
		case "error":
			j.Error = jf.Text
		}
		jf.Text = showName(jf.Text)
		j.Fields = append(j.Fields, jf)
	}
	j.Reserved = j.State == "reserved"
	return title, j
}

// payload sends a job's payload as it is, as a download: never shown
// inline, so a payload holding HTML cannot run as this site's page.
func (d *dashboard) payload(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	ctx := r.Context()
	if d.node(ctx).Follower {
		ctx = WithReadOnly(ctx) // as its job page reads it
	}
	v, err := d.do(ctx, "DELAY.GET", qv.Get("key"), qv.Get("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if v == nil {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	p := bytesOf(fieldMap(v)["payload"])
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="payload.bin"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(p)))
	_, _ = w.Write(p)
}
