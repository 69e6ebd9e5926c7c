package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// A Claim decided in the server (ClaimLease, claimSQL) and the Claim that
// reads the thread first take the same decisions and leave the same
// storage, in both read modes, with and without stored trace lines: a
// free thread claimed; a live lease refused (ErrThreadBusy), up to the
// microsecond before its expiry; the holder of the lease refused
// (ErrInvalidArgument), its lease live or lapsed; a lease claimed at its expiry exactly, the lapsed
// lease's expiry in the line; a holder used before refused
// (ErrHolderReused); an unknown thread; and ClaimThenPlan's plan from the
// thread as the claim found it. Every refusal writes nothing. Without
// stored trace lines, every Claim decided in the server is one round trip.
func TestClaimInOneStatement(t *testing.T) {
	t.Parallel() // a schema of its own
	eachReadMode(t, func(t *testing.T, opts Options) {
		for _, keep := range []bool{false, true} {
			opts.KeepTrace = keep
			s := newStoreWith(t, opts)
			s.readClaim = true
			read := claimStory(t, s, "read")
			require.Zero(t, s.stats.serverClaims.Load())
			s.readClaim = false
			oneStatement := claimStory(t, s, "server")
			require.Equal(t, int64(9), s.stats.serverClaims.Load(), "every Claim of the story decided in the server")
			oneTrip := int64(9) // without stored trace lines, each the transaction's one round trip
			if keep {
				oneTrip = 0
			}
			require.Equal(t, oneTrip, s.stats.oneTripClaims.Load())
			require.Equal(t, read, oneStatement, "keep trace %v", keep)
			if keep {
				stored, err := s.TraceLines(context.Background())
				require.NoError(t, err)
				claims := 0
				for _, l := range stored {
					if l.Action == core.ActionClaim {
						claims++
					}
				}
				require.Equal(t, 6, claims, "each path's three Claims stored")
			}
		}
	})
}

// claimStory runs the Claims of TestClaimInOneStatement on a thread of
// its own and says what each did: its error's kind, its trace line (the
// fields a Claim's line has), and the thread's row after it.
func claimStory(t *testing.T, s *Store, id core.ThreadID) []string {
	t.Helper()
	ctx := testCtx(t)
	look := admin(t)
	rec := &tracecheck.Recorder{}
	a, b, c := newProc(s, "a", core.WithTracer(rec)), newProc(s, "b", core.WithTracer(rec)), newProc(s, "c", core.WithTracer(rec))
	require.NoError(t, a.ws.CreateThread(ctx, id))
	_, err := a.ws.Post(ctx, id, "m1")
	require.NoError(t, err)
	var story []string
	step := func(name string, p *proc, holder core.Holder, want error) {
		t.Helper()
		n := rec.Len()
		_, err := p.ws.Claim(ctx, id, holder, ttl)
		if want == nil {
			require.NoError(t, err, name)
		} else {
			require.ErrorIs(t, err, want, name)
		}
		line := "no line"
		if rec.Len() > n {
			l := rec.Lines()[rec.Len()-1]
			line = fmt.Sprintf("%s tick %d holder %s taken %d expires %d replaced %d", l.Action, l.Tick, l.Holder, l.Taken, l.Expires, l.Replaced)
		}
		kind := "ok"
		for _, e := range []error{core.ErrThreadBusy, core.ErrInvalidArgument, core.ErrHolderReused, core.ErrUnknownThread} {
			if errors.Is(err, e) {
				kind = e.Error()
			}
		}
		story = append(story, fmt.Sprintf("%s: %s; %s; row %s", name, kind, line, rowText(readRow(t, look, s.Schema(), id))))
	}
	step("free", a, "ha", nil)
	step("live", b, "hb", core.ErrThreadBusy)
	step("its holder", b, "ha", core.ErrInvalidArgument)
	b.clock.Advance(ttl - time.Microsecond)
	step("a microsecond before the expiry", b, "hb", core.ErrThreadBusy)
	b.clock.Advance(time.Microsecond)
	step("its holder, its lease lapsed", b, "ha", core.ErrInvalidArgument)
	step("at the expiry", b, "hb2", nil)
	c.clock.Advance(3 * ttl)
	step("a holder used before", c, "ha", core.ErrHolderReused)
	_, err = c.ws.Claim(ctx, id+"-none", "hc", ttl)
	require.ErrorIs(t, err, core.ErrUnknownThread)
	_, err = c.ws.Post(ctx, id, "m2")
	require.NoError(t, err)
	cl, plan, err := c.ws.ClaimThenPlan(ctx, id, "hc", ttl)
	require.NoError(t, err, "ClaimThenPlan over b's lapsed lease")
	require.Equal(t, [2]int{int(core.PlanRun), 1}, [2]int{int(plan.Kind), int(plan.Message)})
	story = append(story, fmt.Sprintf("ClaimThenPlan: %+v; row %s", plan, rowText(readRow(t, look, s.Schema(), id))))
	_, err = c.ws.RunStart(ctx, cl, plan.Message)
	require.NoError(t, err, "a write under the claim")
	th, err := c.ws.Thread(ctx, id)
	require.NoError(t, err)
	return append(story, fmt.Sprintf("thread: version %d taken %d messages %d runs %d", th.Version, th.Taken, len(th.Messages), len(th.Runs())))
}

