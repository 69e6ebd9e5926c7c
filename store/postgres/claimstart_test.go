package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// A run started with its claim (ClaimThenStart, claimSQL's start) leaves
// the trace and the storage that ClaimThenPlan and then RunStart leave:
// the same lines, Claim, Plan and RunStart, at the same ticks, with the
// same fields, on two threads driven alike, one with the start in the
// claim and one without; and the thread's run, taken cursor and version
// alike. It starts from a Store's cache of the thread and, in the first
// round, from the log of a thread the Store never read; the three lines
// share the transaction's call and return, and without stored trace
// lines the claim with its start is one round trip. With stored trace
// lines (KeepTrace) all three are stored.
func TestClaimThenStartInTheClaim(t *testing.T) {
	t.Parallel() // schemas of their own
	eachReadMode(t, func(t *testing.T, opts Options) {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
				ctx := testCtx(t)
				schema := testSchema(t)
				opts.Schema, opts.KeepTrace = schema, keep
				s := openStoreWith(t, poolConfig(t, "tc-start"), opts)
				poster := newProc(openStore(t, poolConfig(t, "tc-poster"), schema), "poster")
				rec := &tracecheck.Recorder{}
				a := newProc(s, "a", core.WithTracer(rec))
				round := func(id core.ThreadID, holder core.Holder, msg string, inClaim bool) []core.TraceEvent {
					t.Helper()
					_, err := poster.ws.Post(ctx, id, msg)
					require.NoError(t, err)
					s.noClaimStart = !inClaim
					defer func() { s.noClaimStart = false }()
					n, trips := rec.Len(), s.stats.roundTrips.Load()
					c, p, run, err := a.ws.ClaimThenStart(ctx, id, holder, ttl)
					require.NoError(t, err)
					require.Equal(t, core.PlanRun, p.Kind, "%s: the plan", holder)
					claimTrips := s.stats.roundTrips.Load() - trips
					if !inClaim {
						require.Zero(t, run, "%s: a run started with the claim", holder)
						run, err = a.ws.RunStart(ctx, c, p.Message)
						require.NoError(t, err)
					} else {
						require.Equal(t, p.Message, core.Seq(run), "%s: the run started with the claim (one run a message here)", holder)
						got := rec.Lines()[n:]
						require.Len(t, got, 3, "%s: Claim, Plan and RunStart", holder)
						for _, l := range got[1:] {
							require.Equal(t, [2]int64{got[0].Call, got[0].Return}, [2]int64{l.Call, l.Return}, "%s: %s's call and return", holder, l.Action)
						}
						if !keep {
							require.Equal(t, int64(1), claimTrips, "%s: round trips of the claim with its start", holder)
						}
					}
					th, err := a.ws.Thread(ctx, id)
					require.NoError(t, err)
					r, ok := th.Run(run)
					require.True(t, ok)
					require.Equal(t, [3]any{core.StateActive, holder, p.Message}, [3]any{r.State, r.Holder, th.Taken}, "%s: the run and the taken cursor", holder)
					require.NoError(t, a.ws.RunEnd(ctx, c, run, "out"))
					require.NoError(t, a.ws.Release(ctx, c))
					return rec.Lines()[n:]
				}
				for _, id := range []core.ThreadID{"in", "apart"} {
					require.NoError(t, poster.ws.CreateThread(ctx, id))
				}
				var in, apart []core.TraceEvent
				for i := 1; i <= 3; i++ {
					// The first round reads the thread whole: no cache to start from.
					in = append(in, round("in", core.Holder(fmt.Sprintf("in-%d", i)), "m", true)...)
					apart = append(apart, round("apart", core.Holder(fmt.Sprintf("apart-%d", i)), "m", false)...)
				}
				require.Equal(t, sameFields(apart, "apart-", "in-"), sameFields(in, "", ""), "the lines of the start in the claim and apart")
				var states [2][3]uint64
				for i, id := range []core.ThreadID{"in", "apart"} {
					th, err := a.ws.Thread(ctx, id)
					require.NoError(t, err)
					states[i] = [3]uint64{th.Version, uint64(th.Taken), uint64(th.LastRun())}
				}
				require.Equal(t, states[1], states[0], "the threads' version, taken cursor and runs")
				require.Equal(t, uint64(3), states[0][2])
				if keep {
					stored, err := s.TraceLines(ctx)
					require.NoError(t, err)
					starts := map[core.ThreadID]int{}
					for _, l := range stored {
						if l.Action == core.ActionRunStart {
							starts[l.Thread]++
						}
					}
					require.Equal(t, map[core.ThreadID]int{"in": 3, "apart": 3}, starts, "RunStart lines stored")
				}
			})
		}
	})
}

