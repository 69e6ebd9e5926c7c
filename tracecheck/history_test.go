package tracecheck_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// A write that storage committed but whose process never recorded it (a
// Renew in flight when the process was killed) may have begun before
// every line the process recorded: its renewals run beside its turns,
// on other threads. Its call must not be placed after any of them, or
// porcupine finds a history of a correct run not linearizable: here p2's
// Claim returned before p1's recorded lines on t2, and p1's Renew of t1
// committed before that Claim.
func TestMergeHistoriesPendingWriteCalledEarly(t *testing.T) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 2, Action: core.ActionRenew, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 3, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2},
	}
	p1 := []core.TraceEvent{
		// p1's turn on another thread goes on while the renewal of t1
		// is in flight; then p1 is killed.
		{Tick: 7, Read: true, Action: core.ActionPlan, Thread: "t2", Proc: "p1", Holder: "h9", Call: 30, Return: 40},
		{Tick: 8, Read: true, Action: core.ActionPlan, Thread: "t2", Proc: "p1", Holder: "h9", Call: 90, Return: 100},
	}
	p2 := []core.TraceEvent{
		{Tick: 3, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2, Call: 10, Return: 20},
	}
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{p1, p2})
	require.Empty(t, lost)
	var renew core.TraceEvent
	for _, l := range lines {
		if l.Action == core.ActionRenew {
			renew = l
		}
	}
	require.Equal(t, int64(math.MaxInt64), renew.Return, "a write no history has is pending")
	require.LessOrEqual(t, renew.Call, int64(10), "the pending Renew must be callable before p2's Claim")
	var claim core.TraceEvent
	for _, l := range lines {
		if l.Action == core.ActionClaim && l.Proc == "p1" {
			claim = l
		}
	}
	require.Equal(t, int64(math.MaxInt64), claim.Return, "p1's Claim, with no history line either, is pending")
	_, err := tracecheck.CheckLinearizable(tracecheck.OperationsFromTrace(lines), 10*time.Second, "")
	require.NoError(t, err)
}

// A write its process was told committed that storage no longer has
// (storage lost acknowledged commits) is returned as lost, lends its
// times to no stored write, though another write took its thread and
// tick since, and the reads its claim made from its call on are left
// out. Before, the lost Abandon's times went to the Claim that took its
// tick, and its claim's reads stayed in the trace.
func TestMergeHistoriesLostWrite(t *testing.T) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		// p1's Abandon at tick 2 was acknowledged, then lost: p2's Claim
		// took tick 2.
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2},
	}
	p1 := []core.TraceEvent{
		{Tick: 1, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 20},
		{Tick: 2, Action: core.ActionAbandon, Thread: "t1", Proc: "p1", Holder: h1, Run: 1, Lease: h1, Call: 30, Return: 40},
		{Tick: 2, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p1", Holder: h1, Call: 50, Return: 60},
	}
	p2 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2, Call: 500, Return: 600},
	}
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{p1, p2})
	require.Len(t, lost, 1)
	require.Equal(t, core.ActionAbandon, lost[0].Action)
	require.Len(t, lines, 3, "the two stored writes and p1's Crash, without the lost claim's Plan")
	for _, l := range lines {
		require.False(t, l.Read && l.Action != core.ActionCrash, "a read of the lost write's claim: %+v", l)
		if l.Proc == "p2" {
			require.Equal(t, [2]int64{500, 600}, [2]int64{l.Call, l.Return}, "p2's Claim keeps its own times")
		}
	}
	// What storage kept is a behaviour of the spec: p1 crashed after its
	// Claim, and p2 took the lapsed lease.
	crash := lines[2]
	require.Equal(t, [4]string{"Crash", "p1", "h1", "1"}, [4]string{string(crash.Action), crash.Proc, string(crash.Holder), fmt.Sprint(crash.Tick)})
	var ordered []core.TraceEvent
	for _, th := range tracecheck.Order(lines) {
		for _, l := range th.Lines {
			ordered = append(ordered, *l.Ev)
		}
	}
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err, "the trace of what storage kept")
}

// lostPostHistory is the poster's history of the stale-read cases: the
// Post of message 2 at tick 3, which storage lost after acknowledging
// it, and the Post of message 2 again, which took tick 3 and was kept.
func lostPostHistory() []core.TraceEvent {
	return []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1, Call: 1, Return: 2},
		{Tick: 3, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2, Call: 30, Return: 40}, // lost
		{Tick: 3, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2, Call: 1000, Return: 1010},
	}
}

