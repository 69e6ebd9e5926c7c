package conform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// ttl is every claim's and renewal's TTL; a Lapse moves every process's
// clock on by it, so that the lease's expiry has passed on each.
const ttl = 10 * time.Second

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// errRollback makes a probe's transaction roll back after the write ran.
var errRollback = errors.New("conform: probe rolled back")

// probeStorage wraps the storage under test. Committing, it passes every
// transaction through. Probing, it reads the thread, runs the Workspace's
// transaction, reads
// the thread and its lease inside it (the state the write made), and rolls
// it back, so that the next edge from the same state starts from it again:
// a storage snapshot restored at no cost. The Workspace sees the
// transaction's own outcome either way.
type probeStorage struct {
	inner  core.Storage
	thread core.ThreadID
	probe  bool
	seen   bool // a probe's transaction ran and was read
	after  *core.Thread
	lease  core.Lease
}

func (p *probeStorage) Update(ctx context.Context, fn func(ctx context.Context, tx core.Transaction) error) error {
	if !p.probe {
		return p.inner.Update(ctx, fn)
	}
	var ferr error
	err := p.inner.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		// The thread is read first: a storage's one-statement writes (the
		// PostgreSQL Store's post and claim), which commit as they are
		// sent when they are a transaction's first call, then take their
		// reading path inside the transaction, which the rollback undoes.
		if _, err := tx.Thread(ctx, p.thread); err != nil {
			return err
		}
		if ferr = fn(ctx, tx); ferr != nil {
			return ferr
		}
		t, err := tx.Thread(ctx, p.thread)
		if err != nil {
			return err
		}
		p.after = t.Clone()
		if p.lease, err = tx.Lease(ctx, p.thread); err != nil {
			return err
		}
		p.seen = true
		return errRollback
	})
	if ferr != nil {
		return ferr
	}
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

// View passes reads through, read-only when the storage is a Viewer.
func (p *probeStorage) View(ctx context.Context, fn func(ctx context.Context, tx core.Transaction) error) error {
	if v, ok := p.inner.(core.Viewer); ok {
		return v.View(ctx, fn)
	}
	return p.inner.Update(ctx, fn)
}

// driver is one path's Go system: a thread in storage, a Workspace and a
// clock per process, and each process's round. The Workspaces keep their
// rounds, as deployed: each process's claim is the one Workspace.Claim
// made, and the path's steps reach them in the spec's order. A probe,
// whose rollback cannot move a Workspace's round back, runs on a copy of
// the driver (probing) instead.
type driver struct {
	cfg     specmodel.Config
	claims  []core.Claim // each process's claim, as Workspace.Claim made it
	store   *probeStorage
	thread  core.ThreadID
	poster  *core.Workspace
	ws      []*core.Workspace
	clocks  []*coretest.Clock
	procs   []Proc
	holders []core.Holder
	live    bool // liveAbandoned
	// given and steered are the spec's ghosts, counted from the Go calls
	// that give a message to a model (Observed.Given, Observed.Steered).
	given   []uint8
	steered []specmodel.Pair
}

func newDriver(ctx context.Context, cfg specmodel.Config, s core.Storage, thread core.ThreadID, fences core.Fences) (*driver, error) {
	d := &driver{cfg: cfg, store: &probeStorage{inner: s, thread: thread}, thread: thread,
		procs: make([]Proc, len(cfg.Procs)), claims: make([]core.Claim, len(cfg.Procs)), given: make([]uint8, cfg.MaxMsgs)}
	d.poster = core.NewWorkspace(d.store, coretest.NewClock(epoch), core.WithProcess("poster"))
	for _, name := range cfg.Procs {
		c := coretest.NewClock(epoch)
		d.clocks = append(d.clocks, c)
		d.ws = append(d.ws, core.NewWorkspace(d.store, c, core.WithProcess(name), core.WithFencesForTesting(fences)))
	}
	if err := d.poster.CreateThread(ctx, thread); err != nil {
		return nil, fmt.Errorf("create thread %q: %w", thread, err)
	}
	return d, nil
}

