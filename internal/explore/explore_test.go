package explore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/itf"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/tracecheck"
)

func readGo(t *testing.T, path string) Trace {
	lines, err := tracecheck.ReadFile(path)
	require.NoError(t, err)
	_, err = tracecheck.Check(lines, tracecheck.WithFile(path))
	var v *tracecheck.Violation
	if err != nil {
		require.True(t, errors.As(err, &v), "%v", err)
	}
	return FromGo(path, lines, v)
}

// The explorer's states (the spec model followed line by line) agree
// with what the Go code wrote: after every write that carries the cursor,
// the state's taken is the line's; after a write that carries the lease,
// the state's lease holder is the line's; a RunStart's run is the newest,
// an Ask's request too. Checked on every fixture
// the checker accepts and on the shrunk story.
func TestFoldAgreesWithTheLines(t *testing.T) {
	files, err := filepath.Glob("../../tracecheck/testdata/ok-*.ndjson")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	files = append(files, "testdata/go-shrunk-I1.ndjson")
	for _, f := range files {
		lines, err := tracecheck.ReadFile(f)
		require.NoError(t, err)
		tr := readGo(t, f)
		for ti, th := range tracecheck.Order(lines) {
			steps := tr.Threads[ti].Steps
			byLine := map[int]Step{}
			for _, s := range steps {
				if s.Line > 0 {
					byLine[s.Line] = s
				}
			}
			holders := map[core.Holder]int64{"": 0}
			for _, l := range th.Lines {
				s := byLine[l.N]
				if s.State == nil {
					break // past the rejected line
				}
				ev := l.Ev
				if ev.Action == core.ActionClaim {
					holders[ev.Holder] = int64(len(holders))
				}
				if !ev.Read && ev.Action != core.ActionPost {
					require.Equal(t, int64(ev.Taken), s.State["taken"].Int, "%s:%d %s: taken", f, l.N, ev.Action)
				}
				info, _ := core.Info(ev.Action)
				if info.Carries.Has(core.FieldLease) && !ev.Read && info.WritesLease {
					h, _ := s.State["lease"].Field("holder")
					require.Equal(t, holders[ev.Lease], h.Int, "%s:%d %s: lease holder", f, l.N, ev.Action)
				}
				switch ev.Action {
				case core.ActionRunStart:
					require.Len(t, s.State["runs"].Elems, int(ev.Run), "%s:%d", f, l.N)
				case core.ActionAsk:
					require.Len(t, s.State["reqs"].Elems, int(ev.Req), "%s:%d", f, l.N)
				case core.ActionPost:
					require.Equal(t, int64(ev.Msg), s.State["msgs"].Int, "%s:%d", f, l.N)
				}
			}
		}
	}
}

// The shrunk I1 story folds to the state TLC reaches in its own
// counterexample, up to the holders' numbering: one message consumed
// twice... but the Go checker stops at the first RunStart under another's
// lease, so the fold's last state is the one before, with the second
// process planned on the message the first consumed.
func TestFoldStopsAtTheRejectedLine(t *testing.T) {
	tr := readGo(t, "testdata/go-shrunk-I1.ndjson")
	steps := tr.Threads[0].Steps
	last := steps[len(steps)-1]
	require.Equal(t, 7, last.Line)
	require.NotNil(t, last.Rejected)
	require.Equal(t, "guard", last.Rejected.Kind)
	require.Equal(t, "Fenced => HasLease(p)", last.Rejected.Rule)
	require.Nil(t, last.State, "no spec state after a rejected guard")
	prev := steps[len(steps)-2]
	require.Equal(t, "<<1>>", prev.State["consumed"].TLA())
	require.Equal(t, []string{"taken", "runs", "consumed", "given", "pc[p2]", "plan[p2]", "run[p2]"}, prev.Changed)
	var lapses int
	for _, s := range steps {
		if s.Inferred {
			lapses++
			require.Equal(t, []string{"lease"}, s.Changed)
		}
	}
	require.Equal(t, 1, lapses)
}

