package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// waitLimit bounds every wait of the suite: a wait that outlasts it fails,
// naming what it waited for, rather than hanging until go test's timeout.
const waitLimit = 30 * time.Second

// explore is how long CheckAcquireWaits gives the other holder's claim to
// finish while the fenced write is paused. It only widens the
// interleavings the check tries; the verdict is read from commit order,
// never from how long anything took.
const explore = 200 * time.Millisecond

// Await receives from ch, or gives up after 30 seconds (the suite's bound
// on every wait) with an error that names what it waited for. A closed ch
// gives T's zero value and nil, as a receive does; a nil ch waits the 30
// seconds and gives the error.
func Await[T any](ch <-chan T, what string) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-time.After(waitLimit):
		var zero T
		return zero, fmt.Errorf("storetest: gave up after %v waiting for %s", waitLimit, what)
	}
}

// lines is a core.Tracer that keeps the lines it is given.
type lines struct {
	mu sync.Mutex
	l  []core.TraceEvent
}

func (t *lines) Trace(ev core.TraceEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.l = append(t.l, ev)
}

func (t *lines) find(a core.Action) (core.TraceEvent, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ev := range t.l {
		if ev.Action == a && !ev.Read {
			return ev, true
		}
	}
	return core.TraceEvent{}, false
}

// CheckAcquireWaits checks the fence's central property on s: another
// holder's acquire of the lease waits for a fenced write that has passed
// its fence, so the write either commits before the acquire or is
// refused. Process a's RunStart is paused inside its transaction, right
// after its fence read the lease; process b, whose clock says a's lease
// has expired, then claims the thread; a is let go. The check reads the
// order the two writes committed in (the versions they wrote) and returns
// an error if a's run started after b's claim, or if a wait outlasted
// waitLimit (30 seconds). fences are a's (a mutation test switches them off).
// s must not be nil.
func CheckAcquireWaits(ctx context.Context, s core.Storage, fences core.Fences) error {
	ha, hb := &Hooked{Storage: s}, &Hooked{Storage: s}
	ta, tb := &lines{}, &lines{}
	a := newProc(ha, "a", 0, core.WithTracer(ta), core.WithFencesForTesting(fences))
	b := newProc(hb, "b", 0, core.WithTracer(tb))
	id := core.ThreadID("acquire-waits")
	if err := a.ws.CreateThread(ctx, id); err != nil {
		return err
	}
	if _, err := a.ws.Post(ctx, id, "m1"); err != nil {
		return err
	}
	ca, err := a.ws.Claim(ctx, id, "ha", ttl)
	if err != nil {
		return err
	}
	if _, err := a.ws.Plan(ctx, ca); err != nil {
		return err
	}
	b.clock.Advance(2 * ttl) // b sees a's lease expired

	aDone, release, err := startPaused(ctx, ha, a, ca)
	defer release()
	if err != nil {
		return err
	}
	entered := make(chan struct{})
	hb.BeforeUpdate = func() { close(entered) }
	bDone := make(chan error, 1)
	go func() {
		_, err := b.ws.Claim(ctx, id, "hb", ttl)
		bDone <- err
	}()
	if _, err := Await(entered, "b's Claim to start its transaction"); err != nil {
		return err
	}
	var bErr error
	bFirst := false
	select {
	case bErr = <-bDone:
		bFirst = true
	case <-time.After(explore):
	}
	release()
	aErr, err := Await(aDone, "a's RunStart to return once let go")
	if err != nil {
		return err
	}
	if !bFirst {
		if bErr, err = Await(bDone, "b's Claim to return once a's RunStart returned"); err != nil {
			return err
		}
	}
	if bErr != nil {
		return fmt.Errorf("storetest: b's claim over a's expired lease failed: %w", bErr)
	}
	claim, ok := tb.find(core.ActionClaim)
	if !ok {
		return errors.New("storetest: b's claim committed without its trace line")
	}
	switch {
	case errors.Is(aErr, core.ErrThreadBusy):
		th, err := b.ws.Thread(ctx, id)
		if err != nil {
			return err
		}
		if len(th.Runs()) != 0 {
			return fmt.Errorf("storetest: a's refused RunStart left %d runs", len(th.Runs()))
		}
		return nil
	case aErr != nil:
		return fmt.Errorf("storetest: a's RunStart: %w", aErr)
	}
	start, ok := ta.find(core.ActionRunStart)
	if !ok {
		return errors.New("storetest: a's RunStart committed without its trace line")
	}
	if start.Tick > claim.Tick {
		return fmt.Errorf("storetest: a's fenced RunStart committed (version %d) after b's claim took the lease (version %d): the acquire did not wait for the fenced write",
			start.Tick, claim.Tick)
	}
	return nil
}

// startPaused starts p's RunStart of message 1 under c, whose round has
// planned it, pauses it inside its transaction right after its fence read
// the lease (through h, p's storage), and returns once it is paused: with
// the channel its error comes on, and the function that lets it go on
// (idempotent).
func startPaused(ctx context.Context, h *Hooked, p *proc, c core.Claim) (<-chan error, func(), error) {
	paused, resume := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(resume) })
	h.AfterHoldsLease = func(context.Context, core.Transaction) {
		close(paused)
		<-resume
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.ws.RunStart(ctx, c, 1)
		done <- err
	}()
	_, err := Await(paused, "a RunStart to read the lease in its transaction")
	return done, release, err
}
