package sim

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
)

// noRunStart is a storage that refuses every run's start: a runner over
// it claims, plans and is refused for ever, consuming nothing.
type noRunStart struct{ core.Storage }

func (s noRunStart) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, noRunStartTx{tx})
	})
}

type noRunStartTx struct{ core.Transaction }

var errNoRunStart = errors.New("test storage: no run may start")

func (tx noRunStartTx) Append(ctx context.Context, id core.ThreadID, ev core.Event) error {
	if ev.Kind == core.RunStarted {
		return errNoRunStart
	}
	return tx.Transaction.Append(ctx, id, ev)
}

// TestQuiesceStalls: a drain that goes on without taking a message or
// ending a run fails as Liveness after the stall bound, naming it, rather
// than running out all its rounds.
func TestQuiesceStalls(t *testing.T) {
	ctx := context.Background()
	s, err := NewSeeded(ctx, Config{Seed: 1, Steps: 20, Storage: noRunStart{memory.New()}})
	require.NoError(t, err)
	err = s.Run(ctx)
	var inv *InvariantError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "Liveness", inv.Invariant)
	require.Contains(t, inv.Detail, "no message taken and no run ended in 1000 fair rounds")
}
