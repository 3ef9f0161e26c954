package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Actions: each button is a form that posts to /action?op=...&key=...&id=...
// and runs one command. Names ride in the query string (percent-encoded)
// rather than in form fields, so a queue or job id holding any byte comes
// back exactly as the page got it.
//
// Every action asks first. The script asks with confirm() and then posts
// with confirmed=1; without the script, a post without confirmed=1 gets a
// page that asks, whose button posts again with it.
//
// Cross-site requests are refused by net/http's CrossOriginProtection
// (Sec-Fetch-Site, else Origin against Host), wrapped around this handler
// in dashboardRoutes: a page elsewhere cannot make a logged-in browser
// press these buttons. Requests from non-browsers (curl), which carry
// neither header, pass: they need the password anyway when one is set.

// actionHeader marks a post from the dashboard's script, which wants JSON.
const actionHeader = "X-Delayd-Action"

// maxSelection is the most jobs one action takes: a page lists 25 of each
// state, and a post of a million ids is no dashboard's.
const maxSelection = 1000

type actionView struct {
	Op, Label, Confirm, Class string
	URL, Back                 string
	// Delay: the action asks for a delay (reschedule).
	Delay bool
	// Hidden fields the confirmation page posts again (a selection).
	Fields []formField
}

type formField struct{ Name, Value string }

// act builds a button for a template: op is cancel, promote, reschedule,
// requeue, requeue-all, pause, resume or unschedule; back is the page to
// return to.
func (d *dashboard) act(op, key, id, back string) actionView {
	v := url.Values{"op": {op}, "key": {key}}
	if id != "" {
		v.Set("id", id)
	}
	v.Set("back", back)
	a := actionView{Op: op, URL: "/action?" + v.Encode(), Back: back}
	a.Label, a.Class, a.Confirm = actionText(op, key, []string{id})
	a.Delay = op == "reschedule"
	return a
}

// actionText is an action's button label, its class, and the question it
// asks: about one job when ids holds one, else about a selection (with {n}
// for its size when ids is nil).
func actionText(op, key string, ids []string) (label, class, confirm string) {
	q := showName(key)
	jobs := "job " + showName(first(ids))
	if len(ids) != 1 {
		n := "{n}"
		if ids != nil {
			n = strconv.Itoa(len(ids))
		}
		jobs = "the " + n + " selected jobs"
	}
	switch op {
	case "cancel":
		return "Cancel", "danger", fmt.Sprintf("Cancel %s of queue %s? They are removed whatever their state (DELAY.CANCEL).", jobs, q)
	case "promote":
		return "Run now", "", fmt.Sprintf("Run %s of queue %s now? Delayed jobs become ready at once (DELAY.PROMOTE); ready and reserved ones are left as they are.", jobs, q)
	case "reschedule":
		return "Reschedule", "", fmt.Sprintf("Reschedule %s of queue %s to be due after the delay given (DELAY.RESCHEDULE)? Reserved jobs are not moved.", jobs, q)
	case "requeue":
		return "Requeue", "", fmt.Sprintf("Requeue dead-lettered %s of %s to the queue they came from (DELAY.REQUEUE)?", jobs, q)
	case "requeue-all":
		return "Requeue all", "", fmt.Sprintf("Requeue every dead-lettered job of %s to its origin queue?", q)
	case "pause":
		return "Pause", "warn", fmt.Sprintf("Pause queue %s? Its jobs stay and keep their timing, but none is handed out until it is resumed.", q)
	case "resume":
		return "Resume", "", fmt.Sprintf("Resume queue %s? Its ready jobs are handed out again.", q)
	case "unschedule":
		return "Unschedule", "danger", fmt.Sprintf("Remove recurring schedule %s of queue %s? It fires no more; the jobs it already added stay.", showName(first(ids)), q)
	}
	return op, "", op + "?"
}

