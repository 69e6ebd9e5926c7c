package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
)

// jsonSummary is what -json prints: one JSON object per command, the
// same shape for every command, for tools and CI dashboards. Figures is
// the command's own summary (its counts, its files, its verdicts).
type jsonSummary struct {
	Command string `json:"command"`
	// Verdict names the exit code: pass (0), fail (1; with -unfenced the
	// mutant was caught), usage (2), inconclusive (3), could-not-run (4),
	// survived (5).
	Verdict string `json:"verdict"`
	Exit    int    `json:"exit"`
	// Message is the failure's text: what failed, or why it could not run.
	Message string `json:"message,omitempty"`
	Figures any    `json:"figures,omitempty"`
}

var verdictNames = map[int]string{
	exitOK: "pass", exitFailed: "fail", exitUsage: "usage", exitInconclusive: "inconclusive",
	exitCouldNotRun: "could-not-run", exitSurvived: "survived",
}

// jsonFlag registers the -json flag every command shares.
func jsonFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("json", false, "print the summary as one JSON object on stdout (command, verdict, exit, message, figures) instead of text")
}

// exitCode is the exit code the command's error gives (as run maps it).
func exitCode(err error) int {
	var ue usageError
	var f failure
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &f):
		return f.code
	}
	return exitCouldNotRun
}

// writeJSON writes the command's summary for -json: its verdict from err
// (the command's result, returned unchanged so the exit code stays the
// same) and its figures.
func writeJSON(w io.Writer, command string, err error, figures any) error {
	s := jsonSummary{Command: command, Exit: exitCode(err), Figures: figures}
	s.Verdict = verdictNames[s.Exit]
	if err != nil {
		s.Message = err.Error()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if werr := enc.Encode(s); werr != nil && err == nil {
		return werr
	}
	if err != nil {
		return jsonTaken{err}
	}
	return nil
}

// jsonTaken is a command's error whose verdict stdout already carries as
// JSON: Main prints its message on stderr, keeping stdout one object.
type jsonTaken struct{ err error }

func (e jsonTaken) Error() string { return e.err.Error() }
func (e jsonTaken) Unwrap() error { return e.err }
