package cli

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/threadclaim/threadclaim/internal/explore"
)

const exportUsage = `usage: tracecheck export -itf OUT [flags] TRACE

Writes a trace as the spec's states in the Informal Trace Format (ITF), the
JSON that Apalache and Quint read: "#meta", "vars" (the variables of
spec/ThreadClaimLapse.tla), "states", with integers as {"#bigint": "n"},
the functions of the process (pc, hold, plan, run) as {"#map": ...},
records as objects and sequences as arrays. Each state's "#meta" names the
action that led to it ("Claim(p1)") and its trace line; an inferred Lapse
is a state of its own.

TRACE is a Go trace (ndjson) or a TLC counterexample (-dumpTrace json). A
Go trace's states are one thread's (-thread; default the rejected one, or
the first) and stop before a rejected line: the spec has no state after
it (the trace's "#meta" says why).

Flags:
`

// exportFigures is export's summary for -json.
type exportFigures struct {
	Trace   string `json:"trace"`
	Source  string `json:"source"`
	Thread  string `json:"thread"`
	States  int    `json:"states"`
	Out     string `json:"out"`
	Verdict string `json:"verdict"`
}

func cmdExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	out := fs.String("itf", "", "write the ITF trace to this file (required; not -, stdout being the summary's)")
	thread := fs.String("thread", "", "the thread to export from a Go trace (default the rejected one, or the first)")
	jsonOut := jsonFlag(fs)
	if err := parse(fs, args, stdout, stderr, exportUsage); err != nil {
		return err
	}
	switch *out {
	case "":
		return usageError{"-itf OUT is required"}
	case "-":
		// stdout carries the summary (or -json's object): the ITF goes to
		// a file, never to a file named "-" a reader takes for stdout.
		return usageError{"-itf -: the ITF trace is written to a file, not to stdout (stdout carries the summary); name a file"}
	}
	if fs.NArg() != 1 {
		return usageError{"want exactly one trace"}
	}
	if err := checkNotInput("-itf", *out, fs.Arg(0)); err != nil {
		return err
	}
	fig, err := export(fs.Arg(0), *out, *thread)
	if *jsonOut {
		return writeJSON(stdout, "export", err, fig)
	}
	if err == nil {
		fmt.Fprintf(stdout, "%s: %s, thread %s: %d states written to %s (ITF)\n", fig.Trace, fig.Source, fig.Thread, fig.States, fig.Out)
	}
	return err
}

func export(path, out, thread string) (exportFigures, error) {
	fig := exportFigures{Trace: path}
	t, _, _, err := readExplorerTrace(path)
	if err != nil {
		return fig, err
	}
	fig.Source, fig.Verdict = t.Source, t.Verdict
	pick := -1
	for i, th := range t.Threads {
		switch {
		case thread != "" && th.Name == thread:
			pick = i
		case thread == "" && pick < 0 && rejected(th):
			pick = i
		}
	}
	if pick < 0 && thread == "" {
		pick = 0
	}
	if pick < 0 {
		return fig, usageError{fmt.Sprintf("no thread %q in %s", thread, path)}
	}
	tr := t.ITF(pick)
	tr.Meta["verdict"] = t.Verdict
	b, err := tr.MarshalJSON()
	if err != nil {
		return fig, err
	}
	// What a reader of the file gets must be the trace's states: read it
	// back and check it against them before writing.
	if err := t.CheckITF(pick, b); err != nil {
		return fig, failure{exitFailed, fmt.Sprintf("FAIL: %s: the ITF does not read back as the trace's states; nothing written: %v", path, err)}
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return fig, usageError{err.Error()}
	}
	fig.Thread, fig.States, fig.Out = t.Threads[pick].Name, len(tr.States), out
	return fig, nil
}

func rejected(th explore.Thread) bool {
	for _, s := range th.Steps {
		if s.Rejected != nil {
			return true
		}
	}
	return false
}
