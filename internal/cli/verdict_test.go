package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestVerdictOnStdout: every command prints its verdict, PASS or FAIL (or
// accepted, REJECTED, caught, SURVIVED) and the story, on stdout, and
// nothing of it on stderr, which is for usage, bad input (2) and could
// not run (4). With -json stdout is the one object, and the failure's
// message goes to stderr. fleet takes the same path through Main
// (TestFleetSingleFenceMutantCaught checks its stdout, on PostgreSQL).
func TestVerdictOnStdout(t *testing.T) {
	root, _ := tlcRepo(t, map[string]string{
		"M.cfg":      "\\* expect: ok\n\\* fake: ok\n",
		"MOkBad.cfg": "\\* expect: ok\n\\* fake: violation Inv\n",
	})
	okCfg, badCfg := smallCfg(t, "ok", true), smallCfg(t, "ok", false)
	const fixtures = "../../tracecheck/testdata/"
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // on stdout, none of them on stderr
	}{
		{"run passes", []string{"run", "-seeds", "2", "-concurrent", "0"}, exitOK, []string{"PASS"}},
		{"run fails", []string{"run", "-seeds", "40", "-concurrent", "0", "-unfenced", "-shrink=false"}, exitFailed,
			[]string{"FAIL", "the mutant was caught", "I1_ConsumedAtMostOnce"}},
		{"run survives", []string{"run", "-seeds", "2", "-steps", "1", "-concurrent", "0", "-unfenced"}, exitSurvived, []string{"SURVIVED"}},
		{"validate accepts", []string{"validate", fixtures + "ok-run-output.ndjson"}, exitOK, []string{"accepted"}},
		{"validate rejects", []string{"validate", fixtures + "bad-consumed-twice.ndjson"}, exitFailed,
			[]string{"REJECTED", "1 of 1 traces rejected"}},
		{"show rejects", []string{"show", fixtures + "bad-consumed-twice.ndjson"}, exitFailed,
			[]string{"REJECTED", "rejected at line"}},
		{"show TLC invariant", []string{"show", tlcFixture}, exitFailed, []string{"invariant I1_ConsumedAtMostOnce violated in state"}},
		{"model passes", []string{"model", okCfg}, exitOK, []string{"as expected"}},
		{"model fails", []string{"model", badCfg}, exitFailed, []string{"NOT AS EXPECTED"}},
		{"conform fails", []string{"conform", "-cfg", okCfg, "-unfenced", "-sample", "400", "-seed", "3"}, exitFailed, []string{"as it must"}},
		{"conform survives", []string{"conform", "-cfg", okCfg, "-unfenced", "-sample", "1"}, exitSurvived, []string{"SURVIVED"}},
		{"tlc passes", []string{"tlc", "-root", root, "-skip", "MOkBad.cfg", "spec"}, exitOK, []string{"PASS  spec/M.cfg"}},
		{"tlc fails", []string{"tlc", "-root", root, "spec"}, exitFailed,
			[]string{"FAIL  spec/MOkBad.cfg", "tlc: 1 of 2 checks unexpected"}},
	} {
		code, out, errs := runCLI(tc.args...)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.name, code, tc.code, out, errs)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q not on stdout\nstdout:\n%s\nstderr:\n%s", tc.name, w, out, errs)
			}
			if strings.Contains(errs, w) {
				t.Errorf("%s: %q on stderr, which is not for the verdict:\n%s", tc.name, w, errs)
			}
		}
	}

	// -json: stdout is the object alone, whatever the verdict.
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"validate", "-json", fixtures + "bad-consumed-twice.ndjson"}, exitFailed},
		{[]string{"show", "-json", fixtures + "bad-consumed-twice.ndjson"}, exitFailed},
		{[]string{"model", "-json", badCfg}, exitFailed},
		{[]string{"tlc", "-json", "-root", root, "spec"}, exitFailed},
		{[]string{"conform", "-json", "-cfg", okCfg, "-unfenced", "-sample", "400", "-seed", "3"}, exitFailed},
		{[]string{"conform", "-json", "-cfg", okCfg, "-unfenced", "-sample", "1"}, exitSurvived},
	} {
		code, out, errs := runCLI(tc.args...)
		type head struct {
			Command, Verdict string
			Exit             int
		}
		var obj head
		err := json.Unmarshal([]byte(out), &obj)
		if err != nil || code != tc.code || obj != (head{tc.args[0], verdictNames[tc.code], tc.code}) {
			t.Errorf("%v: exit %d, want %d and stdout one JSON object of %s with verdict %s (%v)\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, tc.args[0], verdictNames[tc.code], err, out, errs)
		}
	}
}
