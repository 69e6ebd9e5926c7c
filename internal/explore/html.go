package explore

import (
	_ "embed"
	"encoding/json"
	"html"
	"io"
	"strings"

	"github.com/threadclaim/threadclaim/internal/itf"
)

//go:embed page.html
var page string

// pageData is what the page's script reads: every step with its state as
// TLA+ text, and the actions' TLA+ text.
type pageData struct {
	Title     string            `json:"title"`
	Source    string            `json:"source"`
	File      string            `json:"file"`
	Verdict   string            `json:"verdict"`
	Rejected  bool              `json:"rejected"`
	Porcupine string            `json:"porcupine,omitempty"`
	Vars      []string          `json:"vars"`
	ProcVars  []string          `json:"procVars"`
	Actions   map[string]string `json:"actions"`
	SpecFrom  string            `json:"specFrom"`
	Constants []Constant        `json:"constants,omitempty"`
	ConstFrom string            `json:"constantsFrom,omitempty"`
	Threads   []pageThread      `json:"threads"`
	Paged     string            `json:"paged,omitempty"`
}

type pageThread struct {
	Name    string     `json:"name"`
	Lanes   []string   `json:"lanes"`
	Holders []string   `json:"holders,omitempty"`
	Steps   []pageStep `json:"steps"`
}

type pageStep struct {
	Line     int        `json:"line,omitempty"`
	Tick     uint64     `json:"tick,omitempty"`
	Action   string     `json:"action"`
	Label    string     `json:"label"`
	Lane     int        `json:"lane"`
	Text     string     `json:"text"`
	Class    string     `json:"class"`
	Inferred bool       `json:"inferred,omitempty"`
	State    *pageState `json:"state"`
	Changed  []string   `json:"changed,omitempty"`
	Rejected *Rejection `json:"rejected,omitempty"`
}

type pageState struct {
	Store map[string]string            `json:"store"`
	Procs map[string]map[string]string `json:"procs"`
}

// Rejection's JSON names, for the page.
func (r *Rejection) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind   string   `json:"kind"`
		Rule   string   `json:"rule"`
		Failed []string `json:"failed,omitempty"`
		Detail string   `json:"detail,omitempty"`
		State  string   `json:"state,omitempty"`
	}{r.Kind, r.Rule, r.Failed, r.Detail, r.State})
}

func stateText(st map[string]itf.Value) *pageState {
	if st == nil {
		return nil
	}
	ps := &pageState{Store: map[string]string{}, Procs: map[string]map[string]string{}}
	for _, v := range Vars {
		val := st[v]
		if !isProcVar(v) {
			ps.Store[v] = val.TLA()
			continue
		}
		for i, k := range val.Keys {
			if ps.Procs[k.Str] == nil {
				ps.Procs[k.Str] = map[string]string{}
			}
			ps.Procs[k.Str][v] = val.Elems[i].TLA()
		}
	}
	return ps
}

// WriteHTML writes the trace as a self-contained page (no network): the
// timeline with a lane per process, and for the line selected (a click,
// the arrow keys, or the URL's #line=N) the spec's state after it with
// the variables it changed highlighted, the action's TLA+ text (actions,
// from ActionTexts; may be nil) and, on a rejected line, the failing guard
// marked in it. The header says where the TLA+ text came from (t.SpecFrom)
// or, when actions is empty, that the page has none; and a TLC
// counterexample's constants (t.Constants).
func WriteHTML(w io.Writer, t Trace, actions map[string]string) error {
	d := pageData{Title: t.Title, Source: t.Source, File: t.File, Verdict: t.Verdict, Porcupine: t.Porcupine,
		Vars: Vars, ProcVars: ProcVars, Actions: actions, SpecFrom: t.SpecFrom, Constants: t.Constants, ConstFrom: t.ConstantsFrom,
		Paged: t.Paged, Rejected: strings.HasPrefix(t.Verdict, "rejected")}
	if d.Actions == nil {
		d.Actions = map[string]string{}
	}
	for _, th := range t.Threads {
		pt := pageThread{Name: th.Name, Lanes: th.Lanes, Holders: th.Holders}
		for _, s := range th.Steps {
			d.Rejected = d.Rejected || s.Rejected != nil
			pt.Steps = append(pt.Steps, pageStep{Line: s.Line, Tick: s.Tick, Action: s.Action, Label: s.Label(), Lane: s.Lane,
				Text: s.Text, Class: s.Class, Inferred: s.Inferred, State: stateText(s.State), Changed: s.Changed, Rejected: s.Rejected})
		}
		d.Threads = append(d.Threads, pt)
	}
	data, err := json.Marshal(d) // escapes <, > and &: safe inside <script>
	if err != nil {
		return err
	}
	out := strings.NewReplacer("{{TITLE}}", html.EscapeString("trace explorer: "+t.Title), "{{DATA}}", string(data)).Replace(page)
	_, err = io.WriteString(w, out)
	return err
}
