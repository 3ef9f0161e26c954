package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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

type actionView struct {
	Op, Label, Confirm, Class string
	URL, Back                 string
}

// act builds a button for a template: op is cancel, requeue, requeue-all,
// pause or resume; back is the page to return to.
func (d *dashboard) act(op, key, id, back string) actionView {
	v := url.Values{"op": {op}, "key": {key}}
	if id != "" {
		v.Set("id", id)
	}
	v.Set("back", back)
	a := actionView{Op: op, URL: "/action?" + v.Encode(), Back: back}
	q, j := showName(key), showName(id)
	switch op {
	case "cancel":
		a.Label, a.Class = "Cancel", "danger"
		a.Confirm = fmt.Sprintf("Cancel job %s of queue %s? It is removed whatever its state.", j, q)
	case "requeue":
		a.Label = "Requeue"
		a.Confirm = fmt.Sprintf("Requeue dead-lettered job %s of %s to its origin queue?", j, q)
	case "requeue-all":
		a.Label = "Requeue all"
		a.Confirm = fmt.Sprintf("Requeue every dead-lettered job of %s to its origin queue?", q)
	case "pause":
		a.Label, a.Class = "Pause", "warn"
		a.Confirm = fmt.Sprintf("Pause queue %s? Its jobs stay and keep their timing, but none is handed out until it is resumed.", q)
	case "resume":
		a.Label = "Resume"
		a.Confirm = fmt.Sprintf("Resume queue %s? Its ready jobs are handed out again.", q)
	case "unschedule":
		a.Label, a.Class = "Unschedule", "danger"
		a.Confirm = fmt.Sprintf("Remove recurring schedule %s of queue %s? It fires no more; the jobs it already added stay.", j, q)
	}
	return a
}

// command is the command an action runs.
func actionCommand(op, key, id, to string) ([]string, error) {
	if key == "" {
		return nil, fmt.Errorf("no queue given")
	}
	switch op {
	case "cancel":
		if id == "" {
			return nil, fmt.Errorf("no job id given")
		}
		return []string{"DELAY.CANCEL", key, id}, nil
	case "requeue", "requeue-all":
		which := id
		if op == "requeue-all" {
			which = "ALL"
		} else if id == "" {
			return nil, fmt.Errorf("no job id given")
		}
		args := []string{"DELAY.REQUEUE", key, which}
		if to != "" {
			args = append(args, to)
		}
		return args, nil
	case "pause":
		return []string{"DELAY.PAUSE", key}, nil
	case "resume":
		return []string{"DELAY.RESUME", key}, nil
	case "unschedule":
		if id == "" {
			return nil, fmt.Errorf("no schedule name given")
		}
		return []string{"DELAY.UNSCHEDULE", key, id}, nil
	}
	return nil, fmt.Errorf("unknown action %q", op)
}

// describe says what a command's reply means, for a person.
func describe(op, key, id string, reply any) string {
	q, j := showName(key), showName(id)
	n, isInt := reply.(int64)
	switch op {
	case "cancel":
		if isInt && n == 0 {
			return fmt.Sprintf("No job %s in queue %s: nothing cancelled.", j, q)
		}
		return fmt.Sprintf("Cancelled job %s of queue %s.", j, q)
	case "requeue":
		if isInt && n == 0 {
			return fmt.Sprintf("Job %s of %s was not requeued (not dead-lettered, or gone).", j, q)
		}
		return fmt.Sprintf("Requeued job %s of %s.", j, q)
	case "requeue-all":
		if isInt {
			return fmt.Sprintf("Requeued %d job(s) of %s.", n, q)
		}
		return fmt.Sprintf("Requeued the dead-lettered jobs of %s.", q)
	case "pause":
		if isInt && n == 0 {
			return fmt.Sprintf("Queue %s was already paused.", q)
		}
		return fmt.Sprintf("Paused queue %s.", q)
	case "resume":
		if isInt && n == 0 {
			return fmt.Sprintf("Queue %s was not paused.", q)
		}
		return fmt.Sprintf("Resumed queue %s.", q)
	case "unschedule":
		if isInt && n == 0 {
			return fmt.Sprintf("No schedule %s on queue %s: nothing removed.", j, q)
		}
		return fmt.Sprintf("Removed schedule %s of queue %s.", j, q)
	}
	return fmt.Sprint(reply)
}

type actionResult struct {
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
	Command string `json:"command,omitempty"`
	Back    string `json:"-"`
}

func (d *dashboard) action(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	op, key, id, to := qv.Get("op"), qv.Get("key"), qv.Get("id"), qv.Get("to")
	back := qv.Get("back")
	// Only a path on this server: never an open redirect.
	if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.HasPrefix(back, `/\`) {
		back = "/"
	}
	wantsJSON := r.Header.Get(actionHeader) != ""
	args, err := actionCommand(op, key, id, to)
	if err != nil {
		d.actionReply(w, r, wantsJSON, http.StatusBadRequest, actionResult{Error: err.Error(), Back: back})
		return
	}
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
	if r.PostFormValue("confirmed") != "1" {
		a := d.act(op, key, id, back)
		d.render(w, r, http.StatusOK, "confirm", view{Title: "Confirm", Data: a})
		return
	}
	res := actionResult{Command: strings.Join(args[:1], " "), Back: back}
	reply, err := d.do(r.Context(), args...)
	if err != nil {
		res.Error = err.Error()
	} else {
		res.OK = true
		res.Message = describe(op, key, id, reply)
	}
	d.s.opts.Log.Info().Str("command", args[0]).Str("key", key).Str("id", id).Bool("ok", res.OK).
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
