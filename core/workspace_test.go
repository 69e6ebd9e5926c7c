package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// The Workspace's corners that only a storage that lost commits, a
// storage whose cursor write fails, or reads copied out of storage
// reach: tests from the tenth mutation pass (7 Dec 2026), each of which
// fails with the mutant its comment names, where no test failed before.

// claimedPlanned returns a Workspace over s (the clock at epoch, and
// opts) with thread "t", the posts given, claimed by holder "ha", and the
// claim's first plan.
func claimedPlanned(t *testing.T, s core.Storage, posts []string, opts ...core.Option) (*core.Workspace, core.Claim, core.Plan) {
	t.Helper()
	ctx := context.Background()
	ws := core.NewWorkspace(s, coretest.NewClock(epoch), opts...)
	require.NoError(t, ws.CreateThread(ctx, "t"))
	for _, m := range posts {
		_, err := ws.Post(ctx, "t", m)
		require.NoError(t, err)
	}
	c, err := ws.Claim(ctx, "t", "ha", ttl)
	require.NoError(t, err)
	p, err := ws.Plan(ctx, c)
	require.NoError(t, err)
	return ws, c, p
}

// refusedUnchanged requires write to fail with want and to leave thread
// "t" as it was (what: the failure's message otherwise).
func refusedUnchanged(t *testing.T, ws *core.Workspace, want error, what string, write func() error) {
	t.Helper()
	ctx := context.Background()
	before, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.ErrorIs(t, write(), want)
	after, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, before, after, what)
}

// failSaveStore is a storage whose transactions fail every SaveTaken
// with errSave, as a storage that cannot write its cursor does.
type failSaveStore struct{ core.Storage }

var errSave = errors.New("the cursor's write failed")

func (s failSaveStore) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, failSaveTx{tx})
	})
}

type failSaveTx struct{ core.Transaction }

func (failSaveTx) SaveTaken(context.Context, core.ThreadID, core.Seq) error { return errSave }

// A consuming write whose cursor's save fails returns that error and
// commits nothing: no run started on a message the cursor does not pass.
// (the tenth mutation pass: record swallowing SaveTaken's error failed no
// test)
func TestConsumingWriteFailsWithItsCursor(t *testing.T) {
	ctx := context.Background()
	ws, c, p := claimedPlanned(t, failSaveStore{memory.New()}, []string{"m1"})
	refusedUnchanged(t, ws, errSave, "a start whose cursor failed wrote", func() error {
		_, err := ws.RunStart(ctx, c, p.Message)
		return err
	})
}

// swapStore is a storage that can be swapped for another under the
// workspace over it: a copy taken earlier (memory.Store.Clone) stands for
// a storage that lost the commits made since.
type swapStore struct{ cur *core.Storage }

func (s swapStore) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return (*s.cur).Update(ctx, fn)
}

// A start planned at message 2 on a storage whose cursor is at 0 (it lost
// the commits of run 1's start and end: two behind the plan) is refused
// with ErrInconsistentLog and writes nothing: the start would leave
// message 1 behind the cursor, never consumed.
// (the tenth mutation pass: behind's test as msg > Taken+2 failed no test)
func TestStartRefusedTwoBehind(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	var cur core.Storage = s
	ws, c, p := claimedPlanned(t, swapStore{&cur}, []string{"m1", "m2"})
	lost := s.Clone() // storage as it will be after losing run 1's start and end
	run, err := ws.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	require.NoError(t, ws.RunEnd(ctx, c, run, ""))
	p, err = ws.Plan(ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.PlanRun, p.Kind)
	require.Equal(t, core.Seq(2), p.Message)

	cur = lost
	refusedUnchanged(t, ws, core.ErrInconsistentLog, "the refused start wrote", func() error {
		_, err := ws.RunStart(ctx, c, p.Message)
		return err
	})
}

// A claim never abandons its own run, even when storage shows it active
// after losing the commit of its end: Abandon refuses it with
// ErrRunNotActive and writes nothing.
// (the tenth mutation pass: Abandon without its own-run check failed no
// test)
func TestAbandonRefusesTheClaimsOwnRun(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	var cur core.Storage = s
	ws, c, p := claimedPlanned(t, swapStore{&cur}, []string{"m1", "m2"})
	run, err := ws.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	lost := s.Clone() // storage as it will be after losing the run's end
	require.NoError(t, ws.RunEnd(ctx, c, run, ""))

	cur = lost
	p, err = ws.Plan(ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.PlanAbandon, p.Kind)
	require.Equal(t, []core.RunID{run}, p.Runs)
	refusedUnchanged(t, ws, core.ErrRunNotActive, "the claim abandoned its own run", func() error {
		return ws.Abandon(ctx, c, run)
	})
}

// A round that asked request 1 refuses to ask again, with
// ErrInconsistentLog and nothing written, on a storage that lost that
// Ask's commit: the new question would take the acknowledged request's
// id. (the tenth mutation pass: Ask's test as id < asked, and Ask not
// remembering the id it asked, each failed no test)
func TestAskRefusedWhenStorageLostTheRoundsAsk(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	var cur core.Storage = s
	ws, c, p := claimedPlanned(t, swapStore{&cur}, []string{"m1"})
	run, err := ws.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	lost := s.Clone() // storage as it will be after losing the Ask
	q, err := ws.Ask(ctx, c, run, "first?")
	require.NoError(t, err)
	require.Equal(t, core.RequestID(1), q)

	cur = lost
	refusedUnchanged(t, ws, core.ErrInconsistentLog, "the refused Ask wrote", func() error {
		_, err := ws.Ask(ctx, c, run, "second?")
		return err
	})
}