func TestReadTLC(t *testing.T) {
	for _, c := range []struct{ file, inv string }{
		{"testdata/tlc-unfenced-I1.json", core.InvConsumedAtMostOnce},
		{"testdata/tlc-abandon-NoLiveAbandon.json", core.InvNoLiveAbandon},
		// steering: a message given twice (the reachability cfg), and a
		// steered run whose record the cursor passed (RunStart unfenced)
		{"testdata/tlc-giventwice-GivenAtMostOnce.json", specmodel.InvGivenAtMostOnce},
		// (I1 and I3 break too, earlier: the cfg checks SteeringException alone)
		{"testdata/tlc-steerstart-SteeringException.json", core.InvSteeringException},
	} {
		f, err := os.Open(c.file)
		require.NoError(t, err)
		tr, err := ReadTLC(f, c.file)
		f.Close()
		require.NoError(t, err)
		steps := tr.Threads[0].Steps
		require.Equal(t, "Init", steps[0].Action)
		last := steps[len(steps)-1]
		require.NotNil(t, last.Rejected, c.file)
		require.Contains(t, last.Rejected.Failed, c.inv, c.file)
		for _, s := range steps[:len(steps)-1] {
			require.Nil(t, s.Rejected, "%s: state %d is not the violation", c.file, s.Line)
		}
		// steered, an array of arrays in TLC's JSON, is a set of pairs,
		// as the Go fold writes it
		require.Equal(t, itf.KindSet, last.State["steered"].Kind, c.file)
	}
	f, err := os.Open("testdata/tlc-giventwice-GivenAtMostOnce.json")
	require.NoError(t, err)
	tr, err := ReadTLC(f, "given twice")
	f.Close()
	require.NoError(t, err)
	steps := tr.Threads[0].Steps
	last := steps[len(steps)-1]
	require.Equal(t, "{<<1, 2>>}", last.State["steered"].TLA())
	require.Equal(t, "<<1, 2, 0>>", last.State["given"].TLA())
	require.Equal(t, []string{specmodel.InvGivenAtMostOnce}, last.Rejected.Failed, "SteeringException holds: given twice, consumed once")
	for _, bad := range []string{`{}`, `{"counterexample":{"state":[]}}`, `[1]`, `{"counterexample":{"state":[[1,{}]],"action":[]},"vars":["x"]}`} {
		_, err := ReadTLC(strings.NewReader(bad), "bad.json")
		require.ErrorIs(t, err, ErrTLC, bad)
	}
	require.False(t, IsTLC([]byte(`{"tick":1,"read":false,"action":"Post"}`)))
}

// Every action of the spec is found in the spec's text by its name, and
// the text is that action's definition.
func TestActionTexts(t *testing.T) {
	spec, err := os.ReadFile("../../" + SpecPath)
	require.NoError(t, err)
	texts := ActionTexts(string(spec))
	for _, a := range core.Actions() {
		text, ok := texts[string(a)]
		require.True(t, ok, "no definition of %s in the spec", a)
		require.Regexp(t, `(?m)^`+string(a)+`(\(.*\))? ==`, text)
		require.NotContains(t, strings.TrimSpace(text), "\n\n", "%s's text runs past its definition", a)
	}
	require.Regexp(t, `\w+ => HasLease\(p\)`, texts["RunStart"])
	_, err = FindSpec(t.TempDir())
	require.ErrorIs(t, err, ErrNoSpec)
	p, err := FindSpec(".")
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(p, SpecPath))
}

// The ITF of a Go trace and of a TLC counterexample passes the format's
// rules; the TLC one holds the counterexample's states, Init first.
func TestITFOfBothSources(t *testing.T) {
	tr := readGo(t, "testdata/go-shrunk-I1.ndjson")
	doc, err := tr.ITF(0).MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, itf.Validate(doc), string(doc))
	// Init, 6 lines and the inferred Lapse: not the rejected line.
	require.Len(t, tr.ITF(0).States, 8)

	f, err := os.Open("testdata/tlc-unfenced-I1.json")
	require.NoError(t, err)
	defer f.Close()
	tlc, err := ReadTLC(f, "tlc")
	require.NoError(t, err)
	doc, err = tlc.ITF(0).MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, itf.Validate(doc))
	require.Len(t, tlc.ITF(0).States, 9)
	require.Contains(t, string(doc), `"pc":{"#map":[["p1","idle"],["p2","idle"]]}`)
	require.Contains(t, string(doc), `"lease":{"holder":{"#bigint":"0"},"expired":false}`)
}