// sameFields is lines as TestClaimThenStartInTheClaim compares them:
// each line's action, tick, message, run, taken cursor, lease and plan
// kind, with holder prefix from replaced by to.
func sameFields(lines []core.TraceEvent, from, to string) []string {
	var out []string
	for _, l := range lines {
		lease := string(l.Lease)
		if from != "" && len(lease) > len(from) && lease[:len(from)] == from {
			lease = to + lease[len(from):]
		}
		out = append(out, fmt.Sprintf("%s tick=%d msg=%d run=%d taken=%d lease=%s kind=%s", l.Action, l.Tick, l.Msg, l.Run, l.Taken, lease, l.Kind))
	}
	return out
}

// ClaimThenStart starts nothing with the claim unless the thread's log
// holds only posts after the Store's cache of it, and nothing when a
// run is active or the start's fence is off: another process's round
// since the cache, a run a crashed holder left active (the plan is then
// to abandon it), and a Workspace with the start fence off each get the
// plan alone, the start left to RunStart (or to the abandon first). A
// claim that finds the lease held starts nothing and writes nothing.
func TestClaimThenStartOnlyWhenOnlyPostsFollow(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := testSchema(t)
	s := openStore(t, poolConfig(t, "tc-start"), schema)
	other := newProc(openStore(t, poolConfig(t, "tc-other"), schema), "other")
	a := newProc(s, "a")
	cached := func(id core.ThreadID) {
		t.Helper()
		require.NoError(t, other.ws.CreateThread(ctx, id))
		_, err := other.ws.Post(ctx, id, "m1")
		require.NoError(t, err)
		c, run := a.startRun(t, id, core.Holder(id+"-first"))
		require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
		require.NoError(t, a.ws.Release(ctx, c))
		_, err = other.ws.Post(ctx, id, "m2")
		require.NoError(t, err)
	}
	apart := func(p *proc, id core.ThreadID, holder core.Holder, kind core.PlanKind) {
		t.Helper()
		_, pl, run, err := p.ws.ClaimThenStart(ctx, id, holder, ttl)
		require.NoError(t, err)
		require.Zero(t, run, "%s: a run started with the claim", id)
		require.Equal(t, kind, pl.Kind, "%s: the plan", id)
	}

	cached("others-round")
	c, run := other.startRun(t, "others-round", "other-1")
	require.NoError(t, other.ws.RunEnd(ctx, c, run, ""))
	require.NoError(t, other.ws.Release(ctx, c))
	_, err := other.ws.Post(ctx, "others-round", "m3")
	require.NoError(t, err)
	apart(a, "others-round", "a-1", core.PlanRun)

	cached("fence-off")
	off := newProc(s, "off", core.WithFencesForTesting(core.Fences{Reply: true, Abandon: true}))
	apart(off, "fence-off", "off-1", core.PlanRun)

	cached("busy")
	refusedBusy(t, other, a, "busy")

	cached("crashed")
	c, _ = a.startRun(t, "crashed", "a-crashed")
	require.NoError(t, a.ws.Crash(ctx, c))
	_, err = other.ws.Post(ctx, "crashed", "m3")
	require.NoError(t, err)
	a.clock.Advance(2 * ttl)
	apart(a, "crashed", "a-2", core.PlanAbandon)
}