// The Answered event a Reply appends names the claim that wrote it, as
// every fenced event does (Event.Holder): a follower of the thread sees
// whose reply consumed the answer. (the tenth mutation pass: Reply's
// Answered event with no Holder failed no test)
func TestReplyEventCarriesItsHolder(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	ws, c, p := claimedPlanned(t, s, []string{"m1"})
	run, err := ws.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	q, err := ws.Ask(ctx, c, run, "which?")
	require.NoError(t, err)
	require.NoError(t, ws.RunEnd(ctx, c, run, ""))
	answer, err := ws.Post(ctx, "t", "this one")
	require.NoError(t, err)
	p, err = ws.Plan(ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.PlanReply, p.Kind)
	require.NoError(t, ws.Reply(ctx, c, q, answer))

	var evs []core.Event
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		var err error
		evs, err = tx.Events(ctx, "t")
		return err
	}))
	last := evs[len(evs)-1]
	require.Equal(t, core.Answered, last.Kind)
	require.Equal(t, core.Holder("ha"), last.Holder)
	require.Equal(t, answer, last.Message)
	require.Equal(t, q, last.Request)
}

// SteerRecord's line carries the taken cursor its write left (the
// steering message), also on a storage whose reads are copies that the
// transaction's writes do not change (memory.WithCopiedReads, as a
// storage that reads rows into values of its own). (the tenth mutation
// pass: the SteerRecord line's Taken from the thread read before the
// write failed no test; only tracecheck run's simulation caught it)
func TestSteerRecordLineTakenOnCopiedReads(t *testing.T) {
	ctx := context.Background()
	rec := &tracecheck.Recorder{}
	ws, c, p := claimedPlanned(t, memory.New(memory.WithCopiedReads()), []string{"m1", "m2"}, core.WithProcess("A"), core.WithTracer(rec))
	run, err := ws.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	m, ok, err := ws.Steer(ctx, c, run)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, ws.SteerRecord(ctx, c, run, m.Seq))
	lines := rec.Lines()
	last := lines[len(lines)-1]
	require.Equal(t, core.ActionSteerRecord, last.Action)
	require.Equal(t, core.Seq(2), last.Msg)
	require.Equal(t, core.Seq(2), last.Taken)
}

// Renew refuses a ttl of zero, as Claim does, with ErrInvalidArgument and
// nothing written or traced: a lease renewed to expire at once is no
// renewal. (the tenth mutation pass: Renew's test as ttl < 0 failed no
// test)
func TestRenewRefusesZeroTTL(t *testing.T) {
	w := newWorld(t, "m1")
	c, err := w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err)
	w.refused(t, core.ErrInvalidArgument, func() error { return w.a.Renew(w.ctx, c, 0) })
	require.NoError(t, w.a.Renew(w.ctx, c, ttl))
}

// The twentieth pass (misuse of the public API, 7 Dec 2026).

// A process name a trace line could not carry as it is is a programming
// error NewWorkspace names: longer than MaxIDBytes (before, the trace
// writer wrote lines longer than tracecheck reads) or not valid UTF-8
// (before, written as another name, U+FFFD for the bad byte).
func TestWithProcessRefusesNamesTracesCannotCarry(t *testing.T) {
	s, clock := memory.New(), coretest.NewClock(epoch)
	require.PanicsWithValue(t, "core: NewWorkspace: WithProcess: invalid argument: process name of 1025 bytes, longer than 1024", func() {
		core.NewWorkspace(s, clock, core.WithProcess(strings.Repeat("p", core.MaxIDBytes+1)))
	})
	require.PanicsWithValue(t, "core: NewWorkspace: WithProcess: invalid argument: process name is not valid UTF-8", func() {
		core.NewWorkspace(s, clock, core.WithProcess("p\xff"))
	})
	require.PanicsWithValue(t, "core: NewWorkspace: WithProcess: invalid argument: process name holds a NUL byte", func() {
		core.NewWorkspace(s, clock, core.WithProcess("p\x00"))
	})
	require.Equal(t, strings.Repeat("p", core.MaxIDBytes), core.NewWorkspace(s, clock, core.WithProcess(strings.Repeat("p", core.MaxIDBytes))).Process())
	require.Equal(t, "", core.NewWorkspace(s, clock).Process(), "the default name")
}

// RunEnd with an output storage could not keep is refused with
// ErrInvalidArgument, writes and traces nothing, and leaves the run
// active: RunEnd with another output ends it.
func TestRunEndRefusesOutputStorageCannotKeep(t *testing.T) {
	ctx := context.Background()
	rec := &tracecheck.Recorder{}
	ws, c, p := claimedPlanned(t, memory.New(), []string{"m1"}, core.WithTracer(rec))
	run, err := ws.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	for _, bad := range []string{"bad \xff", "bad \x00"} {
		refusedUnchanged(t, ws, core.ErrInvalidArgument, "RunEnd with output "+bad, func() error { return ws.RunEnd(ctx, c, run, bad) })
		_, _, err := ws.RunEndThenStart(ctx, c, run, bad, 0, true)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "RunEndThenStart with output %q", bad)
	}
	lines := rec.Len()
	require.NoError(t, ws.RunEnd(ctx, c, run, "fine"))
	require.Equal(t, lines+1, rec.Len(), "only the RunEnd that ended the run was traced")
	th, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, "fine", th.Runs()[0].Output)
}

// Lease of a thread that does not exist is the zero Lease, and no error,
// as for a thread nobody holds.
func TestLeaseOfUnknownThread(t *testing.T) {
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch))
	for _, id := range []core.ThreadID{"nope", ""} {
		l, err := ws.Lease(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, core.Lease{}, l)
	}
}