// stalePlanHistories is what storage kept in the stale-read cases (the
// first Post, p1's Claim, and the Post of message 2 that took tick 3
// after the lost one), and p1's history: its Claim, and its Plan of
// message 2, which read tick 3 before the kept Post there was called.
func stalePlanHistories() (stored, p1 []core.TraceEvent) {
	h1 := core.Holder("h1")
	stored = []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		// The lost Post was tick 3; the poster's next post took it.
		{Tick: 3, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2},
	}
	p1 = []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 20},
		{Tick: 3, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p1", Holder: h1, Kind: core.PlanKindRun, Msg: 2, Taken: 1, Call: 50, Return: 60},
	}
	return stored, p1
}

// inOrder returns the merged lines' actions in trace order, and the lines.
func inOrder(lines []core.TraceEvent) (actions []string, ordered []core.TraceEvent) {
	for _, l := range tracecheck.Order(lines) {
		for _, x := range l.Lines {
			actions = append(actions, string(x.Ev.Action))
			ordered = append(ordered, *x.Ev)
		}
	}
	return actions, ordered
}

// A read that saw a state storage then lost (here p1's Plan, which saw
// the lost Post of message 2) is left out, and its claim's round ends
// with a Crash; a read made after storage had a state again is kept.
// Before, the stale Plan was checked against what storage kept and
// rejected (its taken, its tick), or made porcupine find no
// linearization.
func TestMergeHistoriesStaleRead(t *testing.T) {
	stored, p1 := stalePlanHistories()
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{lostPostHistory(), p1})
	require.Len(t, lost, 1)
	actions, _ := inOrder(lines)
	require.Equal(t, []string{"Post", "Claim", "Crash", "Post"}, actions, "the stale Plan left out, p1's round ended by a Crash")
}

// A read that saw a state storage then lost, written by a process whose
// history does not have it (it died with the write in flight): p1's Plan
// read tick 3 before the write storage kept at tick 3 was called, so it
// saw another write there, which storage lost. It is left out, and p1's
// round ends with a Crash, as for a lost write a history records. Before,
// the read was placed after the kept write at its tick (in the fleet with
// every nemesis: a process's Crash of its old round after its own next
// Claim, rejected with `Claim by p645: guard pc[p] = "idle" fails`).
func TestMergeHistoriesReadOfAnUnrecordedLostWrite(t *testing.T) {
	stored, p1 := stalePlanHistories()
	poster := slices.DeleteFunc(lostPostHistory(), func(ev core.TraceEvent) bool { return ev.Call == 30 }) // the lost Post unrecorded
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{poster, p1})
	require.Empty(t, lost, "no history records the lost write")
	actions, ordered := inOrder(lines)
	require.Equal(t, []string{"Post", "Claim", "Crash", "Post"}, actions, "the Plan of a lost state left out, p1's round ended by a Crash")
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err, "the trace of what storage kept")
}

// A read that saw a state storage then lost, after which the claim's
// round went on and storage kept its next write: here p1's Plan (a run of
// message 1) saw the state the lost Post of message 2 made, the poster
// posted message 2 again, and p1's RunStart of message 1 committed after
// that. The Plan is placed at the
// state the RunStart read (tick 3), where it holds, and the trace of what
// storage kept is accepted. Before, the Plan was left out and the kept
// RunStart rejected (`guard pc[p] = "planned" fails`; the fleet's `lose`
// nemesis on unmutated code).
func TestMergeHistoriesStaleReadThenKeptWrite(t *testing.T) {
	h1 := core.Holder("h1")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 3, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2},
		{Tick: 4, Action: core.ActionRunStart, Thread: "t1", Proc: "p1", Holder: h1, Msg: 1, Run: 1, Taken: 1, Lease: h1},
	}
	poster := lostPostHistory()
	p1 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 20},
		{Tick: 3, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p1", Holder: h1, Kind: core.PlanKindRun, Msg: 1, Taken: 0, Call: 50, Return: 60},
		{Tick: 4, Action: core.ActionRunStart, Thread: "t1", Proc: "p1", Holder: h1, Msg: 1, Run: 1, Taken: 1, Lease: h1, Call: 1100, Return: 1110},
	}
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{poster, p1})
	require.Len(t, lost, 1)
	actions, ordered := inOrder(lines)
	require.Equal(t, []string{"Post", "Claim", "Post", "Plan", "RunStart"}, actions, "the stale Plan placed at the state the RunStart read")
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err, "the trace of what storage kept")
}

