package core_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/threadclaim/threadclaim/core"
)

// specFile is the specification the action table and the names of
// spec.go follow.
const specFile = "../spec/ThreadClaimLapse.tla"

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNamesAreTheSpecs: the invariants core names are defined in the
// spec, and the values it names for pc, plan[p].kind, runs[r].state and
// reqs[q].state are exactly the ones the spec's TypeOK and RunStates give.
func TestNamesAreTheSpecs(t *testing.T) {
	spec := readFile(t, specFile)
	for _, name := range []string{core.InvTypeOK, core.InvConsumedAtMostOnce, core.InvOneActiveRun, core.InvNoLiveAbandon, core.InvSteeringException, "GivenAtMostOnce", core.PropNoLiveTakeover} {
		if !regexp.MustCompile(`(?m)^` + name + ` ==`).MatchString(spec) {
			t.Errorf("%s is not defined in %s", name, specFile)
		}
	}
	for _, tc := range []struct {
		what string
		re   string // its set of values in the spec
		want []string
	}{
		{"pc", `pc \\in \[Procs -> \{([^}]*)\}\]`, []string{core.PCIdle, core.PCClaimed, core.PCPlanned, core.PCRunning, core.PCSteered}},
		{"plan[p].kind", `kind : \{([^}]*)\}`, []string{core.PlanKindNone, core.PlanKindRun, core.PlanKindReply, core.PlanKindSteer}},
		{"runs[r].state", `RunStates == \{([^}]*)\}`, []string{string(core.StateActive), string(core.StateEnded), string(core.StateAbandoned)}},
		{"reqs[q].state", `reqs \\in Seq\(\[run : [^,]*, state : \{([^}]*)\}`, []string{string(core.RequestOpen), string(core.RequestAnswered)}},
	} {
		m := regexp.MustCompile(tc.re).FindStringSubmatch(spec)
		if m == nil {
			t.Errorf("%s: no %s in %s", tc.what, tc.re, specFile)
			continue
		}
		var got []string
		for _, s := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(m[1], -1) {
			got = append(got, s[1])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: the spec's values are %q; core names %q", tc.what, got, tc.want)
		}
	}
}
