package main

import (
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const showUsage = `usage: tracecheck show [flags] FILE

Prints a trace as a timeline for spec reviewers: one row per line in trace
order, one lane per process; holders are numbered h1, h2, ... in the order
they claim; a Claim that takes a lease another holder had is marked as an
inferred lapse; refusals are marked ✗. The first line the Go trace checker
rejects, if any, is marked with the guard or invariant that failed. With
-html it also writes a self-contained HTML page of the same timeline.

Flags:
`

func cmdShow(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	htmlOut := fs.String("html", "", "also write the timeline as a self-contained HTML page to this file")
	only := fs.String("thread", "", "show only this thread")
	width := fs.Int("width", 28, "characters per lane")
	if err := parse(fs, args, stdout, stderr, showUsage); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"want exactly one trace file"}
	}
	path := fs.Arg(0)
	if _, err := os.Stat(path); err != nil {
		return usageError{err.Error()}
	}
	lines, err := tracecheck.ReadFile(path)
	if err != nil {
		return failure{exitUsage, err.Error()} // bad input
	}
	_, checkErr := tracecheck.Check(lines, tracecheck.WithFile(path))
	var v *tracecheck.Violation
	if checkErr != nil && !errors.As(checkErr, &v) {
		return checkErr
	}
	var views []threadView
	for _, th := range tracecheck.Order(lines) {
		if *only != "" && string(th.Thread) != *only {
			continue
		}
		views = append(views, buildView(th, v))
	}
	if len(views) == 0 {
		return usageError{fmt.Sprintf("no thread %q in %s", *only, path)}
	}
	for _, tv := range views {
		tv.text(stdout, *width)
	}
	if v != nil {
		fmt.Fprintf(stdout, "\nREJECTED: %v\n", v)
	}
	if *htmlOut != "" {
		f, err := os.Create(*htmlOut)
		if err != nil {
			return usageError{err.Error()}
		}
		writeHTML(f, path, views, v)
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", *htmlOut)
	}
	if v != nil {
		return failure{exitFailed, fmt.Sprintf("%s: rejected at line %d", path, v.Line)}
	}
	return nil
}

// cell is one action in one lane.
type cell struct {
	n     int // line number
	tick  uint64
	lane  int
	text  string
	class string // consume, refuse, lapse, plain
	bad   string // the violation's rule, on the rejected line
}

type threadView struct {
	thread  core.ThreadID
	lanes   []string
	holders []string // "h1 = <holder> (proc)"
	cells   []cell
}

func buildView(th tracecheck.ThreadLines, v *tracecheck.Violation) threadView {
	tv := threadView{thread: th.Thread}
	lane := map[string]int{}
	holder := map[core.Holder]string{}
	name := func(h core.Holder) string {
		if h == "" {
			return "none"
		}
		if n, ok := holder[h]; ok {
			return n
		}
		return "?" + string(h)
	}
	var lease core.Holder
	for _, l := range th.Lines {
		ev := l.Ev
		if _, ok := lane[ev.Proc]; !ok {
			lane[ev.Proc] = len(tv.lanes)
			tv.lanes = append(tv.lanes, ev.Proc)
		}
		c := cell{n: l.N, tick: ev.Tick, lane: lane[ev.Proc], class: "plain"}
		info, _ := core.Info(ev.Action)
		switch {
		case ev.Action == core.ActionClaim:
			h := fmt.Sprintf("h%d", len(holder)+1)
			holder[ev.Holder] = h
			tv.holders = append(tv.holders, fmt.Sprintf("%s = %s (%s)", h, ev.Holder, ev.Proc))
			c.text = "Claim " + h
			if lease != "" {
				c.text = fmt.Sprintf("Claim %s ⚡ %s lapsed", h, name(lease))
				c.class = "lapse"
			}
		default:
			c.text = cellText(*ev, info, name)
			switch {
			case info.Consumes:
				c.class = "consume"
			case info.Refuses != "" || ev.Action == core.ActionCrash:
				c.class = "refuse"
			}
		}
		if info.WritesLease && info.Line != core.LineNone && !ev.Read || info.Fenced && !ev.Read {
			lease = ev.Lease
		}
		if v != nil && v.Event.Thread == th.Thread && v.Line == l.N {
			c.bad = v.Rule
		}
		tv.cells = append(tv.cells, c)
	}
	return tv
}