// A Renew whose commit its process could not learn (its COMMIT held past
// the caller's deadline), so that the round ended with a Crash, and which
// then committed: the Crash follows it in the trace, since the process
// crashed with the Renew in flight. Before, the Crash was placed at the
// tick it read, and the trace was rejected with `Renew by p1: guard
// pc[p] # "idle" fails` (the fences-on TestFleetSoak failure).
func TestMergeHistoriesCrashAfterLateWrite(t *testing.T) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 3, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2},
		// The Renew's COMMIT reached the server after p1's Crash read tick 3.
		{Tick: 4, Action: core.ActionRenew, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 5, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2},
	}
	p1 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 20},
		{Tick: 3, Read: true, Action: core.ActionCrash, Thread: "t1", Proc: "p1", Holder: h1, Call: 50, Return: 60},
	}
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{p1})
	require.Empty(t, lost)
	var ordered []core.TraceEvent
	for _, th := range tracecheck.Order(lines) {
		for _, l := range th.Lines {
			ordered = append(ordered, *l.Ev)
		}
	}
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err, "the Crash after the late Renew")
}

// The trace writer never writes a line its reader refuses: a line with
// every id as long as the Workspace takes (core.MaxIDBytes), each byte
// one JSON escapes to six, is read back. (An id the Workspace refuses is
// core's test: storetest's InvalidInputRefused.)
func TestLongestIDsReadBack(t *testing.T) {
	id := strings.Repeat("\x01", core.MaxIDBytes)
	ev := core.TraceEvent{Tick: 1, Action: core.ActionClaim, Thread: core.ThreadID(id), Proc: id, Holder: core.Holder(id), Lease: core.Holder(id)}
	var b bytes.Buffer
	require.NoError(t, tracecheck.WriteLines(&b, []core.TraceEvent{ev}))
	require.Less(t, b.Len(), tracecheck.MaxLineBytes, "the line's length")
	lines, err := tracecheck.Read(&b, "long")
	require.NoError(t, err)
	require.Equal(t, []core.TraceEvent{ev}, lines)
}

// lostClaimHistories are the histories of a Claim storage lost (p1's, at
// tick 2: the fleet's rewind nemesis), after which p2 claimed the thread
// at the same tick, and p1, which went on believing it held the thread,
// made its next write, then: a RunStart storage kept (a write decided
// from a cache without the lease comparison, DEFECTS.md class e), or the
// refusal of it.
func lostClaimHistories(kept bool) (stored []core.TraceEvent, histories [][]core.TraceEvent) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	post := core.TraceEvent{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1}
	claim2 := core.TraceEvent{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2}
	start := core.TraceEvent{Tick: 3, Action: core.ActionRunStart, Thread: "t1", Proc: "p1", Holder: h1, Msg: 1, Run: 1, Taken: 1, Lease: h1}
	stored = []core.TraceEvent{post, claim2}
	poster := []core.TraceEvent{post}
	poster[0].Call, poster[0].Return = 1, 2
	p1 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 20}, // lost
		{Tick: 2, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p1", Holder: h1, Kind: core.PlanKindRun, Msg: 1, Call: 10, Return: 20},
	}
	if kept {
		stored = append(stored, start)
		start.Call, start.Return = 600, 610
		p1 = append(p1, start)
	} else {
		p1 = append(p1, core.TraceEvent{Tick: 2, Read: true, Action: core.ActionStartFenced, Thread: "t1", Proc: "p1", Holder: h1, Msg: 1, Lease: h2, Call: 600, Return: 610})
	}
	p2 := []core.TraceEvent{claim2, {Tick: 2, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p2", Holder: h2, Kind: core.PlanKindRun, Msg: 1}}
	p2[0].Call, p2[0].Return = 500, 510
	p2[1].Call, p2[1].Return = 500, 510
	return stored, [][]core.TraceEvent{poster, p1, p2}
}

// After storage lost p1's Claim, p1's round has no claim in the spec: its
// reads are left out, and its refused write too; what storage kept is
// accepted. A write of that round that storage kept is a write by a
// process that holds no claim, and the checker rejects that write itself.
// Before, the round's Plan was placed at the state the kept write read
// (nextKeptWrite, meant for a stale read of a claim storage kept), and
// the checker rejected the Plan (`pc[p] = "claimed"`), not the write.
func TestMergeHistoriesKeptWriteAfterLostClaim(t *testing.T) {
	stored, histories := lostClaimHistories(false)
	lines, lost := tracecheck.MergeHistories(stored, histories)
	require.Len(t, lost, 1)
	require.Equal(t, core.ActionClaim, lost[0].Action)
	actions, ordered := inOrder(lines)
	require.Equal(t, []string{"Post", "Claim", "Plan"}, actions, "p1's Plan and refusal left out")
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err, "the trace of what storage kept")

	stored, histories = lostClaimHistories(true)
	lines, lost = tracecheck.MergeHistories(stored, histories)
	require.Len(t, lost, 1)
	_, ordered = inOrder(lines)
	_, err = tracecheck.Check(ordered)
	var v *tracecheck.Violation
	require.True(t, errors.As(err, &v), "the kept RunStart of a lost claim's round: %v", err)
	require.Equal(t, core.ActionRunStart, v.Action, "rejected at the kept write: %v", err)
	require.Equal(t, "p1", v.Event.Proc)
}