// Steering's ghosts export as the spec has them, from both sources: given
// a sequence, steered a set of <<run, msg>> tuples, the same values for
// the same behaviour (ADR-0069's exception: m2 given twice, consumed once,
// its steering pair kept with the abandoned run).
func TestITFOfSteering(t *testing.T) {
	tr := readGo(t, "../../tracecheck/testdata/ok-steer-exception.ndjson")
	doc, err := tr.ITF(0).MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, itf.Validate(doc), string(doc))
	states := tr.ITF(0).States
	last := states[len(states)-1].Values
	require.Equal(t, "{<<1, 2>>}", last["steered"].TLA())
	require.Equal(t, "<<1, 2>>", last["given"].TLA())
	require.Equal(t, "<<1, 1>>", last["consumed"].TLA())
	require.Contains(t, string(doc), `"steered":{"#set":[{"#tup":[{"#bigint":"1"},{"#bigint":"2"}]}]}`)

	f, err := os.Open("testdata/tlc-giventwice-GivenAtMostOnce.json")
	require.NoError(t, err)
	defer f.Close()
	tlc, err := ReadTLC(f, "tlc")
	require.NoError(t, err)
	doc, err = tlc.ITF(0).MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, itf.Validate(doc))
	require.Contains(t, string(doc), `"steered":{"#set":[{"#tup":[{"#bigint":"1"},{"#bigint":"2"}]}]}`)
}

// Every line the Go trace checker accepts has a spec state: the spec model
// takes every step the checker takes, on the fixtures and on seeded
// executions of the real code (interleaved, with storage faults).
func TestEveryAcceptedLineHasAState(t *testing.T) {
	var traces [][]core.TraceEvent
	files, err := filepath.Glob("../../tracecheck/testdata/ok-*.ndjson")
	require.NoError(t, err)
	for _, f := range files {
		lines, err := tracecheck.ReadFile(f)
		require.NoError(t, err)
		traces = append(traces, lines)
	}
	traces = append(traces, seededTraces(t, 20)...)
	for i, lines := range traces {
		_, err := tracecheck.Check(lines)
		require.NoError(t, err, "trace %d", i)
		for _, th := range FromGo("trace", lines, nil).Threads {
			for _, s := range th.Steps {
				require.NotNil(t, s.State, "trace %d thread %s: no spec state after line %d (%s)", i, th.Name, s.Line, s.Label())
			}
		}
	}
}

// The copy of the spec built into the binary is the spec: refresh it with
// the command the failure prints.
func TestEmbeddedSpecIsTheSpec(t *testing.T) {
	spec, err := os.ReadFile("../../" + SpecPath)
	require.NoError(t, err)
	require.True(t, embeddedSpec == string(spec),
		"%s differs from %s: refresh it with\n\tcp %s %s\n(from the repository's root) and rebuild", EmbeddedSpecPath, SpecPath, SpecPath, EmbeddedSpecPath)
}

// LoadSpec: a given path is read (an unreadable one is an error); else
// the repository's spec is found from a directory inside it; else the
// embedded copy, and it says so.
func TestLoadSpec(t *testing.T) {
	text, from, err := LoadSpec("", ".")
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(from, SpecPath), from)
	require.Contains(t, text, "RunStart(p) ==")

	text, from, err = LoadSpec("", t.TempDir())
	require.NoError(t, err)
	require.Contains(t, from, "built into this binary")
	require.Equal(t, embeddedSpec, text)
	require.NotEmpty(t, ActionTexts(text)["RunStart"])

	_, _, err = LoadSpec(filepath.Join(t.TempDir(), "nope.tla"), ".")
	require.Error(t, err)
}

// The constants a counterexample's states reveal: Procs, and each fence
// a step proves off (its action by a process without the lease); the
// others unknown.
func TestTLCConstants(t *testing.T) {
	for _, c := range []struct {
		file string
		want map[string]string
	}{
		{"testdata/tlc-unfenced-I1.json", map[string]string{"Procs": `{"p1", "p2"}`, "FenceStart": "FALSE", "FenceReply": "unknown", "FenceAbandon": "unknown"}},
		{"testdata/tlc-abandon-NoLiveAbandon.json", map[string]string{"Procs": `{"p1", "p2"}`, "FenceStart": "unknown", "FenceReply": "unknown", "FenceAbandon": "FALSE"}},
	} {
		f, err := os.Open(c.file)
		require.NoError(t, err)
		tr, err := ReadTLC(f, c.file)
		f.Close()
		require.NoError(t, err)
		got := map[string]string{}
		for _, k := range tr.Constants {
			got[k.Name] = k.Value
		}
		require.Equal(t, c.want, got, c.file)
		require.NotEmpty(t, tr.ConstantsFrom)
	}
}