// probing returns a copy of d that takes st as a probe and is then
// dropped: it shares d's storage (whose transaction the probe rolls back)
// and poster, and has what st changes outside storage of its own. For a
// Lapse, every process's clock, copied at its reading. For a step of
// process p, p's Workspace forked (core.Workspace.ForkForTesting), its
// round copied in the phase it is in, over the same storage and clock,
// with p's claim on the fork: the probe moves the copy's round, and d's
// stays where it is.
func (d *driver) probing(st specmodel.Step) *driver {
	c := *d
	c.procs, c.claims = slices.Clone(d.procs), slices.Clone(d.claims)
	c.holders = slices.Clip(d.holders) // a Claim's append copies them
	c.given, c.steered = slices.Clone(d.given), slices.Clone(d.steered)
	switch {
	case st.Action == core.ActionLapse:
		c.clocks = make([]*coretest.Clock, len(d.clocks))
		for i, k := range d.clocks {
			c.clocks[i] = coretest.NewClock(k.Now())
		}
	case st.P >= 0:
		var claim func(core.Claim) core.Claim
		c.ws = slices.Clone(d.ws)
		c.ws[st.P], claim = d.ws[st.P].ForkForTesting(d.store, d.clocks[st.P], nil)
		c.claims[st.P] = claim(d.claims[st.P])
	}
	return &c
}

// observe reads storage and abstracts the whole system.
func (d *driver) observe(ctx context.Context) (specmodel.State, error) {
	t, err := d.poster.Thread(ctx, d.thread)
	if err != nil {
		return specmodel.State{}, err
	}
	l, err := d.poster.Lease(ctx, d.thread)
	if err != nil {
		return specmodel.State{}, err
	}
	return d.abstract(t, l)
}

func (d *driver) abstract(t *core.Thread, l core.Lease) (specmodel.State, error) {
	now := d.clocks[0].Now()
	for _, c := range d.clocks[1:] {
		if c.Now().After(now) {
			now = c.Now()
		}
	}
	return Abstract(d.cfg, Observed{Thread: t, Lease: l, Now: now, Procs: d.procs, Holders: d.holders, LiveAbandoned: d.live,
		Given: d.given, Steered: d.steered})
}

func (d *driver) claim(p int) core.Claim { return d.claims[p] }

// outcome is what Go did with a step: which spec action its result is
// (a refusal is the refusal's action), or a refusal no spec action has.
type outcome struct {
	action core.Action // the spec action Go's outcome stands for; "" for a refusal with no action
	err    error       // Go's error, nil on success
}

// do makes the Go call that step stands for and updates the processes'
// rounds as a runner would from Go's answer. The spec's refusal actions
// (StartFenced...) make the same call as the write they refuse.
func (d *driver) do(ctx context.Context, st specmodel.Step) outcome {
	p := st.P
	var pr *Proc
	var ws *core.Workspace
	if p >= 0 {
		pr, ws = &d.procs[p], d.ws[p]
	}
	idle := func() { *pr, d.claims[p] = Proc{}, core.Claim{} }
	switch st.Action {
	case core.ActionPost:
		_, err := d.poster.Post(ctx, d.thread, "m")
		return outcome{core.ActionPost, err}
	case core.ActionLapse:
		return d.lapse()
	case core.ActionClaim:
		h := core.Holder(fmt.Sprintf("%s-h%d", d.thread, len(d.holders)+1))
		c, err := ws.Claim(ctx, d.thread, h, ttl)
		if err != nil {
			return outcome{"", err}
		}
		d.holders = append(d.holders, h)
		*pr, d.claims[p] = Proc{PC: specmodel.Claimed, Holder: c.Holder}, c
		return outcome{core.ActionClaim, nil}
	case core.ActionRenew:
		if err := ws.Renew(ctx, d.claim(p), ttl); err != nil {
			return outcome{"", err}
		}
		return outcome{core.ActionRenew, nil}
	case core.ActionRelease:
		err := ws.Release(ctx, d.claim(p))
		if err == nil {
			idle()
		}
		return outcome{core.ActionRelease, err}
	case core.ActionAbandon, core.ActionAbandonFenced:
		run := core.RunID(st.R)
		if st.Action == core.ActionAbandonFenced {
			run = d.someRun(ctx, p)
		}
		t, err := d.poster.Thread(ctx, d.thread)
		if err != nil {
			return outcome{"", err}
		}
		l, err := d.poster.Lease(ctx, d.thread)
		if err != nil {
			return outcome{"", err}
		}
		err = ws.Abandon(ctx, d.claim(p), run)
		switch {
		case err == nil:
			if r, ok := t.Run(run); ok && l.Holder == r.Holder {
				d.live = true
			}
			return outcome{core.ActionAbandon, nil}
		case errors.Is(err, core.ErrThreadBusy):
			idle()
			return outcome{core.ActionAbandonFenced, err}
		}
		return outcome{"", err}
	case core.ActionPlan:
		plan, err := ws.Plan(ctx, d.claim(p))
		if err != nil {
			return outcome{"", err}
		}
		if plan.Kind != core.PlanRun && plan.Kind != core.PlanReply {
			return outcome{"", fmt.Errorf("plan %s", plan.Kind)}
		}
		pr.PC, pr.Plan = specmodel.Planned, plan
		return outcome{core.ActionPlan, nil}
	case core.ActionRunStart, core.ActionStartFenced:
		id, err := ws.RunStart(ctx, d.claim(p), pr.Plan.Message)
		switch {
		case err == nil:
			d.given[pr.Plan.Message-1]++
			pr.PC, pr.Plan, pr.Run = specmodel.Running, core.Plan{}, id
			return outcome{core.ActionRunStart, nil}
		case errors.Is(err, core.ErrThreadBusy):
			idle()
			return outcome{core.ActionStartFenced, err}
		}
		return outcome{"", err}
	case core.ActionReply, core.ActionReplyFenced:
		err := ws.Reply(ctx, d.claim(p), pr.Plan.Request, pr.Plan.Message)
		switch {
		case err == nil:
			d.given[pr.Plan.Message-1]++
			pr.PC, pr.Plan = specmodel.Claimed, core.Plan{}
			return outcome{core.ActionReply, nil}
		case errors.Is(err, core.ErrThreadBusy):
			idle()
			return outcome{core.ActionReplyFenced, err}
		}
		return outcome{"", err}
	case core.ActionAsk:
		_, err := ws.Ask(ctx, d.claim(p), pr.Run, "q")
		if err != nil {
			return outcome{"", err}
		}
		return outcome{core.ActionAsk, nil}
	case core.ActionRunEnd, core.ActionEndRefused:
		err := ws.RunEnd(ctx, d.claim(p), pr.Run, "")
		switch {
		case err == nil:
			pr.PC, pr.Run = specmodel.Claimed, 0
			return outcome{core.ActionRunEnd, nil}
		case errors.Is(err, core.ErrRunAbandoned):
			idle()
			return outcome{core.ActionEndRefused, err}
		}
		return outcome{"", err}
	case core.ActionSteer, core.ActionSteerRecord, core.ActionSteerRefused:
		return d.steer(ctx, st, ws, pr, idle)
	case core.ActionCrash:
		err := ws.Crash(ctx, d.claim(p))
		idle()
		return outcome{core.ActionCrash, err}
	}
	return outcome{"", fmt.Errorf("conform: no Go call for %s", st.Action)}
}

