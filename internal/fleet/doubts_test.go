package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Each write in doubt is counted once, whether storage's log has it
// (committed) or not, by how its process resolved it; a resolution that
// says otherwise than the log is a disagreement, and a problem.
func TestCountDoubts(t *testing.T) {
	d := func(proc string, h core.Holder, a core.Action, tick uint64, o core.DoubtOutcome, crashed bool) core.Doubt {
		return core.Doubt{Proc: proc, Thread: "t1", Holder: h, Action: a, Tick: tick, Outcome: o, Crashed: crashed}
	}
	stored := []core.TraceEvent{
		{Thread: "t1", Tick: 4, Action: core.ActionRelease, Holder: "h1"},  // h1's Release committed
		{Thread: "t1", Tick: 7, Action: core.ActionClaim, Holder: "h9"},    // someone else's write at h2's tick
		{Thread: "t1", Tick: 9, Action: core.ActionRunStart, Holder: "h3"}, // h3's RunStart committed
		{Thread: "t1", Tick: 12, Action: core.ActionClaim, Holder: "h5"},   // h5's Claim committed
		{Thread: "t1", Tick: 16, Action: core.ActionRenew, Holder: "h8"},   // h8's Renew committed after its Crash read tick 15
		// h11's RunEnd committed with the next run's start; storage keeps
		// the Plan between them, a read at the RunEnd's tick, after it (its
		// log's order): the write is what a doubt is matched against.
		{Thread: "t1", Tick: 20, Action: core.ActionRunEnd, Holder: "h11"},
		{Thread: "t1", Tick: 20, Read: true, Action: core.ActionPlan, Holder: "h11"},
		{Thread: "t1", Tick: 21, Action: core.ActionRunStart, Holder: "h11"},
		// h12's RunEnd committed with its claim's Release.
		{Thread: "t1", Tick: 22, Action: core.ActionRunEnd, Holder: "h12"},
		{Thread: "t1", Tick: 23, Action: core.ActionRelease, Holder: "h12"},
	}
	ds := []core.Doubt{
		d("p1", "h1", core.ActionRelease, 4, core.DoubtPending, false),
		d("p1", "h1", core.ActionRelease, 4, core.DoubtCommitted, false), // ended by its Release
		d("p2", "h2", core.ActionRelease, 7, core.DoubtPending, false),
		d("p2", "h2", core.ActionRelease, 7, core.DoubtNotCommitted, true), // Crash
		d("p3", "h3", core.ActionRunStart, 9, core.DoubtPending, false),
		d("p3", "h3", core.ActionRunStart, 9, core.DoubtCommitted, true), // Crash
		d("p4", "h4", core.ActionClaim, 11, core.DoubtPending, false),
		d("p4", "h4", core.ActionClaim, 11, core.DoubtNotCommitted, false), // no round
		d("p5", "h5", core.ActionClaim, 12, core.DoubtPending, false),      // killed before it resolved
		d("p7", "h7", core.ActionRunEnd, 14, core.DoubtPending, false),     // open when its process stopped
		d("p6", "h6", core.ActionReply, 13, core.DoubtPending, false),
		d("p6", "h6", core.ActionReply, 13, core.DoubtCommitted, true), // the log has no such line: a disagreement
		// Not committed when its Crash read the log at tick 15; committed
		// at 16: no disagreement (the fences-on TestFleetSoak failure).
		d("p8", "h8", core.ActionRenew, 16, core.DoubtPending, false),
		d("p8", "h8", core.ActionRenew, 16, core.DoubtNotCommitted, true),
		// Never resolved, but the round's EndRefused ended it: not open.
		d("p9", "h10", core.ActionRenew, 18, core.DoubtPending, false),
		d("p10", "h11", core.ActionRunEnd, 20, core.DoubtPending, false),
		d("p10", "h11", core.ActionRunEnd, 20, core.DoubtCommitted, true), // Crash, after the Plan between the writes
		d("p11", "h12", core.ActionRunEnd, 22, core.DoubtPending, false),
		d("p11", "h12", core.ActionRunEnd, 22, core.DoubtCommitted, false), // ended by the Release in its transaction
	}
	cu := countDoubts(ds, stored, map[string]bool{"p5": true, "p2": true}, map[core.Holder]uint64{"h2": 8, "h3": 9, "h6": 13, "h8": 15},
		map[core.Holder]bool{"h2": true, "h3": true, "h6": true, "h8": true, "h10": true})
	require.Equal(t, CommitUnknown{
		Events:    11,
		ByAction:  map[core.Action]int{core.ActionRelease: 2, core.ActionRunStart: 1, core.ActionClaim: 2, core.ActionReply: 1, core.ActionRunEnd: 3, core.ActionRenew: 2},
		Committed: 6, NotCommitted: 5,
		Crashed: 5, EndedByRelease: 2, NoRound: 1, KilledFirst: 1, EndedLater: 1, Unresolved: 1,
		Disagreements: 1, CommittedAfterCrash: 1,
	}, cu)
	require.Equal(t, "none", countDoubts(nil, stored, nil, nil, nil).Line())

	rep := &Report{CommitUnknown: cu, Nemesis: map[Kind]int{}, Problems: []string{}}
	var text bytes.Buffer
	rep.WriteText(&text)
	require.Contains(t, text.String(), "commit unknown      11 writes (Claim 2, Renew 2, Release 2, RunStart 1, Reply 1, RunEnd 3): 6 committed, 5 not; resolved by a Crash 5, by the Release's own line 2, no round (Claim not committed) 1, from storage's log after a SIGKILL took the process first 1, ended by a later line of their round 1, open when the process stopped 1; 1 committed after their Crash read the log; 1 resolutions disagree")
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var back struct {
		CU map[string]any `json:"commit_unknown"`
	}
	require.NoError(t, json.Unmarshal(b, &back))
	require.EqualValues(t, 11, back.CU["events"])
	require.EqualValues(t, 1, back.CU["ended_later"])
	require.EqualValues(t, 1, back.CU["committed_after_crash"])
	require.EqualValues(t, 2, back.CU["ended_by_release"])
	require.EqualValues(t, 1, back.CU["unresolved"])
	require.EqualValues(t, 1, back.CU["killed_first"])
	rep.doubtProblems()
	require.Len(t, rep.Problems, 2, "the disagreement, and the write left in doubt at a clean stop: %v", rep.Problems)
	require.Contains(t, rep.Problems[1], "1 writes still in doubt when their process stopped")
	var page bytes.Buffer
	require.NoError(t, rep.WriteHTML(&page))
	require.Contains(t, page.String(), `<td id="commit-unknown">11 writes (Claim 2`)
}