// A claim with its run's start (ClaimThenStart), on a Store that keeps
// trace lines, whose COMMIT's reply is lost after the server committed
// (from the Store's cache of the thread, or from its log, cold):
// storage's log holds the Claim, the Plan and the RunStart, and the
// round's Crash learns from it that the claim committed, and traces the
// Plan before its own line, at the start's version. The trace as the
// fleet merges it is accepted.
func TestClaimThenStartUnknownWhenReplyLost(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, cold := range []bool{false, true} {
		t.Run(fmt.Sprintf("cold=%v", cold), func(t *testing.T) {
			t.Parallel()
			claimThenStartReplyLost(t, cold)
		})
	}
}

// claimThenStartReplyLost is TestClaimThenStartUnknownWhenReplyLost,
// on a thread the Store has cached, or (cold) never read.
func claimThenStartReplyLost(t *testing.T, cold bool) {
	// Its own deadline: a fault injected at the wrong round trip would
	// otherwise leave a read waiting for go test's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var armed atomic.Bool
	// The reply lost is the second round trip's, the one with COMMIT
	// (the first, BEGIN and the claim, leaves the transaction open):
	// the second write once armed.
	var writes atomic.Int32
	s := lossyStore(t, testSchema(t), &armed, func([]byte) bool { return armed.Load() && writes.Add(1) == 2 })
	s.keepTrace = true
	rec, doubts := &tracecheck.Recorder{}, &[]core.Doubt{}
	a := newProc(s, "a", core.WithTracer(rec), core.WithDoubts(func(d core.Doubt) { *doubts = append(*doubts, d) }))
	round := func(id core.ThreadID, h core.Holder) core.RunID {
		t.Helper()
		_, err := a.ws.Post(ctx, id, "m")
		require.NoError(t, err)
		c, p, started, err := a.ws.ClaimThenStart(ctx, id, h, ttl)
		require.NoError(t, err)
		run := started
		if run == 0 {
			run, err = a.ws.RunStart(ctx, c, p.Message)
			require.NoError(t, err)
		}
		require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
		require.NoError(t, a.ws.Release(ctx, c))
		return started
	}
	// A round on each thread leaves it cached ("t" only when not cold);
	// "warm"'s second prepares the statements of a claim with its start
	// on the connection.
	for _, id := range []core.ThreadID{"warm", "t"} {
		require.NoError(t, a.ws.CreateThread(ctx, id))
		if id != "t" || !cold {
			round(id, core.Holder(id+"-1"))
		}
	}
	require.NotZero(t, round("warm", "warm-2"), "the start with the claim")
	_, err := a.ws.Post(ctx, "t", "m")
	require.NoError(t, err)

	armed.Store(true)
	c, _, run, err := a.ws.ClaimThenStart(ctx, "t", "ha", ttl)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.Zero(t, run)
	require.False(t, armed.Load(), "the claim's round trips were sent")
	t.Logf("ClaimThenStart whose COMMIT's reply was lost: %v", err)
	require.NoError(t, a.ws.Crash(ctx, c))

	kept, all, trace := keptAndMerged(t, s, rec, "t", "ha")
	require.Len(t, kept, 3)
	var v int
	_, err = fmt.Sscanf(kept[0], "Claim@%d", &v)
	require.NoError(t, err, "the first line kept: %s", kept[0])
	at := func(a string, tick int) string { return fmt.Sprintf("%s@%d", a, tick) }
	require.Equal(t, []string{at("Claim", v), at("Plan", v), at("RunStart", v+1)}, kept, "storage kept the claim, its plan and its start")
	require.Equal(t, []string{at("Claim", v), at("Plan", v), at("RunStart", v+1), at("Crash", v+1)}, all)
	var own []string
	for _, l := range rec.Lines() {
		if l.Thread == "t" && l.Holder == "ha" {
			own = append(own, at(string(l.Action), int(l.Tick)))
		}
	}
	require.Equal(t, []string{at("Plan", v), at("Crash", v+1)}, own, "the process's own lines: the Plan its Crash learned of, then the Crash")
	_, err = tracecheck.Check(trace)
	require.NoError(t, err, "the trace as storage and the process left it")
	require.Len(t, *doubts, 2)
	require.Equal(t, core.Doubt{Proc: "a", Thread: "t", Holder: "ha", Action: core.ActionClaim, Tick: uint64(v), Outcome: core.DoubtCommitted, Crashed: true}, (*doubts)[1])
}