// The rewind nemesis as it runs: storage loses p1's Claim (tick 2) while
// p1, stopped, has not yet been told that it committed; p2 claims the
// thread at the same tick, planning in the Claim's transaction, and only
// then is p1 told (its Claim returns after p2's). p2's next write, a
// RunStart storage kept, had an unknown commit: no history has it. p2's
// Plan saw p2's own kept Claim, not the lost one: it is kept, and the
// trace is accepted. Before, the Plan was taken for a stale read (it
// returned after the lost Claim's call, before a kept write called after
// that Claim's return), and, with no kept write of p2's called after it
// (the RunStart's call is unknown), left out: the checker then rejected
// p2's RunStart (`pc[p] = "planned"`), with the fences on
// (TestFleetSoak, 3 Dec 2026).
func TestMergeHistoriesReadOfOwnClaimAfterLostClaim(t *testing.T) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	post := core.TraceEvent{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1}
	claim2 := core.TraceEvent{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2}
	start2 := core.TraceEvent{Tick: 3, Action: core.ActionRunStart, Thread: "t1", Proc: "p2", Holder: h2, Msg: 1, Run: 1, Taken: 1, Lease: h2}
	stored := []core.TraceEvent{post, claim2, start2}
	poster := []core.TraceEvent{post}
	poster[0].Call, poster[0].Return = 1, 2
	p1 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 520}, // lost
		{Tick: 2, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p1", Holder: h1, Kind: core.PlanKindRun, Msg: 1, Call: 10, Return: 520},
	}
	p2 := []core.TraceEvent{claim2, {Tick: 2, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p2", Holder: h2, Kind: core.PlanKindRun, Msg: 1}}
	p2[0].Call, p2[0].Return = 500, 510
	p2[1].Call, p2[1].Return = 500, 510
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{poster, p1, p2})
	require.Len(t, lost, 1)
	require.Equal(t, core.Holder("h1"), lost[0].Holder)
	actions, ordered := inOrder(lines)
	require.Equal(t, []string{"Post", "Claim", "Plan", "RunStart"}, actions, "p2's Plan kept, p1's left out")
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err, "the trace of what storage kept")
}

