package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// With KeepTrace, every committed write's trace line is stored by the
// write's own transaction; refusals, reads and rolled-back writes are not.
func TestKeepTrace(t *testing.T) {
	ctx := testCtx(t)
	schema := testSchema(t)
	s, err := Open(ctx, databaseURL(t), Options{Schema: schema, KeepTrace: true})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	rec := &tracecheck.Recorder{}
	clock := coretest.NewClock(time.Unix(0, 0))
	a := core.NewWorkspace(s, clock, core.WithProcess("a"), core.WithTracer(rec))
	b := core.NewWorkspace(s, clock, core.WithProcess("b"), core.WithTracer(rec))
	require.NoError(t, a.CreateThread(ctx, "t"))
	_, err = a.Post(ctx, "t", "m1")
	require.NoError(t, err)
	ca, err := a.Claim(ctx, "t", "ha", time.Second)
	require.NoError(t, err)
	_, err = a.Plan(ctx, ca)
	require.NoError(t, err)
	clock.Advance(time.Second)
	cb, err := b.Claim(ctx, "t", "hb", time.Second)
	require.NoError(t, err)
	_, err = a.RunStart(ctx, ca, 1)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	_, err = b.Plan(ctx, cb)
	require.NoError(t, err)
	run, err := b.RunStart(ctx, cb, 1)
	require.NoError(t, err)
	require.NoError(t, b.RunEnd(ctx, cb, run, ""))
	require.ErrorIs(t, b.RunEnd(ctx, cb, run, ""), core.ErrOutOfOrder) // refused: nothing stored

	var writes []core.TraceEvent
	for _, l := range rec.Lines() {
		if !l.Read {
			l.Call, l.Return = 0, 0
			writes = append(writes, l)
		}
	}
	require.Len(t, writes, 5) // Post, Claim, Claim, RunStart, RunEnd
	stored, err := s.TraceLines(ctx)
	require.NoError(t, err)
	require.Equal(t, writes, stored)

	// A store that does not keep traces stores none.
	plain := openStore(t, poolConfig(t, "plain"), schema)
	w := core.NewWorkspace(plain, clock, core.WithTracer(rec))
	_, err = w.Post(ctx, "t", "m2")
	require.NoError(t, err)
	stored, err = s.TraceLines(ctx)
	require.NoError(t, err)
	require.Len(t, stored, 5)
}

// LoggedTrace reads back the line a committed write logged at a tick (the
// Crash after a write whose commit was unknown asks it), and nothing for
// a tick no write logged, or from a Store that keeps no traces.
func TestLoggedTrace(t *testing.T) {
	ctx := testCtx(t)
	schema := testSchema(t)
	s, err := Open(ctx, databaseURL(t), Options{Schema: schema, KeepTrace: true})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	rec := &tracecheck.Recorder{}
	a := core.NewWorkspace(s, coretest.NewClock(time.Unix(0, 0)), core.WithProcess("a"), core.WithTracer(rec))
	require.NoError(t, a.CreateThread(ctx, "t"))
	c, err := a.Claim(ctx, "t", "ha", time.Second)
	require.NoError(t, err)
	claim := rec.Lines()[rec.Len()-1]
	claim.Call, claim.Return = 0, 0
	logged := func(s *Store, tick uint64) (core.TraceEvent, bool) {
		var ev core.TraceEvent
		var ok bool
		require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
			if _, err := tx.Thread(ctx, "t"); err != nil {
				return err
			}
			var err error
			ev, ok, err = tx.(core.TraceLogReader).LoggedTrace(ctx, "t", tick)
			return err
		}))
		return ev, ok
	}
	ev, ok := logged(s, claim.Tick)
	require.True(t, ok)
	require.Equal(t, claim, ev)
	_, ok = logged(s, claim.Tick+1)
	require.False(t, ok, "no write at that tick yet")
	require.NoError(t, a.Release(ctx, c))
	ev, ok = logged(s, claim.Tick+1)
	require.True(t, ok)
	require.Equal(t, core.ActionRelease, ev.Action)
	plain := openStore(t, poolConfig(t, "plain"), schema)
	_, ok = logged(plain, claim.Tick)
	require.False(t, ok, "a Store that keeps no traces reads none back")
}

// A read of the trace lines that the server fails is an error, not fewer
// lines: here the trace_lines the Store reads is a view whose second
// line fails (a division by zero) as the server evaluates it. (The
// mutant: TraceLines ignoring the rows' error, which returned no line
// and no error, failed no test; tracecheck fleet would have checked a
// trace with lines missing.)
func TestTraceLinesReadFails(t *testing.T) {
	ctx := testCtx(t)
	s := newStoreWith(t, Options{KeepTrace: true})
	ws := core.NewWorkspace(s, core.SystemClock{}, core.WithTracer(&tracecheck.Recorder{}))
	require.NoError(t, ws.CreateThread(ctx, "t"))
	for _, m := range []string{"m1", "m2"} {
		_, err := ws.Post(ctx, "t", m)
		require.NoError(t, err)
	}
	lines, err := s.TraceLines(ctx)
	require.NoError(t, err)
	require.Len(t, lines, 2, "the two posts' lines")
	q := pgx.Identifier{s.Schema()}.Sanitize()
	_, err = admin(t).Exec(ctx, `ALTER TABLE `+q+`.trace_lines RENAME TO trace_lines_kept;
CREATE VIEW `+q+`.trace_lines AS
	SELECT thread_id, tick, read, CASE WHEN tick = (SELECT max(tick) FROM `+q+`.trace_lines_kept) THEN (line::text || (1/(tick - tick))::text)::jsonb ELSE line END AS line
	FROM `+q+`.trace_lines_kept`)
	require.NoError(t, err)
	lines, err = s.TraceLines(ctx)
	require.ErrorContains(t, err, "division by zero", "read %d lines", len(lines))
}