func first(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// actionCommands are the commands an action runs: one for an action on a
// queue, and for cancel and promote, which take many ids; one per job for
// reschedule and requeue, whose commands take one.
func actionCommands(op, key string, ids []string, to, delay string) ([][]string, error) {
	if key == "" {
		return nil, fmt.Errorf("no queue given")
	}
	needIDs := func() error {
		switch {
		case len(ids) == 0:
			return fmt.Errorf("no job selected")
		case len(ids) > maxSelection:
			return fmt.Errorf("%d jobs selected; at most %d at once", len(ids), maxSelection)
		}
		return nil
	}
	each := func(f func(id string) []string) ([][]string, error) {
		if err := needIDs(); err != nil {
			return nil, err
		}
		out := make([][]string, len(ids))
		for i, id := range ids {
			out[i] = f(id)
		}
		return out, nil
	}
	switch op {
	case "cancel", "promote":
		if err := needIDs(); err != nil {
			return nil, err
		}
		return [][]string{append([]string{"DELAY." + strings.ToUpper(op), key}, ids...)}, nil
	case "reschedule":
		ms, err := parseDelay(delay)
		if err != nil {
			return nil, err
		}
		return each(func(id string) []string { return []string{"DELAY.RESCHEDULE", key, id, strconv.FormatInt(ms, 10)} })
	case "requeue":
		return each(func(id string) []string {
			if to != "" {
				return []string{"DELAY.REQUEUE", key, id, to}
			}
			return []string{"DELAY.REQUEUE", key, id}
		})
	case "requeue-all":
		args := []string{"DELAY.REQUEUE", key, "ALL"}
		if to != "" {
			args = append(args, to)
		}
		return [][]string{args}, nil
	case "pause":
		return [][]string{{"DELAY.PAUSE", key}}, nil
	case "resume":
		return [][]string{{"DELAY.RESUME", key}}, nil
	case "unschedule":
		if len(ids) != 1 || ids[0] == "" {
			return nil, fmt.Errorf("no schedule name given")
		}
		return [][]string{{"DELAY.UNSCHEDULE", key, ids[0]}}, nil
	}
	return nil, fmt.Errorf("unknown action %q", op)
}

// parseDelay reads a reschedule's delay: a Go duration (90s, 10m, 1h30m)
// or a number of milliseconds, as DELAY.RESCHEDULE takes it.
func parseDelay(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("no delay given (say 30s, 10m, 2h, or milliseconds)")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur < 0 {
		return 0, fmt.Errorf("delay %q is not a duration (say 30s, 10m, 2h, or milliseconds)", s)
	}
	return dur.Milliseconds(), nil
}

// describe says what an action's replies mean, for a person: n is the sum
// of the commands' integer replies (the jobs they acted on).
func describe(op, key string, ids []string, n int64) string {
	q := showName(key)
	what := func(verb string) string {
		if len(ids) == 1 {
			if n == 0 {
				return ""
			}
			return fmt.Sprintf("%s job %s of queue %s.", verb, showName(ids[0]), q)
		}
		return fmt.Sprintf("%s %d of %d selected jobs of queue %s.", verb, n, len(ids), q)
	}
	switch op {
	case "cancel":
		if s := what("Cancelled"); s != "" {
			return s
		}
		return fmt.Sprintf("No job %s in queue %s: nothing cancelled.", showName(ids[0]), q)
	case "promote":
		if s := what("Made ready"); s != "" {
			return s
		}
		return fmt.Sprintf("Job %s of %s was not delayed (or is gone): nothing to run now.", showName(ids[0]), q)
	case "reschedule":
		if s := what("Rescheduled"); s != "" {
			return s
		}
		return fmt.Sprintf("Job %s of %s was not rescheduled (reserved, or gone).", showName(ids[0]), q)
	case "requeue":
		if s := what("Requeued"); s != "" {
			return s
		}
		return fmt.Sprintf("Job %s of %s was not requeued (not dead-lettered, or gone).", showName(ids[0]), q)
	case "requeue-all":
		return fmt.Sprintf("Requeued %d job(s) of %s.", n, q)
	case "pause":
		if n == 0 {
			return fmt.Sprintf("Queue %s was already paused.", q)
		}
		return fmt.Sprintf("Paused queue %s.", q)
	case "resume":
		if n == 0 {
			return fmt.Sprintf("Queue %s was not paused.", q)
		}
		return fmt.Sprintf("Resumed queue %s.", q)
	case "unschedule":
		if n == 0 {
			return fmt.Sprintf("No schedule %s on queue %s: nothing removed.", showName(ids[0]), q)
		}
		return fmt.Sprintf("Removed schedule %s of queue %s.", showName(ids[0]), q)
	}
	return fmt.Sprint(n)
}

type actionResult struct {
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
	Command string `json:"command,omitempty"`
	Back    string `json:"-"`
}

// actionIDs are the jobs an action names: id in the query (one button),
// and ids in the form (a selection's checkboxes). A checkbox's value is
// its id percent-encoded, so an id of any bytes survives the page.
func actionIDs(r *http.Request) []string {
	ids := r.URL.Query()["id"]
	_ = r.ParseForm()
	for _, e := range r.PostForm["ids"] {
		if id, err := url.QueryUnescape(e); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

func (d *dashboard) action(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	key, to := qv.Get("key"), qv.Get("to")
	op := qv.Get("op")
	if op == "" {
		op = r.PostFormValue("op") // a selection's button names its action
	}
	delay := r.PostFormValue("delay")
	if delay == "" {
		delay = qv.Get("delay")
	}
	ids := actionIDs(r)
	back := qv.Get("back")
	// Only a path on this server: never an open redirect.
	if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.HasPrefix(back, `/\`) {
		back = "/"
	}
	wantsJSON := r.Header.Get(actionHeader) != ""
	if n := d.node(r.Context()); n.Follower {
		// No button is offered here; a post from an old page, or a script,
		// is told where to go rather than given MOVED.
		msg := "This node is a cluster follower: actions run on the leader"
		if n.Leader != "" {
			msg += " (" + n.Leader + ")"
		}
		d.actionReply(w, r, wantsJSON, http.StatusConflict, actionResult{Error: msg + ".", Back: back})
		return
	}
	cmds, err := actionCommands(op, key, ids, to, delay)
	if err != nil {
		d.actionReply(w, r, wantsJSON, http.StatusBadRequest, actionResult{Error: err.Error(), Back: back})
		return
	}
	if r.PostFormValue("confirmed") != "1" {
		v := url.Values{"op": {op}, "key": {key}, "back": {back}}
		if to != "" {
			v.Set("to", to)
		}
		a := actionView{Op: op, URL: "/action?" + v.Encode(), Back: back}
		a.Label, a.Class, a.Confirm = actionText(op, key, ids)
		for _, id := range ids {
			a.Fields = append(a.Fields, formField{"ids", url.QueryEscape(id)})
		}
		if delay != "" {
			a.Fields = append(a.Fields, formField{"delay", delay})
			a.Confirm += " Delay: " + delay + "."
		}
		d.render(w, r, http.StatusOK, "confirm", view{Title: "Confirm", Data: a})
		return
	}
	res := actionResult{Command: cmds[0][0], Back: back}
	var n int64
	var failed []string
	nFailed := 0
	for _, args := range cmds {
		reply, err := d.do(r.Context(), args...)
		if err != nil {
			nFailed++
			if len(failed) < 3 {
				failed = append(failed, err.Error())
			}
			continue
		}
		if x, ok := reply.(int64); ok {
			n += x
		} else if reply != nil {
			n++ // +OK
		}
	}
	if len(failed) > 0 {
		res.Error = strings.Join(failed, "; ")
		if len(cmds) > 1 {
			res.Error = fmt.Sprintf("%d of %d commands failed: %s", nFailed, len(cmds), res.Error)
		}
	} else {
		res.OK = true
		res.Message = describe(op, key, ids, n)
	}
	d.s.opts.Log.Info().Str("command", cmds[0][0]).Str("key", key).Int("jobs", len(ids)).Bool("ok", res.OK).
		Str("error", res.Error).Msg("dashboard action")
	// A command's error is the action's answer, not a failed request: the
	// page shows it.
	d.actionReply(w, r, wantsJSON, http.StatusOK, res)
}

func (d *dashboard) actionReply(w http.ResponseWriter, r *http.Request, wantsJSON bool, status int, res actionResult) {
	if wantsJSON {
		securityHeaders(w.Header())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(res)
		return
	}
	d.render(w, r, status, "result", view{Title: "Result", Data: res})
}

// bulkView is a selection's form (the bulk template).
type bulkView struct {
	ID, URL, Key string
	Ops          []string
}

// bulkForm is the form of a list's selection: its id (which checkboxes
// name), the queue, the page to return to, and the actions it offers.
func bulkForm(id, key, back string, ops ...string) bulkView {
	v := url.Values{"key": {key}, "back": {back}}
	return bulkView{ID: id, URL: "/action?" + v.Encode(), Key: key, Ops: ops}
}

func bulkConfirm(op, key string) string {
	_, _, c := actionText(op, key, nil)
	return c
}

func bulkLabel(op string) string {
	l, _, _ := actionText(op, "", nil)
	return l
}

// checkView is one row's checkbox, in the form of its list's selection.
type checkView struct{ ID, Form string }

func checkbox(id, form string) checkView { return checkView{ID: id, Form: form} }