// lostLeaseHistories is a refusal that read a Claim storage then lost
// (the rewind nemesis): p7 claimed t1 and planned a run; its Renew,
// called first and slowed, was still in flight when p9's Claim took the
// lapsed lease at tick 3; p7's RunStart read that Claim and was refused
// (StartFenced, lease h9); storage then lost p9's Claim, put the row back
// under p7's lease, and p7's Renew committed at tick 3. p9's history,
// recorded is false, lacks its Claim (its process died with it in
// flight).
func lostLeaseHistories(recorded bool) (stored []core.TraceEvent, histories [][]core.TraceEvent) {
	h7, h9 := core.Holder("h7"), core.Holder("h9")
	stored = []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p7", Holder: h7, Lease: h7},
		{Tick: 3, Action: core.ActionRenew, Thread: "t1", Proc: "p7", Holder: h7, Lease: h7},
	}
	poster := []core.TraceEvent{{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1, Call: 1, Return: 2}}
	p7 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p7", Holder: h7, Lease: h7, Call: 3, Return: 4},
		{Tick: 2, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p7", Holder: h7, Kind: core.PlanKindRun, Msg: 1, Call: 3, Return: 4},
		{Tick: 3, Read: true, Action: core.ActionStartFenced, Thread: "t1", Proc: "p7", Holder: h7, Msg: 1, Lease: h9, Call: 20, Return: 60},
		{Tick: 3, Action: core.ActionRenew, Thread: "t1", Proc: "p7", Holder: h7, Lease: h7, Call: 10, Return: 100},
	}
	var p9 []core.TraceEvent
	if recorded {
		p9 = []core.TraceEvent{{Tick: 3, Action: core.ActionClaim, Thread: "t1", Proc: "p9", Holder: h9, Lease: h9, Call: 30, Return: 90}}
	}
	return stored, [][]core.TraceEvent{poster, p7, p9}
}

// A refusal that read a Claim storage then lost is left out, and its
// round ends with a Crash after its last line kept, whether or not a
// history records the lost Claim: the lease it names is no Claim storage
// kept. Before, a Renew of the refused claim, called before the refusal,
// made the refusal look like a read of that Renew's state (recorded), or
// nothing told the refusal stale (unrecorded), and the trace was
// rejected with ~HasLease(p) and the history found not linearizable
// (soaks with the rewind nemesis, 1 in a few hundred).
func TestMergeHistoriesRefusalOfALostLease(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		stored, histories := lostLeaseHistories(recorded)
		lines, lost := tracecheck.MergeHistories(stored, histories)
		require.Len(t, lost, map[bool]int{true: 1, false: 0}[recorded])
		actions, ordered := inOrder(lines)
		require.Equal(t, []string{"Post", "Claim", "Plan", "Renew", "Crash"}, actions, "recorded %v: the refusal left out, p7's round ended by a Crash", recorded)
		_, err := tracecheck.Check(ordered)
		require.NoError(t, err, "recorded %v: the trace of what storage kept", recorded)
		_, err = tracecheck.CheckLinearizable(tracecheck.OperationsFromTrace(ordered), 10*time.Second, "")
		require.NoError(t, err, "recorded %v", recorded)
	}
}

// A refusal that names a lease storage kept is checked as it is, though
// not the lease storage had at its tick: a Store that refused from a
// stale state (here p2, which took the lapsed lease of h1 and then
// refused its own RunStart as if h1 still held it) is rejected.
func TestMergeHistoriesRefusalOfAKeptLease(t *testing.T) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 3, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2},
	}
	p1 := []core.TraceEvent{{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 3, Return: 4}}
	p2 := []core.TraceEvent{
		{Tick: 3, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2, Call: 10, Return: 20},
		{Tick: 3, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p2", Holder: h2, Kind: core.PlanKindRun, Msg: 1, Call: 10, Return: 20},
		{Tick: 3, Read: true, Action: core.ActionStartFenced, Thread: "t1", Proc: "p2", Holder: h2, Msg: 1, Lease: h1, Call: 30, Return: 40},
	}
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{p1, p2})
	require.Empty(t, lost)
	actions, ordered := inOrder(lines)
	require.Equal(t, []string{"Post", "Claim", "Claim", "Plan", "StartFenced"}, actions)
	_, err := tracecheck.Check(ordered)
	require.ErrorContains(t, err, "StartFenced by p2")
}