// cellText describes a line by the values its action carries (the action
// table's Carries): the run, the request, the message, Plan's kind, and for
// a refusal what refused it.
func cellText(ev core.TraceEvent, info core.ActionInfo, name func(core.Holder) string) string {
	parts := []string{string(ev.Action)}
	if info.Carries.Has(core.FieldKind) {
		parts = append(parts, ev.Kind)
	}
	if info.Carries.Has(core.FieldRun) && (ev.Run != 0 || info.Consumes) {
		parts = append(parts, fmt.Sprintf("r%d", ev.Run))
	}
	if info.Carries.Has(core.FieldReq) && ev.Req != 0 {
		parts = append(parts, fmt.Sprintf("q%d", ev.Req))
	}
	if info.Carries.Has(core.FieldMsg) && ev.Msg != 0 {
		if info.Consumes || ev.Action == core.ActionPlan && ev.Kind == core.PlanKindReply {
			parts = append(parts, "←")
		}
		parts = append(parts, fmt.Sprintf("m%d", ev.Msg))
	}
	if info.Carries&(core.FieldRun|core.FieldMsg|core.FieldReq) == 0 && info.Carries.Has(core.FieldHolder) {
		parts = append(parts, name(ev.Holder))
	}
	switch {
	case info.Refuses != "" && info.Carries.Has(core.FieldLease):
		parts = append(parts, "✗ lease "+name(ev.Lease))
	case info.Refuses != "":
		parts = append(parts, "✗ abandoned")
	case info.Line == core.LineWriteOrRead && ev.Read:
		parts = append(parts, fmt.Sprintf("(lease is %s's)", name(ev.Lease)))
	}
	return strings.Join(parts, " ")
}

func (tv threadView) text(w io.Writer, width int) {
	fmt.Fprintf(w, "thread %s: %d lines, processes %s\n", tv.thread, len(tv.cells), strings.Join(tv.lanes, " "))
	for _, h := range tv.holders {
		fmt.Fprintf(w, "  %s\n", h)
	}
	pad := func(s string) string {
		r := []rune(s)
		if len(r) > width {
			return string(r[:width-1]) + "…"
		}
		return s + strings.Repeat(" ", width-len(r))
	}
	fmt.Fprintf(w, "%6s %5s", "line", "tick")
	for _, l := range tv.lanes {
		fmt.Fprintf(w, " │ %s", pad(l))
	}
	fmt.Fprintln(w)
	for _, c := range tv.cells {
		fmt.Fprintf(w, "%6d %5d", c.n, c.tick)
		for i := range tv.lanes {
			s := ""
			if i == c.lane {
				s = c.text
			}
			fmt.Fprintf(w, " │ %s", pad(s))
		}
		if c.bad != "" {
			fmt.Fprintf(w, "  ✗ REJECTED: %s", c.bad)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

func writeHTML(w io.Writer, path string, views []threadView, v *tracecheck.Violation) {
	e := html.EscapeString
	fmt.Fprintf(w, `<!doctype html><html><head><meta charset="utf-8"><title>trace %s</title><style>
body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ccc;padding:2px 8px;white-space:nowrap}th{background:#eee;position:sticky;top:0}
td.num{color:#888;text-align:right}.consume{background:#dff3df}.refuse{background:#f8dcdc}.lapse{background:#fde9c8}
tr.bad td{outline:2px solid #c00}.note{color:#c00;font-weight:bold}pre{background:#f6f6f6;padding:1em;white-space:pre-wrap}
</style></head><body><h1>trace %s</h1>
<p>Rows are trace lines in trace order (tick, then writes before reads); lanes are processes.
<span class="consume">green</span>: a write that consumes a message; <span class="refuse">red</span>: a refusal or crash;
<span class="lapse">orange</span>: a Claim after an inferred Lapse.</p>
`, e(path), e(path))
	for _, tv := range views {
		fmt.Fprintf(w, "<h2>thread %s</h2><ul>", e(string(tv.thread)))
		for _, h := range tv.holders {
			fmt.Fprintf(w, "<li><code>%s</code></li>", e(h))
		}
		fmt.Fprint(w, "</ul><table><tr><th>line</th><th>tick</th>")
		for _, l := range tv.lanes {
			fmt.Fprintf(w, "<th>%s</th>", e(l))
		}
		fmt.Fprint(w, "<th></th></tr>\n")
		for _, c := range tv.cells {
			cls := ""
			if c.bad != "" {
				cls = ` class="bad"`
			}
			fmt.Fprintf(w, `<tr%s><td class="num">%d</td><td class="num">%d</td>`, cls, c.n, c.tick)
			for i := range tv.lanes {
				if i == c.lane {
					fmt.Fprintf(w, `<td class="%s">%s</td>`, c.class, e(c.text))
				} else {
					fmt.Fprint(w, "<td></td>")
				}
			}
			note := ""
			if c.bad != "" {
				note = "✗ rejected: " + c.bad
			}
			fmt.Fprintf(w, `<td class="note">%s</td></tr>`+"\n", e(note))
		}
		fmt.Fprint(w, "</table>")
	}
	if v != nil {
		fmt.Fprintf(w, "<h2>rejected</h2><pre>%s</pre>", e(v.Error()))
	}
	fmt.Fprint(w, "</body></html>\n")
}