// Two corners of matching a doubt against storage's log, each of which
// a mutant could move with no other test failing (sweep 3): a line of the
// same action at the write's tick under another holder is not the write
// (its Crash's "not committed" agrees with the log), and a write at
// exactly the tick its Crash read was in the log the Crash read (its "not
// committed" disagrees; only a later tick is "committed after").
func TestCountDoubtsCorners(t *testing.T) {
	stored := []core.TraceEvent{
		{Thread: "t1", Tick: 5, Action: core.ActionRelease, Holder: "h2"}, // another's Release at h1's tick
		{Thread: "t1", Tick: 9, Action: core.ActionRunStart, Holder: "h3"},
	}
	ds := []core.Doubt{
		{Proc: "p1", Thread: "t1", Holder: "h1", Action: core.ActionRelease, Tick: 5, Outcome: core.DoubtNotCommitted, Crashed: true},
		{Proc: "p3", Thread: "t1", Holder: "h3", Action: core.ActionRunStart, Tick: 9, Outcome: core.DoubtNotCommitted, Crashed: true},
	}
	cu := countDoubts(ds, stored, nil, map[core.Holder]uint64{"h1": 6, "h3": 9}, nil)
	require.Equal(t, CommitUnknown{
		Events:    2,
		ByAction:  map[core.Action]int{core.ActionRelease: 1, core.ActionRunStart: 1},
		Committed: 1, NotCommitted: 1, Crashed: 2,
		Disagreements: 1, // h3's: its Crash read tick 9, which held its RunStart
	}, cu)
}

// The workers' histories say which claims' rounds a line ended, and at
// which tick each claim's Crash read: every action the action table marks
// as ending the round counts, any other does not, and neither counts a
// line without a holder.
func TestRoundEnds(t *testing.T) {
	var histories [][]core.TraceEvent
	wantEnded := map[core.Holder]bool{}
	for i, a := range core.ActionTable() {
		h := core.Holder(fmt.Sprint("h", i))
		histories = append(histories, []core.TraceEvent{{Action: a.Action, Holder: h, Tick: uint64(10 + i)}, {Action: a.Action, Tick: 99}})
		if a.EndsRound {
			wantEnded[h] = true
		}
	}
	histories = append(histories, []core.TraceEvent{{Action: core.ActionCrash, Holder: "hc", Tick: 3}, {Action: core.ActionCrash, Holder: "hc", Tick: 7}})
	wantEnded["hc"] = true // a Crash ends its round
	crashedAt, ended := roundEnds(histories)
	require.NotEmpty(t, wantEnded)
	require.Equal(t, wantEnded, ended)
	var crashHolder core.Holder
	for i, a := range core.ActionTable() {
		if a.Action == core.ActionCrash {
			crashHolder = core.Holder(fmt.Sprint("h", i))
			require.Equal(t, map[core.Holder]uint64{crashHolder: uint64(10 + i), "hc": 7}, crashedAt, "the tick of each claim's last Crash")
		}
	}
	require.NotEmpty(t, crashHolder, "the action table has a Crash")
}