// A read at the tick of its own claim's kept write, called while that
// write was in flight, is taken as a read of that write, even when storage
// lost another write at that tick meanwhile: nothing in a Plan's line
// tells the two states apart. Here p7's Plan of message 2 is the Renew's
// state, and p7's RunStart of it, which storage kept and p7's history
// lacks (p7 was killed with it in flight), follows. (Leaving the Plan out
// as stale, as a version of the merge did, rejected that RunStart, and in
// a soak a kept SteerRecord after its Steer: `guard pc[p] = "steered"
// fails`.)
func TestMergeHistoriesReadWhileOwnWriteInFlight(t *testing.T) {
	h7 := core.Holder("h7")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2},
		{Tick: 3, Action: core.ActionClaim, Thread: "t1", Proc: "p7", Holder: h7, Lease: h7},
		{Tick: 4, Action: core.ActionRunStart, Thread: "t1", Proc: "p7", Holder: h7, Msg: 1, Run: 1, Taken: 1, Lease: h7},
		{Tick: 5, Action: core.ActionRunEnd, Thread: "t1", Proc: "p7", Holder: h7, Run: 1, Taken: 1},
		{Tick: 6, Action: core.ActionRenew, Thread: "t1", Proc: "p7", Holder: h7, Taken: 1, Lease: h7},
		{Tick: 7, Action: core.ActionRunStart, Thread: "t1", Proc: "p7", Holder: h7, Msg: 2, Run: 2, Taken: 2, Lease: h7},
	}
	poster := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1, Call: 1, Return: 2},
		{Tick: 2, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2, Call: 3, Return: 4},
		{Tick: 6, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 3, Taken: 1, Call: 40, Return: 45}, // lost
	}
	p7 := []core.TraceEvent{
		{Tick: 3, Action: core.ActionClaim, Thread: "t1", Proc: "p7", Holder: h7, Lease: h7, Call: 5, Return: 6},
		{Tick: 3, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p7", Holder: h7, Kind: core.PlanKindRun, Msg: 1, Call: 5, Return: 6},
		{Tick: 4, Action: core.ActionRunStart, Thread: "t1", Proc: "p7", Holder: h7, Msg: 1, Run: 1, Taken: 1, Lease: h7, Call: 7, Return: 8},
		{Tick: 5, Action: core.ActionRunEnd, Thread: "t1", Proc: "p7", Holder: h7, Run: 1, Taken: 1, Call: 9, Return: 10},
		{Tick: 6, Action: core.ActionRenew, Thread: "t1", Proc: "p7", Holder: h7, Taken: 1, Lease: h7, Call: 30, Return: 100},
		{Tick: 6, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p7", Holder: h7, Kind: core.PlanKindRun, Msg: 2, Taken: 1, Call: 50, Return: 60},
	}
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{poster, p7})
	require.Len(t, lost, 1)
	actions, ordered := inOrder(lines)
	require.Equal(t, []string{"Post", "Post", "Claim", "Plan", "RunStart", "RunEnd", "Renew", "Plan", "RunStart"}, actions)
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err, "the trace of what storage kept")
}

// A read storage kept with the writes of its transaction (RunEndThenStart's
// Plan, before its RunStart) is in the trace once: with its process's
// times when the process traced it too, and pending when the process was
// killed before it could; the trace is valid either way.
func TestMergeHistoriesStoredRead(t *testing.T) {
	h1 := core.Holder("h1")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t", Proc: "poster", Msg: 1, Taken: 0},
		{Tick: 2, Action: core.ActionPost, Thread: "t", Proc: "poster", Msg: 2, Taken: 0},
		{Tick: 3, Action: core.ActionClaim, Thread: "t", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 4, Action: core.ActionRunStart, Thread: "t", Proc: "p1", Holder: h1, Msg: 1, Run: 1, Taken: 1, Lease: h1},
		{Tick: 5, Action: core.ActionRunEnd, Thread: "t", Proc: "p1", Holder: h1, Run: 1, Taken: 1},
		{Tick: 5, Read: true, Action: core.ActionPlan, Thread: "t", Proc: "p1", Holder: h1, Msg: 2, Taken: 1, Kind: "run"},
		{Tick: 6, Action: core.ActionRunStart, Thread: "t", Proc: "p1", Holder: h1, Msg: 2, Run: 2, Taken: 2, Lease: h1},
	}
	before := []core.TraceEvent{ // p1's lines until the transaction
		{Tick: 3, Read: true, Action: core.ActionPlan, Thread: "t", Proc: "p1", Holder: h1, Msg: 1, Taken: 0, Kind: "run", Call: 30, Return: 31},
	}
	whole := append(slices.Clone(before),
		core.TraceEvent{Tick: 5, Read: true, Action: core.ActionPlan, Thread: "t", Proc: "p1", Holder: h1, Msg: 2, Taken: 1, Kind: "run", Call: 50, Return: 60})
	for _, c := range []struct {
		name string
		p1   []core.TraceEvent
		call int64
	}{{"killed", before, 0}, {"alive", whole, 50}} {
		t.Run(c.name, func(t *testing.T) {
			lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{c.p1})
			require.Empty(t, lost)
			var plans []core.TraceEvent
			for _, l := range lines {
				if l.Action == core.ActionPlan && l.Tick == 5 {
					plans = append(plans, l)
				}
			}
			require.Len(t, plans, 1, "the transaction's Plan, once")
			require.Equal(t, c.call, plans[0].Call)
			tracecheck.Sort(lines)
			_, err := tracecheck.Check(lines)
			require.NoError(t, err)
		})
	}
}

