package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// The tests of this file came out of the twelfth mutation pass: each
// fails on the mutant its comment names, which no other test caught.

// The default constants are those Config's comments document (other
// tests check that New fills the fields from the constants, whatever
// they are). (Mutants: DefaultClaimTTL 20s, DefaultMaxConcurrentTurns 3.)
func TestDefaultsAsDocumented(t *testing.T) {
	require.Equal(t, 30*time.Second, runner.DefaultClaimTTL, "Config.ClaimTTL: Default 30s")
	require.Equal(t, time.Second, runner.DefaultPollEvery, "Config.PollEvery: Default 1s")
	require.Equal(t, 5*time.Second, runner.DefaultShutdownGrace, "Config.ShutdownGrace: Default 5s")
	require.Equal(t, 4, runner.DefaultMaxConcurrentTurns, "Config.MaxConcurrentTurns: Default 4")
	require.Equal(t, 1, runner.DefaultTakeoverTurns, "Config.TakeoverTurns: Default 1")
}

// The runs a turn abandons are counted as abandoned, and only the runs it
// started as started. (Mutant: the abandoned counter was made under the
// started counter's name.)
func TestTelemetryCountsAbandonedRuns(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	reader := sdkmetric.NewManualReader()
	a := newProc(t, s, "A", procOpts{})
	b := newProc(t, s, "B", procOpts{skew: ttl + time.Second, cfg: func(c *runner.Config) {
		c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	}})
	newThread(t, a.ws, "t", "m1", "m2")
	ta := a.r.NewTurn("t")
	stepTo(t, ta, runner.StepAgent) // A's run on m1 is active; A goes no further
	o, err := b.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
	th, err := b.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Len(t, th.Runs(), 2)
	require.Equal(t, core.StateAbandoned, th.Runs()[0].State)
	got := sums(t, reader)
	require.Equal(t, int64(1), got[runner.MetricRunsAbandoned], "B abandoned A's run")
	require.Equal(t, int64(1), got[runner.MetricRunsStarted], "B started one run, on m2")
	require.Equal(t, int64(1), got[runner.MetricRunsEnded])
}
