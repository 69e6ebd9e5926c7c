package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/conform"
	"github.com/threadclaim/threadclaim/internal/fleet"
	"github.com/threadclaim/threadclaim/internal/report"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/store/postgres"
)

const conformUsage = `usage: tracecheck conform [flags]

Model-based testing: drives the real code (core.Workspace over a storage,
one simulated clock per process) along the edges of the cfg's state graph,
as the Go model of the spec enumerates it, and checks that (a) every action
the spec enables is taken by Go as the spec says (succeeds, or is refused
as StartFenced, ReplyFenced, AbandonFenced or EndRefused), (b) every write
the spec does not enable, where a runner could ask for it, is refused and
writes nothing, and (c) Go's state after each edge, abstracted to the
spec's variables, is the spec's successor. A Lapse moves every process's
clock past the lease's expiry.

The Workspaces keep their rounds, as deployed. Each state is reached by
replaying its shortest path on a fresh thread; each edge from it runs in
its own transaction, is read there, and is rolled back, so that the next
edge starts from the same state (on a fork of the process's Workspace,
since a rollback cannot move a round back). With -sample N, N edges drawn
at random (-seed) are driven and committed instead.

Prints "X of Y edges", "N divergences" and the time. Exits 0 with no
divergence, 1 with some (with -unfenced: 1 when the mutant diverges, as it
must; 5 when it does not), 2 for bad usage, 4 when the storage cannot be
reached.

Flags:
`

func cmdConform(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("conform", flag.ContinueOnError)
	cfgPath := fs.String("cfg", "spec/ThreadClaimLapse.cfg", "the cfg whose state graph is driven (it must have no violation)")
	storage := fs.String("storage", "memory", `"memory" (a fresh store per path) or a postgres:// URL (a schema of its own, dropped after; a server that does not answer within 15s is exit 4)`)
	sample := fs.Int("sample", 0, "drive this many edges drawn at random instead of every edge (0: every edge)")
	seed := fs.Uint64("seed", 1, "the seed of -sample's draw")
	var off core.Fences
	fs.Var(everyFenceOff{&off}, "unfenced", "run the Workspaces with every fence off (the mutant): it must diverge")
	asJSON := jsonFlag(fs)
	files := reportFlags(fs)
	if err := parse(fs, args, stdout, stderr, conformUsage); err != nil {
		return err
	}
	if err := checkReportFiles(files, *cfgPath); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if *sample < 0 {
		return usageError{"-sample must not be negative"}
	}
	if fi, err := os.Stat(*cfgPath); err != nil {
		return usageError{err.Error()}
	} else if fi.IsDir() {
		return usageError{fmt.Sprintf("%s: is a directory, not a cfg file", *cfgPath)}
	}
	c, err := specmodel.ReadConfig(*cfgPath)
	if err != nil {
		return usageError{err.Error()}
	}
	g := specmodel.New(c).Explore()
	if v := g.Result().Violation; v != nil {
		return usageError{fmt.Sprintf("%s: its spec violates %s at depth %d; conform drives a cfg with no violation (the fenced one)", *cfgPath, v.Invariant, v.Depth)}
	}
	opts := conform.Options{Unfenced: off, Sample: *sample, Seed: *seed}
	unfenced := off != (core.Fences{})
	switch {
	case *storage == "memory":
	case strings.HasPrefix(*storage, "postgres://") || strings.HasPrefix(*storage, "postgresql://"):
		if err := checkStorageURL(*storage); err != nil {
			return err
		}
		var suffix [4]byte
		_, _ = rand.Read(suffix[:])
		schema := fmt.Sprintf("tcconform_%d_%s", os.Getpid(), hex.EncodeToString(suffix[:]))
		store, err := fleet.OpenStore(ctx, *storage, postgres.Options{Schema: schema})
		if err != nil {
			return failure{exitCouldNotRun, fmt.Sprintf("tracecheck conform: storage: %v", err)}
		}
		defer store.Close()
		defer func() { _ = store.DropSchema(context.WithoutCancel(ctx)) }()
		opts.NewStorage = func(context.Context) (core.Storage, error) { return store, nil }
	default:
		return usageError{fmt.Sprintf("-storage %q: want memory or a postgres:// URL", *storage)}
	}
	rep, err := conform.Run(ctx, g, opts)
	if err != nil {
		return failure{exitCouldNotRun, fmt.Sprintf("tracecheck conform: %v", err)}
	}
	total := rep.Edges
	if *sample > 0 {
		total = *sample
	}
	if files.Wanted() {
		defer func() { err = writeReports(files, conformReport(*cfgPath, rep, total, err), err) }()
	}
	var verdict error
	switch {
	case unfenced && rep.Divergences > 0:
		verdict = failure{exitFailed, "FAIL (as it must with the fences off): the mutant diverges from the spec"}
	case unfenced:
		verdict = failure{exitSurvived, "SURVIVED: the fences are off and conform found no divergence: the checks are blind"}
	case rep.Divergences > 0:
		verdict = failure{exitFailed, fmt.Sprintf("FAIL: %d divergences", rep.Divergences)}
	case rep.Driven < total:
		verdict = failure{exitFailed, fmt.Sprintf("FAIL: %d of %d edges driven", rep.Driven, total)}
	}
	if *asJSON {
		return writeJSON(stdout, "conform", verdict, conformFigures{
			Cfg: *cfgPath, Storage: storageName(*storage), Unfenced: unfenced, States: rep.States,
			Edges: rep.Edges, Driven: rep.Driven, Sample: *sample, Seed: *seed, Refusals: rep.Refusals,
			Divergences: rep.Divergences, Seconds: rep.Elapsed.Seconds(), First: rep.First,
		})
	}
	what := "edges"
	if *sample > 0 {
		what = fmt.Sprintf("sampled edges (seed %d; the graph has %d)", *seed, rep.Edges)
	}
	fmt.Fprintf(stdout, "%s on %s%s: %d states\n", *cfgPath, storageName(*storage), map[bool]string{true: ", fences off", false: ""}[unfenced], rep.States)
	fmt.Fprintf(stdout, "%d of %d %s\n", rep.Driven, total, what)
	fmt.Fprintf(stdout, "%d writes the spec does not enable asked of Go\n", rep.Refusals)
	fmt.Fprintf(stdout, "%d divergences\n", rep.Divergences)
	for _, d := range rep.First {
		fmt.Fprintf(stdout, "  %s\n", strings.ReplaceAll(d.String(), "\n", "\n  "))
	}
	fmt.Fprintf(stdout, "time %.1fs\n", rep.Elapsed.Seconds())
	return verdict
}

