package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/internal/sim/simtest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

func TestConformance(t *testing.T) {
	simtest.Exercise(t, func(*testing.T) core.Storage { return memory.New() })
}

// The mutant with holder freshness off: a holder reused across claims
// passes a later claim's fence with its stale round, and a message is
// consumed twice. The conformance suite's HolderReused and
// ReuseHolderRefused cases catch it.
func TestReuseHolderMutant(t *testing.T) {
	storetest.CheckReuseHolderMutant(t, memory.New(memory.WithHolderReuseForTesting()))
}

// With copied reads the conformance suite passes as it does without.
func TestConformanceCopiedReads(t *testing.T) {
	storetest.Run(t, func(*testing.T) core.Storage { return memory.New(memory.WithCopiedReads()) })
}

// TestCopiedReads: a thread read in a transaction is what it was at the
// read, whatever the transaction writes next, with copied reads; without
// them it is the Store's own state, which the write changes in place.
func TestCopiedReads(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		opts     []memory.Option
		wantSeen int // messages the first read shows after the Append
	}{
		{"default", nil, 1},
		{"copied", []memory.Option{memory.WithCopiedReads()}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memory.New(tc.opts...)
			ws := core.NewWorkspace(s, coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)))
			if err := ws.CreateThread(ctx, "t1"); err != nil {
				t.Fatal(err)
			}
			err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
				before, err := tx.Thread(ctx, "t1")
				if err != nil {
					return err
				}
				v, err := tx.Bump(ctx, "t1")
				if err != nil {
					return err
				}
				if err := tx.Append(ctx, "t1", core.Event{Kind: core.MessagePosted, Version: v, Message: 1, Text: "m1", At: time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)}); err != nil {
					return err
				}
				if n := len(before.Messages); n != tc.wantSeen {
					t.Errorf("the read before the write shows %d messages, want %d", n, tc.wantSeen)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