// A cfg's constants replace those the states reveal; a fence the cfg
// turns on that a step proves off is marked.
func TestUseCfg(t *testing.T) {
	c, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseUnfenced.cfg")
	require.NoError(t, err)
	f, err := os.Open("testdata/tlc-abandon-NoLiveAbandon.json")
	require.NoError(t, err)
	defer f.Close()
	tr, err := ReadTLC(f, "abandon")
	require.NoError(t, err)
	UseCfg(&tr, "Unfenced.cfg", CfgConstants(c))
	require.Equal(t, "Unfenced.cfg", tr.ConstantsFrom)
	got := map[string]Constant{}
	for _, k := range tr.Constants {
		got[k.Name] = k
	}
	require.Equal(t, Constant{Name: "MaxMsgs", Value: "2"}, got["MaxMsgs"])
	require.Equal(t, Constant{Name: "FenceStart", Value: "FALSE"}, got["FenceStart"])
	require.Equal(t, "TRUE", got["FenceAbandon"].Value)
	require.Contains(t, got["FenceAbandon"].Why, "state 8: Abandon by p1 without the lease: not a counterexample of this cfg?")
	require.Equal(t, Constant{Name: "RefuseSteerAbandoned", Value: "TRUE"}, got["RefuseSteerAbandoned"])
	require.Equal(t, Constant{Name: "ClaimTakesLive", Value: "FALSE"}, got["ClaimTakesLive"])
	require.Len(t, tr.Constants, 10)
}

// Issue 26: the ITF export is checked without a browser. Every thread of
// the fixtures, of TLC's counterexamples and of seeded executions of the
// real code is exported, read back (itf.Read) and checked against the
// trace (CheckITF): for a Go trace against the spec model's states,
// field by field. A value written wrong is found.
func TestITFReadsBackAsTheTrace(t *testing.T) {
	var traces []Trace
	files, err := filepath.Glob("../../tracecheck/testdata/ok-*.ndjson")
	require.NoError(t, err)
	files = append(files, "testdata/go-shrunk-I1.ndjson")
	for _, f := range files {
		traces = append(traces, readGo(t, f))
	}
	tlcFiles, err := filepath.Glob("testdata/tlc-*.json")
	require.NoError(t, err)
	require.NotEmpty(t, tlcFiles)
	for _, f := range tlcFiles {
		r, err := os.Open(f)
		require.NoError(t, err)
		tr, err := ReadTLC(r, f)
		r.Close()
		require.NoError(t, err, f)
		traces = append(traces, tr)
	}
	for seed, lines := range seededTraces(t, 10) {
		traces = append(traces, FromGo(fmt.Sprintf("seed %d", seed), lines, nil))
	}
	states := 0
	for _, tr := range traces {
		for i := range tr.Threads {
			doc, err := tr.ITF(i).MarshalJSON()
			require.NoError(t, err)
			require.NoError(t, tr.CheckITF(i, doc), "%s thread %s", tr.File, tr.Threads[i].Name)
			states += len(tr.ITF(i).States)
		}
	}
	t.Logf("%d traces, %d states read back", len(traces), states)

	// A value written wrong: taken as msgs in one state of a Go trace, and
	// an integer changed in a TLC counterexample's.
	tr := readGo(t, "../../tracecheck/testdata/ok-steer-exception.ndjson")
	wrong := tr.ITF(0)
	last := wrong.States[len(wrong.States)-1].Values
	last["taken"] = itf.Int(last["taken"].Int + 1)
	doc, err := wrong.MarshalJSON()
	require.NoError(t, err)
	err = tr.CheckITF(0, doc)
	require.ErrorContains(t, err, "taken is")
	f, err := os.Open("testdata/tlc-unfenced-I1.json")
	require.NoError(t, err)
	defer f.Close()
	tlc, err := ReadTLC(f, "tlc")
	require.NoError(t, err)
	wrong = tlc.ITF(0)
	wrong.States[1].Values = maps.Clone(wrong.States[1].Values)
	wrong.States[1].Values["msgs"] = itf.Int(7)
	doc, err = wrong.MarshalJSON()
	require.NoError(t, err)
	require.ErrorContains(t, tlc.CheckITF(0, doc), "msgs is 7")
}

// seededTraces returns the traces of n seeded executions of the real code
// (interleaved, with storage faults), seeds 0 to n-1, in trace order.
func seededTraces(t *testing.T, n int) [][]core.TraceEvent {
	t.Helper()
	ctx := context.Background()
	var out [][]core.TraceEvent
	for seed := range uint64(n) {
		s, err := sim.NewSeeded(ctx, sim.Config{Seed: seed, Interleave: true, Faults: 0.05})
		require.NoError(t, err)
		require.NoError(t, s.Run(ctx))
		lines := s.TraceLines()
		tracecheck.Sort(lines)
		out = append(out, lines)
	}
	return out
}
