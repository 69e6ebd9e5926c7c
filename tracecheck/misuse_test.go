package tracecheck_test

import (
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// The twenty-first pass's misuse of the API: each of these panicked with
// a nil pointer dereference, a nil map or a division, or took bad input
// silently.

func misuseTrace(t *testing.T, path string) []core.TraceEvent {
	t.Helper()
	lines, err := tracecheck.ReadFile(path)
	require.NoError(t, err)
	return lines
}

// A nil Option is ignored, and the zero Checker is NewChecker(): the same
// verdicts (the fenced spec), not a nil map's panic.
func TestMisuseNilOptionAndZeroChecker(t *testing.T) {
	for _, path := range []string{"testdata/ok-run-ask-reply.ndjson", "testdata/bad-start-under-other-lease.ndjson"} {
		lines := misuseTrace(t, path)
		_, want := tracecheck.Check(lines)
		_, got := tracecheck.Check(lines, nil)
		require.Equal(t, want == nil, got == nil, path)
		var c tracecheck.Checker
		for i := range lines {
			if c.Step(i+1, &lines[i]) != nil {
				break
			}
		}
		if want == nil {
			require.NoError(t, c.Err(), path)
			continue
		}
		var wv, gv *tracecheck.Violation
		require.ErrorAs(t, want, &wv)
		require.ErrorAs(t, c.Err(), &gv, path)
		require.Equal(t, [3]any{wv.Line, wv.Rule, "trace"}, [3]any{gv.Line, gv.Rule, gv.File}, path)
	}
}

// A nil io.Reader, and the zero Reader, are an error of the source at
// line 1, not ErrMalformed.
func TestMisuseNilReader(t *testing.T) {
	var zero tracecheck.Reader
	_, errZero := zero.Next()
	_, errRead := tracecheck.Read(nil, "r")
	_, errCheck := tracecheck.CheckReader(nil, "c")
	_, errHist := tracecheck.ReadHistory(nil, "h")
	for _, err := range []error{errZero, errRead, errCheck, errHist} {
		var le *tracecheck.LineError
		require.ErrorAs(t, err, &le)
		require.Equal(t, 1, le.Line)
		require.NotErrorIs(t, err, tracecheck.ErrMalformed)
		require.Contains(t, err.Error(), "nil io.Reader")
	}
}

// A nil io.Writer, and the zero Writer, keep an error for Err (a Tracer
// is called inside core's transactions: a panic there is the runner's);
// WriteLines and Recorder.WriteTo return it.
func TestMisuseNilWriter(t *testing.T) {
	lines := misuseTrace(t, "testdata/ok-run-ask-reply.ndjson")
	var zero tracecheck.Writer
	w := tracecheck.NewWriter(nil)
	hw := tracecheck.NewHistoryWriter(nil)
	for _, ev := range lines {
		zero.Trace(ev)
		w.Trace(ev)
		hw.Trace(ev)
	}
	var rec tracecheck.Recorder
	rec.Trace(lines[0])
	_, errTo := rec.WriteTo(nil)
	for _, err := range []error{zero.Err(), w.Err(), hw.Err(), tracecheck.WriteLines(nil, lines), errTo} {
		require.ErrorContains(t, err, "nil io.Writer")
	}
}

// Mutate and History say what is missing when given no rng or no clock.
func TestMisuseNilRandAndClock(t *testing.T) {
	lines := misuseTrace(t, "testdata/ok-run-ask-reply.ndjson")
	require.PanicsWithValue(t, "tracecheck: Mutate needs a *rand.Rand, not nil", func() { tracecheck.Mutate(nil, lines) })
	require.PanicsWithValue(t, "tracecheck: Mutate needs a *rand.Rand, not nil", func() { tracecheck.MutateKind(nil, lines, tracecheck.MutTick) })
	msg := "tracecheck: History has no clock: make it with NewHistory and a non-nil now"
	require.PanicsWithValue(t, msg, func() { tracecheck.NewHistory(nil).Begin(0, tracecheck.LinInput{}) })
	require.PanicsWithValue(t, msg, func() { new(tracecheck.History).Begin(0, tracecheck.LinInput{}) })
}

// Operations that are not the model's are an error naming the first, with
// Unknown (never Ok): an operation returning before its call had porcupine
// judge an impossible history, and a foreign Input panicked in the model.
func TestMisuseLinearizableOperations(t *testing.T) {
	claim := func(holder core.Holder, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: tracecheck.LinInput{Kind: tracecheck.LinClaim, Thread: "t", Holder: holder, TTL: time.Second},
			Output: tracecheck.LinOutput{}, Call: call, Return: ret}
	}
	for name, tc := range map[string]struct {
		ops  []porcupine.Operation
		want string
	}{
		"return before call": {[]porcupine.Operation{claim("a", 1, 2), claim("b", 9, 3)}, "operation 1 (Claim) returns at 3, before its call at 9"},
		"nil input":          {[]porcupine.Operation{claim("a", 1, 2), {Call: 3, Return: 4}}, "operation 1: input <nil> and output <nil>"},
		"foreign output":     {[]porcupine.Operation{{Input: tracecheck.LinInput{}, Output: "ok", Call: 1, Return: 2}}, "output string"},
	} {
		res, err := tracecheck.CheckLinearizable(tc.ops, time.Second, t.TempDir()+"/lin.html")
		require.Equal(t, porcupine.Unknown, res, name)
		require.ErrorContains(t, err, tc.want, name)
		require.False(t, errors.Is(err, tracecheck.ErrNotLinearizable) || errors.Is(err, tracecheck.ErrLinearizabilityUnknown), name)
	}
	// Well-formed ones still pass, an empty history included, and a
	// negative timeout is none.
	for _, ops := range [][]porcupine.Operation{nil, {claim("a", 1, 2)}} {
		res, err := tracecheck.CheckLinearizable(ops, -time.Second, "")
		require.NoError(t, err)
		require.Equal(t, porcupine.Ok, res)
	}
}