// A history file reads back as it was written: each line's trace line
// with its call and return times. (The sixth mutation pass: a return
// read back as the call failed no test.)
func TestHistoryReadBack(t *testing.T) {
	evs := []core.TraceEvent{
		{Tick: 1, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "h1", Lease: "h1", Call: 10, Return: 20},
		{Tick: 1, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p1", Holder: "h1", Kind: core.PlanKindRun, Msg: 1, Call: 30, Return: 45},
	}
	var b bytes.Buffer
	w := tracecheck.NewHistoryWriter(&b)
	for _, ev := range evs {
		w.Trace(ev)
	}
	require.NoError(t, w.Err())
	got, err := tracecheck.ReadHistory(&b, "p1.history")
	require.NoError(t, err)
	require.Equal(t, evs, got)
}

// The histories of the stale-read corners: storage kept the first Post
// and p1's Claim, and p1's Plan read tick 3 at [planCall, planReturn].
// With lost, the poster's Post of message 2 at tick 3 (called at 30,
// returned at 40) was acknowledged and lost. With kept, storage kept a
// Post of message 2 at tick 3, called at keptCall.
func staleCornerHistories(planCall, planReturn int64, lost, kept bool, keptCall int64) (stored []core.TraceEvent, histories [][]core.TraceEvent) {
	h1 := core.Holder("h1")
	stored = []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
	}
	poster := []core.TraceEvent{{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1, Call: 1, Return: 2}}
	if lost {
		poster = append(poster, core.TraceEvent{Tick: 3, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2, Call: 30, Return: 40})
	}
	if kept {
		stored = append(stored, core.TraceEvent{Tick: 3, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2})
		poster = append(poster, core.TraceEvent{Tick: 3, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2, Call: keptCall, Return: keptCall + 10})
	}
	p1 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 20},
		{Tick: 3, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p1", Holder: h1, Kind: core.PlanKindRun, Msg: 1, Call: planCall, Return: planReturn},
	}
	return stored, [][]core.TraceEvent{poster, p1}
}

// The corners of a stale read (staleRead, lostByThread), each of which a
// mutant of the sixth mutation pass moved with no test failing. A read
// called before the lost write was, that returned after that write was
// called, may have seen it: stale. A read that returned before the lost
// write did saw it, though a write storage kept at that tick was called
// meanwhile (storage lost the write only after acknowledging it, so the
// kept one committed later): stale. A read at the tick of a write
// storage kept, no lost write recorded, called before that write was and
// returned after it was called, may have seen the kept write: not stale
// (one that returned before that write was called saw another write
// there, unrecorded and lost: TestMergeHistoriesReadOfAnUnrecordedLostWrite).
// A stale read is left out, and its claim's round ends with a Crash; one
// that is not is kept.
func TestMergeHistoriesStaleReadCorners(t *testing.T) {
	for _, c := range []struct {
		name                 string
		planCall, planReturn int64
		lost, kept           bool
		keptCall             int64
		want                 []string
	}{
		{"called before the lost write, returned after its call", 25, 35, true, false, 0, []string{"Post", "Claim", "Crash"}},
		{"returned before the lost write, a kept write called meanwhile", 37, 39, true, true, 35, []string{"Post", "Claim", "Crash", "Post"}},
		{"overlapping the kept write at its tick", 1000, 1020, false, true, 1010, []string{"Post", "Claim", "Post", "Plan"}},
	} {
		stored, histories := staleCornerHistories(c.planCall, c.planReturn, c.lost, c.kept, c.keptCall)
		lines, lost := tracecheck.MergeHistories(stored, histories)
		require.Len(t, lost, map[bool]int{true: 1, false: 0}[c.lost], c.name)
		actions, ordered := inOrder(lines)
		require.Equal(t, c.want, actions, c.name)
		_, err := tracecheck.Check(ordered)
		require.NoError(t, err, "%s: the trace of what storage kept", c.name)
	}
}

