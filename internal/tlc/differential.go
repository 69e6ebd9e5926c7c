package tlc

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Mutator changes a valid trace into one that may or may not be a
// behaviour of the spec, keeping it well-formed, and says what it did.
type Mutator func(rng *rand.Rand, lines []core.TraceEvent) ([]core.TraceEvent, string)

// DiffCase is one trace the differential puts through both checkers.
type DiffCase struct {
	From  string // the trace it was made from
	Desc  string // what the mutator changed
	Lines []core.TraceEvent
}

// DiffResult is both checkers' verdicts on one case: the file line of
// the first line each rejects, 0 when it accepts the trace.
type DiffResult struct {
	Case    DiffCase
	Go, TLC int
	GoErr   string // the Go checker's reason, for the report
}

// Agree reports whether both checkers gave the same verdict at the same
// line.
func (r DiffResult) Agree() bool { return r.Go == r.TLC }

// MakeCases draws n mutants of the given traces (named by names) with
// mutate and rng, timing and all: the trace spec checks the lines' timing
// rules as the Go checker does (tla/README.md), so a mutated clock must
// get the same verdict from both.
func MakeCases(rng *rand.Rand, mutate Mutator, names []string, traces [][]core.TraceEvent, n int) []DiffCase {
	out := make([]DiffCase, 0, n)
	for len(out) < n && len(traces) > 0 {
		i := rng.IntN(len(traces))
		m, desc := mutate(rng, traces[i])
		if len(m) == 0 {
			continue
		}
		out = append(out, DiffCase{From: names[i], Desc: desc, Lines: m})
	}
	return out
}

// GoVerdict is the Go trace checker's verdict on a trace (checked with
// opts, as tracecheck.Check would be): the file line it rejects, 0 if it
// accepts; and its reason.
func GoVerdict(lines []core.TraceEvent, opts ...tracecheck.Option) (int, string) {
	_, err := tracecheck.Check(lines, opts...)
	var v *tracecheck.Violation
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &v):
		return v.Line, v.Error()
	}
	return -1, err.Error()
}

// Differential puts every case through the Go checker and, in one batch
// run, through TLC, both held to the batch's fences, and returns both
// verdicts for each.
func (e Env) Differential(ctx context.Context, b Batch, cases []DiffCase) ([]DiffResult, error) {
	opts := goSpec(b.Unfenced)
	out := make([]DiffResult, len(cases))
	var threads []Thread
	var owner []int
	for i, c := range cases {
		out[i].Case = c
		out[i].Go, out[i].GoErr = GoVerdict(c.Lines, opts...)
		for _, th := range SplitThreads(c.Lines) {
			threads = append(threads, th)
			owner = append(owner, i)
		}
	}
	at, err := e.ValidateThreads(ctx, b, threads)
	if err != nil {
		return nil, err
	}
	for k, a := range at {
		r := &out[owner[k]]
		if a > 0 && (r.TLC == 0 || a < r.TLC) {
			r.TLC = a
		}
	}
	return out, nil
}

// goSpec is the Go checker's option for the fences a batch holds its
// traces to: every fence but the batch's Unfenced.
func goSpec(unfenced core.Fences) []tracecheck.Option {
	return []tracecheck.Option{tracecheck.WithFences(core.AllFences().Without(unfenced))}
}