// rowText is r as text, its lease's holder included.
func rowText(r rowState) string {
	holder := "none"
	if r.holder != nil {
		holder = *r.holder
	}
	return fmt.Sprintf("version %d taken %d last %d active %d lease %s until %v, %d events, %d messages",
		r.version, r.taken, r.lastMessage, r.activeRuns, holder, r.expires, r.events, r.messages)
}

// Claims decided in the server race for a thread whose lease lapsed,
// let go at once: each waits on the row's lock while the first holds it,
// then finds the first's live lease. Exactly one wins each race, its line
// names the lapsed lease's expiry, the row's version moved by one, and
// holders has the lapsed holder and the winner alone. (Without the lock
// on the row claimSQL reads, a claimant that read the lapsed lease before
// the first committed wrote over its claim: two winners.)
func TestClaimRaceOverLapsedLease(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStoreWith(t, Options{})
	look := admin(t)
	a := newProc(s, "a")
	const n, races = 8, 5
	for r := range races {
		id := core.ThreadID(fmt.Sprintf("t%d", r))
		require.NoError(t, a.ws.CreateThread(ctx, id))
		_, err := a.ws.Post(ctx, id, "m1")
		require.NoError(t, err)
		first := core.Holder(fmt.Sprintf("h0-%d", r))
		_, err = a.ws.Claim(ctx, id, first, ttl)
		require.NoError(t, err)
		before := readRow(t, look, s.Schema(), id)
		recs := make([]*tracecheck.Recorder, n)
		errs := make([]error, n)
		holder := func(i int) core.Holder { return core.Holder(fmt.Sprintf("h%d-%d", i+1, r)) }
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			recs[i] = &tracecheck.Recorder{}
			p := newProc(s, fmt.Sprintf("p%d", i), core.WithTracer(recs[i]))
			p.clock.Advance(2 * ttl)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = p.ws.Claim(ctx, id, holder(i), ttl)
			}()
		}
		close(start)
		waitWithin(t, &wg, 30*time.Second, fmt.Sprintf("%d claims at once on thread %s", n, id))
		var won []int
		for i, err := range errs {
			if err == nil {
				won = append(won, i)
				continue
			}
			require.ErrorIs(t, err, core.ErrThreadBusy, "race %d, claimant %d", r, i)
			require.Empty(t, recs[i].Lines(), "a refused claim traces nothing")
		}
		require.Len(t, won, 1, "race %d: exactly one claim wins", r)
		w := won[0]
		require.Len(t, recs[w].Lines(), 1)
		line := recs[w].Lines()[0]
		require.Equal(t, before.version+1, int64(line.Tick), "the winner's line is at the next version")
		require.Equal(t, epoch.Add(ttl).UnixNano(), line.Replaced, "the winner replaced the first's lapsed lease")
		after := readRow(t, look, s.Schema(), id)
		require.Equal(t, before.version+1, after.version, "one claim, one version")
		require.Equal(t, string(holder(w)), *after.holder)
		rows, err := look.Query(ctx, `SELECT holder FROM `+pgx.Identifier{s.Schema()}.Sanitize()+`.holders WHERE key = $1`, string(id))
		require.NoError(t, err)
		holders, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.ElementsMatch(t, []string{string(first), string(holder(w))}, holders)
	}
}