// A claim that lost a write and whose last line storage kept ended its
// round (here a Release that took the lost Renew's tick) gets no Crash
// from the merge: a Crash after the Release would be a line of an idle
// process. (The sixth mutation pass: the Crash added after any last
// line failed no test.)
func TestMergeHistoriesNoCrashAfterAnEndedRound(t *testing.T) {
	h1 := core.Holder("h1")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 3, Action: core.ActionRelease, Thread: "t1", Proc: "p1", Holder: h1},
	}
	poster := []core.TraceEvent{{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1, Call: 1, Return: 2}}
	p1 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 20},
		{Tick: 3, Action: core.ActionRenew, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 30, Return: 40}, // lost
		{Tick: 3, Action: core.ActionRelease, Thread: "t1", Proc: "p1", Holder: h1, Call: 50, Return: 60},
	}
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{poster, p1})
	require.Len(t, lost, 1)
	require.Equal(t, core.ActionRenew, lost[0].Action)
	actions, ordered := inOrder(lines)
	require.Equal(t, []string{"Post", "Claim", "Release"}, actions, "no Crash after the Release that ended the round")
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err, "the trace of what storage kept")
}

// A refusal that names no lease (nobody held it: another claim took the
// lapsed lease and released it) saw no lease storage lost: it is kept
// and checked as it is. (The sixth mutation pass: a refusal naming no
// lease taken for one that saw a lost Claim, left out and replaced by a
// Crash, failed no test.)
func TestMergeHistoriesRefusalOfNoLease(t *testing.T) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 3, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2},
		{Tick: 4, Action: core.ActionRelease, Thread: "t1", Proc: "p2", Holder: h2},
	}
	poster := []core.TraceEvent{{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1, Call: 1, Return: 2}}
	p1 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 20},
		{Tick: 2, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p1", Holder: h1, Kind: core.PlanKindRun, Msg: 1, Call: 10, Return: 20},
		{Tick: 4, Read: true, Action: core.ActionStartFenced, Thread: "t1", Proc: "p1", Holder: h1, Msg: 1, Call: 50, Return: 60},
	}
	p2 := []core.TraceEvent{
		{Tick: 3, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2, Call: 30, Return: 35},
		{Tick: 4, Action: core.ActionRelease, Thread: "t1", Proc: "p2", Holder: h2, Call: 40, Return: 45},
	}
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{poster, p1, p2})
	require.Empty(t, lost)
	actions, ordered := inOrder(lines)
	require.Equal(t, []string{"Post", "Claim", "Plan", "Claim", "Release", "StartFenced"}, actions, "the refusal of no lease kept")
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err)
}

// A Crash placed after its claim's write that committed late (the
// process could not learn the commit: it gave the round up first) takes
// that write's taken cursor with its tick: here the late write is a
// RunStart, which moved the cursor. (The sixth mutation pass: a Crash
// moved with its old cursor failed no test; TestMergeHistoriesCrashAfterLateWrite's
// late Renew moves no cursor.)
func TestMergeHistoriesCrashAfterLateStart(t *testing.T) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	stored := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		// The RunStart's COMMIT reached the server after p1's Crash read tick 2.
		{Tick: 3, Action: core.ActionRunStart, Thread: "t1", Proc: "p1", Holder: h1, Msg: 1, Run: 1, Taken: 1, Lease: h1},
		{Tick: 4, Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: h2, Lease: h2, Taken: 1},
	}
	p1 := []core.TraceEvent{
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1, Call: 10, Return: 20},
		{Tick: 2, Read: true, Action: core.ActionPlan, Thread: "t1", Proc: "p1", Holder: h1, Kind: core.PlanKindRun, Msg: 1, Call: 10, Return: 20},
		{Tick: 2, Read: true, Action: core.ActionCrash, Thread: "t1", Proc: "p1", Holder: h1, Call: 50, Return: 60},
	}
	lines, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{p1})
	require.Empty(t, lost)
	actions, ordered := inOrder(lines)
	require.Equal(t, []string{"Post", "Claim", "Plan", "RunStart", "Crash", "Claim"}, actions)
	require.Equal(t, core.Seq(1), ordered[4].Taken, "the Crash at the RunStart's tick, with its cursor")
	_, err := tracecheck.Check(ordered)
	require.NoError(t, err, "the Crash after the late RunStart")
}