// A Store with no cache of a thread starts the claim's run from the
// thread's log, read whole with the claim: when the log has no run
// active and no request open, and a message not taken, the claim starts
// the run core plans, run ids counted on from the log's, in the claim's
// one round trip. A request left open (the plan is a reply), a run a
// crashed holder left active (the plan is to abandon it), nothing left
// to take, a row whose log_n an older binary left behind its log, or
// the start's fence off each get the plan alone; a claim
// that finds the lease held starts nothing and writes nothing. Every
// thread's log folds afterwards on a Store that never saw it.
func TestClaimThenStartFromTheLog(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	schema := testSchema(t)
	other := newProc(openStore(t, poolConfig(t, "tc-log-other"), schema), "other")
	s := openStoreWith(t, poolConfig(t, "tc-log-cold"), Options{Schema: schema, CachedThreads: -1})
	cold := newProc(s, "cold")
	post := func(id core.ThreadID, n int) {
		t.Helper()
		for range n {
			_, err := other.ws.Post(ctx, id, "m")
			require.NoError(t, err)
		}
	}
	// runs has other post a message and run and end it, n times on
	// thread id, asking a request in the last when ask is set, and
	// answering it in a round of its own when answer is set.
	runs := func(id core.ThreadID, n int, ask, answer bool) {
		t.Helper()
		for i := range n {
			post(id, 1)
			c, run := other.startRun(t, id, core.Holder(fmt.Sprintf("%s-other-%d", id, i)))
			if ask && i == n-1 {
				_, err := other.ws.Ask(ctx, c, run, "q")
				require.NoError(t, err)
			}
			require.NoError(t, other.ws.RunEnd(ctx, c, run, "out"))
			require.NoError(t, other.ws.Release(ctx, c))
		}
		if answer { // a later round's reply, on a message posted for it
			post(id, 1)
			c, p, err := other.ws.ClaimThenPlan(ctx, id, core.Holder(id+"-other-reply"), ttl)
			require.NoError(t, err)
			require.Equal(t, core.PlanReply, p.Kind)
			require.NoError(t, other.ws.Reply(ctx, c, p.Request, p.Message))
			p, err = other.ws.Plan(ctx, c)
			require.NoError(t, err)
			require.Equal(t, core.PlanNothing, p.Kind)
			require.NoError(t, other.ws.Release(ctx, c))
		}
	}
	// claim claims id with its start on the cold Store and checks the
	// plan's kind and the run started with the claim (0: none).
	claim := func(p *proc, id core.ThreadID, kind core.PlanKind, want core.RunID) {
		t.Helper()
		trips := s.stats.roundTrips.Load()
		c, pl, run, err := p.ws.ClaimThenStart(ctx, id, core.Holder(id+"-cold"), ttl)
		require.NoError(t, err, "%s: the claim", id)
		require.Equal(t, kind, pl.Kind, "%s: the plan", id)
		require.Equal(t, want, run, "%s: the run started with the claim", id)
		for _, r := range pl.Runs { // PlanAbandon's
			require.NoError(t, p.ws.Abandon(ctx, c, r))
		}
		if run == 0 {
			require.NoError(t, p.ws.Crash(ctx, c)) // the round ends here, its plan left
			return
		}
		require.Equal(t, int64(1), s.stats.roundTrips.Load()-trips, "%s: round trips of the claim with its start", id)
		require.NoError(t, p.ws.RunEnd(ctx, c, run, "out"))
		require.NoError(t, p.ws.Release(ctx, c))
	}
	for _, id := range []core.ThreadID{"fresh", "ended", "asked", "answered", "crashed", "taken", "old-post", "fence-off", "busy"} {
		require.NoError(t, other.ws.CreateThread(ctx, id))
	}

	post("fresh", 2)
	claim(cold, "fresh", core.PlanRun, 1)

	runs("ended", 2, false, false)
	post("ended", 1)
	claim(cold, "ended", core.PlanRun, 3)

	runs("asked", 1, true, false)
	post("asked", 1)
	claim(cold, "asked", core.PlanReply, 0)

	runs("answered", 1, true, true)
	post("answered", 1)
	claim(cold, "answered", core.PlanRun, 2)

	post("crashed", 1)
	c, _ := other.startRun(t, "crashed", "crashed-other")
	require.NoError(t, other.ws.Crash(ctx, c))
	post("crashed", 1)
	cold.clock.Advance(2 * ttl)
	claim(cold, "crashed", core.PlanAbandon, 0)
	other.clock.Advance(2 * ttl) // the clocks agree again

	runs("taken", 1, false, false)
	claim(cold, "taken", core.PlanNothing, 0)

	// An older binary's post (before migration 0008) leaves the row's
	// log_n behind its log: the log is not the row's to start from.
	post("old-post", 1)
	olderBinaryPost(t, schema, "old-post")
	claim(cold, "old-post", core.PlanRun, 0)

	post("fence-off", 1)
	off := newProc(s, "off", core.WithFencesForTesting(core.Fences{Reply: true, Abandon: true}))
	claim(off, "fence-off", core.PlanRun, 0)

	post("busy", 1)
	refusedBusy(t, other, cold, "busy")

	foldsFromScratch(t, schema, map[core.ThreadID]core.RunID{"fresh": 1, "ended": 3, "asked": 1, "answered": 2, "crashed": 1, "taken": 1,
		"old-post": 0, "fence-off": 0, "busy": 0})
}

