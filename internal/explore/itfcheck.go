package explore

import (
	"fmt"
	"strings"

	"github.com/threadclaim/threadclaim/internal/itf"
	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// CheckITF reads doc, the ITF of one of t's threads (thread, as ITF
// writes it), back and checks it against the trace: the states are the
// thread's, in order, and each one read back is the state its step left.
// For a Go trace the check is against the spec model's state, variable by
// variable from the spec's own fields, not from the values the file was
// written from; for a TLC counterexample, against TLC's values. It returns
// the first difference.
func (t Trace) CheckITF(thread int, doc []byte) error {
	back, err := itf.Read(doc)
	if err != nil {
		return err
	}
	th := t.Threads[thread]
	n := 0
	for n < len(th.Steps) && th.Steps[n].State != nil {
		n++
	}
	if len(back.States) != n {
		return fmt.Errorf("itf: %d states read back, the trace has %d", len(back.States), n)
	}
	for i, st := range back.States {
		step := th.Steps[i]
		if s := step.spec; s != nil {
			if err := sameState(th.procs, st.Values, s); err != nil {
				return fmt.Errorf("itf: state %d (%s): %w", i, step.Label(), err)
			}
			continue
		}
		for _, name := range Vars {
			if v, ok := st.Values[name]; !ok || !itf.Equal(v, step.State[name]) {
				return fmt.Errorf("itf: state %d (%s): %s is %s, the trace's is %s", i, step.Label(), name, v.TLA(), step.State[name].TLA())
			}
		}
	}
	return nil
}

// sameState compares a state read back from ITF with the spec model's
// state s, variable by variable; procs are the model's processes in its
// order.
func sameState(procs []string, vals map[string]itf.Value, s *specmodel.State) error {
	var diffs []string
	want := func(name, got, want string) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s is %s, the spec's is %s", name, got, want))
		}
	}
	field := func(v itf.Value, name string) itf.Value {
		f, _ := v.Field(name)
		return f
	}
	num := func(v itf.Value) string {
		if v.Kind != itf.KindInt {
			return v.TLA()
		}
		return fmt.Sprint(v.Int)
	}
	str := func(v itf.Value) string {
		if v.Kind != itf.KindStr {
			return v.TLA()
		}
		return v.Str
	}
	want("msgs", num(vals["msgs"]), fmt.Sprint(s.Msgs))
	want("taken", num(vals["taken"]), fmt.Sprint(s.Taken))
	want("nextHolder", num(vals["nextHolder"]), fmt.Sprint(s.NextHolder))
	want("lease.holder", num(field(vals["lease"], "holder")), fmt.Sprint(s.Lease.Holder))
	want("lease.expired", field(vals["lease"], "expired").TLA(), itf.Bool(s.Lease.Expired).TLA())
	want("liveAbandoned", vals["liveAbandoned"].TLA(), itf.Bool(s.LiveAbandoned).TLA())
	var got, exp []string
	for _, r := range vals["runs"].Elems {
		got = append(got, fmt.Sprintf("%s/%s/%s", num(field(r, "holder")), num(field(r, "prompt")), str(field(r, "state"))))
	}
	for _, r := range s.Runs {
		exp = append(exp, fmt.Sprintf("%d/%d/%s", r.Holder, r.Prompt, r.State))
	}
	want("runs", strings.Join(got, " "), strings.Join(exp, " "))
	got, exp = nil, nil
	for _, q := range vals["reqs"].Elems {
		got = append(got, fmt.Sprintf("%s/%s/%s", num(field(q, "run")), str(field(q, "state")), num(field(q, "answer"))))
	}
	for _, q := range s.Reqs {
		exp = append(exp, fmt.Sprintf("%d/%s/%d", q.Run, q.State, q.Answer))
	}
	want("reqs", strings.Join(got, " "), strings.Join(exp, " "))
	for _, c := range []struct {
		name string
		want []uint8
	}{{"consumed", s.Consumed}, {"given", s.Given}} {
		got = nil
		for _, v := range vals[c.name].Elems {
			got = append(got, num(v))
		}
		want(c.name, strings.Join(got, " "), strings.Trim(fmt.Sprint(c.want), "[]"))
	}
	pairs := map[string]bool{}
	for _, p := range vals["steered"].Elems {
		if len(p.Elems) == 2 {
			pairs[num(p.Elems[0])+"/"+num(p.Elems[1])] = true
		}
	}
	match := len(pairs) == len(s.Steered) && vals["steered"].Kind == itf.KindSet
	for _, p := range s.Steered {
		match = match && pairs[fmt.Sprintf("%d/%d", p.Run, p.Msg)]
	}
	if !match {
		diffs = append(diffs, fmt.Sprintf("steered is %s, the spec's is %v", vals["steered"].TLA(), s.Steered))
	}
	for j, p := range procs {
		pr := s.Procs[j]
		want("pc["+p+"]", str(field(vals["pc"], p)), pr.PC.String())
		want("hold["+p+"]", num(field(vals["hold"], p)), fmt.Sprint(pr.Hold))
		want("run["+p+"]", num(field(vals["run"], p)), fmt.Sprint(pr.Run))
		pl := field(vals["plan"], p)
		want("plan["+p+"]", fmt.Sprintf("%s/%s/%s", str(field(pl, "kind")), num(field(pl, "msg")), num(field(pl, "req"))),
			fmt.Sprintf("%s/%d/%d", pr.Plan.Kind, pr.Plan.Msg, pr.Plan.Req))
	}
	for _, name := range []string{"pc", "hold", "run", "plan"} {
		if n := len(vals[name].Elems); n != len(procs) {
			diffs = append(diffs, fmt.Sprintf("%s has %d processes, the spec's %d", name, n, len(procs)))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s", strings.Join(diffs, "; "))
	}
	return nil
}