// A doubts file whose last line was cut short (its process was killed
// writing it) is read without that line; a bad line before others is an
// error naming it.
func TestDecodeDoubts(t *testing.T) {
	good := `{"proc":"p1","thread":"t1","holder":"h1","action":"Release","tick":4,"outcome":"pending","crashed":false}`
	ds, err := decodeDoubts(strings.NewReader(good+"\n"+good[:20]), "p1.doubts")
	require.NoError(t, err)
	require.Len(t, ds, 1)
	_, err = decodeDoubts(strings.NewReader(good[:20]+"\n"+good+"\n"), "p1.doubts")
	require.ErrorContains(t, err, "p1.doubts:1:")
	require.Equal(t, "/d/p1.doubts", doubtsPath("/d/p1.history"))
}

// TestCountCrashes: the Crash lines the merge adds after storage lost a
// claim's writes are not turns a process gave up, and are counted apart.
func TestCountCrashes(t *testing.T) {
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "h1", Call: 10, Return: 11},
	}
	histories := [][]core.TraceEvent{{
		{Tick: 1, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "h1", Call: 10, Return: 11},
		// A Renew p1 was told committed, which storage then lost.
		{Tick: 2, Action: core.ActionRenew, Thread: "t1", Proc: "p1", Holder: "h1", Call: 20, Return: 21},
	}, {
		{Tick: 1, Read: true, Action: core.ActionCrash, Thread: "t2", Proc: "p2", Holder: "h2", Call: 30, Return: 31},
	}}
	merged, lost := tracecheck.MergeHistories(stored, histories)
	if len(lost) != 1 {
		t.Fatalf("lost %d writes, want the Renew: %v", len(lost), lost)
	}
	turns, afterLoss := countCrashes(merged)
	if turns != 1 || afterLoss != 1 {
		t.Errorf("countCrashes = %d turns, %d after loss; want 1 and 1 (merged: %v)", turns, afterLoss, merged)
	}
}

// How a doubt is settled, case by case: each a corner that a mutant of
// the seventeenth pass moved with every other test passing. A Crash that
// could read no trace lines (undecided) disagrees with nothing; a Claim
// that committed is no "no round" (a Claim that did not commit); and a
// Crash's "not committed" of a write the log has, with no tick of that
// Crash's read known, is a disagreement, not a write committed after the
// read.
func TestCountDoubtsSettles(t *testing.T) {
	stored := []core.TraceEvent{{Thread: "t1", Tick: 3, Action: core.ActionClaim, Holder: "h1"}}
	doubt := func(tick uint64, o core.DoubtOutcome, crashed bool) core.Doubt {
		return core.Doubt{Proc: "p1", Thread: "t1", Holder: "h1", Action: core.ActionClaim, Tick: tick, Outcome: o, Crashed: crashed}
	}
	for _, tc := range []struct {
		name string
		d    core.Doubt
		want CommitUnknown
	}{
		{"undecided, committed", doubt(3, core.DoubtUndecided, true), CommitUnknown{Events: 1, Committed: 1, Crashed: 1}},
		{"undecided, not committed", doubt(4, core.DoubtUndecided, true), CommitUnknown{Events: 1, NotCommitted: 1, Crashed: 1}},
		{"a Claim committed", doubt(3, core.DoubtCommitted, false), CommitUnknown{Events: 1, Committed: 1}},
		{"a Claim not committed", doubt(4, core.DoubtNotCommitted, false), CommitUnknown{Events: 1, NotCommitted: 1, NoRound: 1}},
		{"not committed, says a Crash whose read is unknown", doubt(3, core.DoubtNotCommitted, true),
			CommitUnknown{Events: 1, Committed: 1, Crashed: 1, Disagreements: 1}},
	} {
		tc.want.ByAction = map[core.Action]int{core.ActionClaim: 1}
		require.Equal(t, tc.want, countDoubts([]core.Doubt{tc.d}, stored, nil, nil, nil), tc.name)
	}
}