// olderBinaryPost posts a message on thread id as a binary before
// migration 0008 did: the event and the row's version and last_message,
// with the row's log_n left as it was.
func olderBinaryPost(t *testing.T, schema string, id core.ThreadID) {
	t.Helper()
	ctx := testCtx(t)
	q := pgx.Identifier{schema}.Sanitize()
	_, err := admin(t).Exec(ctx, `INSERT INTO `+q+`.events (thread_id, seq, version, kind, at, message, text)
		SELECT id, log_n + 1, version + 1, 'message_posted', log_at, last_message + 1, 'm' FROM `+q+`.threads WHERE id = $1`, string(id))
	require.NoError(t, err)
	_, err = admin(t).Exec(ctx, `UPDATE `+q+`.threads SET version = version + 1, last_message = last_message + 1 WHERE id = $1`, string(id))
	require.NoError(t, err)
}

// foldsFromScratch checks that each thread's log folds on a Store that
// never saw it, with the runs runs, none of them active.
func foldsFromScratch(t *testing.T, schema string, runs map[core.ThreadID]core.RunID) {
	t.Helper()
	fresh := newProc(openStore(t, poolConfig(t, "tc-log-fresh"), schema), "fresh")
	for id, n := range runs {
		th, err := fresh.ws.Thread(context.Background(), id)
		require.NoError(t, err, "%s folds from scratch", id)
		require.Equal(t, n, th.LastRun(), "%s: its runs", id)
		require.Empty(t, th.ActiveRuns(), "%s: its active runs", id)
	}
}

// refusedBusy has holder claim thread id, and then p claim it with its
// start: p's claim must be refused as busy, start nothing and write
// nothing. holder releases the thread after.
func refusedBusy(t *testing.T, holder, p *proc, id core.ThreadID) {
	t.Helper()
	ctx := testCtx(t)
	c, err := holder.ws.Claim(ctx, id, core.Holder(id+"-"+core.ThreadID(holder.ws.Process())), ttl)
	require.NoError(t, err)
	before, err := holder.ws.Thread(ctx, id)
	require.NoError(t, err)
	_, _, run, err := p.ws.ClaimThenStart(ctx, id, core.Holder(id+"-"+core.ThreadID(p.ws.Process())), ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	require.Zero(t, run)
	after, err := holder.ws.Thread(ctx, id)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{before.Version, uint64(before.LastRun())}, [2]uint64{after.Version, uint64(after.LastRun())}, "a refused claim wrote nothing")
	require.NoError(t, holder.ws.Release(ctx, c))
}