// lapse takes every process's clock past the lease's expiry.
func (d *driver) lapse() outcome {
	for _, c := range d.clocks {
		c.Advance(ttl)
	}
	return outcome{core.ActionLapse, nil}
}

// steer makes the Go call of a steering step of process pr: Steer gives
// the next message (the ghosts given and steered count it), SteerRecord
// records it (SteerRefused when the run was abandoned: the round ends).
func (d *driver) steer(ctx context.Context, st specmodel.Step, ws *core.Workspace, pr *Proc, idle func()) outcome {
	if st.Action == core.ActionSteer {
		m, ok, err := ws.Steer(ctx, d.claim(st.P), pr.Run)
		switch {
		case err != nil:
			return outcome{"", err}
		case !ok:
			return outcome{"", errors.New("nothing to steer")}
		}
		d.given[m.Seq-1]++
		d.steered = append(d.steered, specmodel.Pair{Run: uint8(pr.Run), Msg: uint8(m.Seq)})
		pr.PC, pr.Steer = specmodel.Steered, m.Seq
		return outcome{core.ActionSteer, nil}
	}
	err := ws.SteerRecord(ctx, d.claim(st.P), pr.Run, pr.Steer)
	switch {
	case err == nil:
		pair := specmodel.Pair{Run: uint8(pr.Run), Msg: uint8(pr.Steer)}
		d.steered = slices.DeleteFunc(d.steered, func(x specmodel.Pair) bool { return x == pair })
		pr.PC, pr.Steer = specmodel.Running, 0
		return outcome{core.ActionSteerRecord, nil}
	case errors.Is(err, core.ErrRunAbandoned):
		idle()
		return outcome{core.ActionSteerRefused, err}
	}
	return outcome{"", err}
}

// someRun picks the run an abandon that the fence refuses names: an
// active run of an earlier claim if there is one, else run 1 (the fence is
// checked before the run).
func (d *driver) someRun(ctx context.Context, p int) core.RunID {
	t, err := d.poster.Thread(ctx, d.thread)
	if err == nil {
		for _, r := range t.ActiveRuns() {
			if r.Holder != d.procs[p].Holder {
				return r.ID
			}
		}
	}
	return 1
}
