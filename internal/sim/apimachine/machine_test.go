package apimachine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
)

// TestCheckEffectRefusalThatTraced: a call refused as out of the protocol
// that traced a line, though it wrote nothing, is reported (catches pass
// 13's mutant 71: only a write is looked for).
func TestCheckEffectRefusalThatTraced(t *testing.T) {
	ctx := context.Background()
	m, err := New(ctx, memory.New(), "fx", 2, RandChooser{R: rand.New(rand.NewPCG(1, 1))})
	require.NoError(t, err)
	before, err := m.versions()
	require.NoError(t, err)
	lines := m.rec.Len()
	refused := fmt.Errorf("renew: %w", core.ErrOutOfOrder)
	require.NoError(t, m.checkEffect("a refusal that did nothing", refused, before, lines))

	// A line the checker accepts, on a thread of its own: traced, not
	// written.
	m.rec.Trace(core.TraceEvent{Tick: 1, Action: core.ActionPost, Thread: "elsewhere", Proc: "poster", Msg: 1})
	err = m.checkEffect("a refusal that traced", refused, before, lines)
	require.ErrorContains(t, err, "was refused")
	require.ErrorContains(t, err, "but wrote or traced")
}
