package fleet

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// TestReportSaysWhatIsGone: the text report does not name a trace file
// as if it were there when the run's directory was removed, and the HTML
// says "none measured" for handovers, as the text does, rather than
// "0 threads: p50 0 ms".
func TestReportSaysWhatIsGone(t *testing.T) {
	rep := &Report{TraceFile: "/tmp/tracecheck-fleet-1/trace.ndjson", TraceRemoved: true, Nemesis: map[Kind]int{}}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "trace.ndjson, removed with the run's temporary directory (-keep or -dir keeps it)") {
		t.Errorf("the text names the removed trace without saying so:\n%s", text.String())
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "0 threads: p50") || !strings.Contains(page.String(), "none measured") {
		t.Errorf("the page's handover row with no handover is not \"none measured\"")
	}
}

// A handover past the bound is attributed to the faults that overlapped
// its wait (from when its claim was due to its Claim's return) on its
// claimant or on the server, never to faults on other workers, failed
// injections or faults outside the wait; one within the bound to none.
func TestSlowHandoversAttributed(t *testing.T) {
	s := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	rep := &Report{
		Handovers: []Handover{
			{Thread: "t1", From: "p1", To: "p2", At: s(1000), AfterExpiry: s(300)}, // waited 700..1000
			{Thread: "t2", From: "p1", To: "p3", At: s(1000), AfterExpiry: s(300)},
			{Thread: "t3", From: "p1", To: "p2", At: s(1000), AfterExpiry: s(50)}, // within the bound
		},
		Events: []Event{
			{Kind: KindStop, Target: "p2", Start: s(600), End: s(750)},      // overlaps t1's wait
			{Kind: KindLatency, Target: "p2", Start: s(900), End: s(1500)},  // overlaps t1's
			{Kind: KindRestart, Start: s(950), End: s(980)},                 // the server: t1's and t2's
			{Kind: KindClock, Target: "p2", Start: s(100), End: s(699)},     // over before the wait
			{Kind: KindCommit, Target: "p2", Start: s(1001), End: s(1100)},  // after the Claim
			{Kind: KindPartition, Target: "p4", Start: s(800), End: s(900)}, // another worker
			{Kind: KindKill, Target: "p1", Start: s(700), End: s(700)},      // the kill of the holder
			{Kind: KindTerminate, Target: "p2", Start: s(800), End: s(800), Err: "failed"},
		},
	}
	rep.summariseHandovers(s(100))
	require.Equal(t, []string{"stop@0.60s", "latency@0.90s", "restart@0.95s"}, rep.Handovers[0].Faults)
	require.Equal(t, []string{"restart@0.95s"}, rep.Handovers[1].Faults)
	require.Empty(t, rep.Handovers[2].Faults, "within the bound")
	require.Equal(t, map[Kind]int{KindStop: 1, KindLatency: 1, KindRestart: 2}, rep.HandoverSlowFaults)
	require.Equal(t, 0, rep.HandoverSlowNoFault)
	require.Equal(t, "2 past the bound: 2 waited behind a fault on their claimant or the server (stop 1, restart 2, latency 1), 0 behind none", rep.SlowLine())

	rep = &Report{Handovers: []Handover{{To: "p2", At: s(1000), AfterExpiry: s(300)}}}
	rep.summariseHandovers(s(100))
	require.Equal(t, "1 past the bound: 0 waited behind a fault on their claimant or the server, 1 behind none", rep.SlowLine())
	rep = &Report{Handovers: []Handover{{To: "p2", At: s(1000), AfterExpiry: s(30)}}}
	rep.summariseHandovers(s(100))
	require.Equal(t, "none", rep.SlowLine())
}

// A mutant's report counts the writes whose fence is off, and a survivor
// says whether the run made any: a run without one could not show the
// mutant (the fleet kill check's seed 18 with 4 turns crashed no turn).
func TestSurvivorNote(t *testing.T) {
	per := map[core.Action]int{core.ActionRunStart: 40, core.ActionReply: 3, core.ActionAbandon: 0, core.ActionClaim: 50}
	require.Nil(t, unfencedWrites(core.Fences{}, per), "fences on")
	n := unfencedWrites(core.Fences{Abandon: true}, per)
	require.Equal(t, map[core.Action]int{core.ActionAbandon: 0}, n)
	rep := &Report{UnfencedWrites: n}
	require.Equal(t, "the run made none of the writes whose fence is off (Abandon 0), so it could not show the mutant: try other seeds", rep.SurvivorNote())
	rep.UnfencedWrites = unfencedWrites(core.Fences{Start: true, Reply: true, Abandon: true}, per)
	require.Equal(t, "the writes whose fence is off, made in this run: Abandon 0, RunStart 40, Reply 3", rep.SurvivorNote())
}