// conformFigures is conform's -json figures: the cfg and storage driven,
// the graph's states and edges, the edges driven, the refusals asked, the
// divergences and the first of them.
type conformFigures struct {
	Cfg         string               `json:"cfg"`
	Storage     string               `json:"storage"`
	Unfenced    bool                 `json:"unfenced"`
	States      int                  `json:"states"`
	Edges       int                  `json:"edges"`
	Driven      int                  `json:"driven"`
	Sample      int                  `json:"sample"`
	Seed        uint64               `json:"seed"`
	Refusals    int                  `json:"refusals"`
	Divergences int                  `json:"divergences"`
	Seconds     float64              `json:"seconds"`
	First       []conform.Divergence `json:"first"`
}

// conformReport is conform's verdicts for -junit and -summary: the edges
// driven, each divergence kept (its path the story), and the verdict.
func conformReport(cfg string, rep conform.Report, total int, err error) *report.Report {
	r := &report.Report{Name: "tracecheck conform"}
	edges := report.Verdict{Suite: "conform: edges", Name: cfg, Status: report.Passed, Time: rep.Elapsed,
		Story: fmt.Sprintf("%d of %d edges driven, %d refusals asked, %d divergences", rep.Driven, total, rep.Refusals, rep.Divergences)}
	if rep.Driven < total {
		edges.Status, edges.Message = report.Failed, fmt.Sprintf("%d of %d edges driven", rep.Driven, total)
	}
	r.Add(edges)
	for _, d := range rep.First {
		r.Add(report.Verdict{Suite: "conform: divergences", Name: d.Step, Status: report.Failed, Message: d.Detail, Story: d.String()})
	}
	if n := rep.Divergences - len(rep.First); n > 0 {
		r.Add(report.Verdict{Suite: "conform: divergences", Name: "the others", Status: report.Failed, Message: fmt.Sprintf("%d more divergences, not kept", n)})
	}
	status, msg := verdictOf(err)
	r.Add(report.Verdict{Suite: "conform: verdict", Name: "conform " + cfg, Status: status, Message: msg})
	return r
}

func storageName(s string) string {
	if s == "memory" {
		return "memory"
	}
	return "PostgreSQL"
}
