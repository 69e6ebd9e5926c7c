package core_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// model is a thread's runs as a plain slice, changed in place: what a
// core.Thread's runs must read as.
type model []core.Run

func (m model) apply(ev core.Event) model {
	m = slices.Clone(m)
	for i := range m {
		m[i].Steering = slices.Clone(m[i].Steering)
	}
	switch ev.Kind {
	case core.RunStarted:
		m = append(m, core.Run{ID: ev.Run, Holder: ev.Holder, Prompt: ev.Message, State: core.StateActive, StartedAt: ev.At})
	case core.RunEnded:
		m[ev.Run-1].State = core.StateEnded
	case core.RunAbandoned:
		m[ev.Run-1].State = core.StateAbandoned
	case core.RunOutput:
		m[ev.Run-1].Output = ev.Text
	case core.RunSteered:
		m[ev.Run-1].Steering = append(m[ev.Run-1].Steering, ev.Message)
	}
	return m
}

// version is a Thread value and what its runs must read as.
type version struct {
	th   *core.Thread
	want model
}

// randomRunEvent returns an event th accepts, chosen at random among the
// run events: a start, an end, an abandon, a steering or an output (for
// any run that has ended, the newest or one long settled).
func randomRunEvent(r *rand.Rand, th *core.Thread) core.Event {
	for {
		id := core.RunID(1 + r.IntN(int(th.LastRun())+1))
		var ev core.Event
		switch r.IntN(6) {
		case 0, 1:
			ev = core.Event{Kind: core.RunStarted, Run: th.LastRun() + 1, Holder: core.Holder(fmt.Sprint("h", r.IntN(3))), Message: 1}
		case 2:
			ev = core.Event{Kind: core.RunEnded, Run: id}
		case 3:
			ev = core.Event{Kind: core.RunAbandoned, Run: id}
		case 4:
			ev = core.Event{Kind: core.RunSteered, Run: id, Message: 1}
		default:
			ev = core.Event{Kind: core.RunOutput, Run: id, Text: fmt.Sprint("out", r.IntN(100))}
		}
		if th.Check(ev) == nil {
			return ev
		}
	}
}

// TestRunsAreNeverChangedInPlace: Thread values copied one from another
// (a shallow copy, as a storage's cache and its transactions make, or a
// Clone) share their runs, and each reads its own history however the
// others go on, including two that append after the same run at once.
// Every value is checked against a model after every step.
func TestRunsAreNeverChangedInPlace(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 7))
		base := core.NewThread("t")
		base.Apply(core.Event{Kind: core.MessagePosted, Message: 1})
		vs := []version{{th: base}}
		for step := range 400 {
			// Fork a value now and then: a shallow copy or a Clone.
			from := vs[r.IntN(len(vs))]
			if r.IntN(4) == 0 && len(vs) < 12 {
				c := *from.th
				th := &c
				if r.IntN(2) == 0 {
					th = from.th.Clone()
				}
				vs = append(vs, version{th: th, want: from.want})
			}
			i := r.IntN(len(vs))
			ev := randomRunEvent(r, vs[i].th)
			vs[i].th.Apply(ev)
			vs[i].want = vs[i].want.apply(ev)
			for j, v := range vs {
				got := v.th.Runs()
				if !runsEqual(got, v.want) {
					t.Fatalf("seed %d step %d: value %d (after %v on value %d) reads\n%v\nwant\n%v", seed, step, j, ev, i, got, v.want)
				}
				require.Equal(t, core.RunID(len(v.want)), v.th.LastRun())
				for id := core.RunID(0); id <= core.RunID(len(v.want))+1; id++ {
					run, ok := v.th.Run(id)
					if id < 1 || int(id) > len(v.want) {
						require.False(t, ok, "run %d of %d", id, len(v.want))
						continue
					}
					require.True(t, ok)
					require.True(t, runsEqual([]core.Run{run}, v.want[id-1:id]))
				}
				var active []core.Run
				for _, run := range v.want {
					if run.State == core.StateActive {
						active = append(active, run)
					}
				}
				require.True(t, runsEqual(v.th.ActiveRuns(), active), "seed %d step %d: ActiveRuns of value %d", seed, step, j)
			}
		}
	}
}

func runsEqual(a, b []core.Run) bool {
	return slices.EqualFunc(a, b, func(x, y core.Run) bool {
		return x.ID == y.ID && x.Holder == y.Holder && x.Prompt == y.Prompt && x.State == y.State &&
			x.StartedAt.Equal(y.StartedAt) && x.Output == y.Output && slices.Equal(x.Steering, y.Steering)
	})
}

// TestRunsAppendRightUnderRace: values copied from one state, on
// goroutines of their own, each end the newest run and start another
// (both settle the ended run at the same index of a shared array): each
// reads its own runs. Run with -race.
func TestRunsAppendRightUnderRace(t *testing.T) {
	base := endedRuns(100)
	const n = 8
	got := make([][]core.Run, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			c := *base
			holder := core.Holder(fmt.Sprint("g", g))
			for k := range core.RunID(20) {
				c.Apply(core.Event{Kind: core.RunEnded, Run: 101 + k})
				c.Apply(core.Event{Kind: core.RunOutput, Run: 101 + k, Text: string(holder)})
				c.Apply(core.Event{Kind: core.RunStarted, Run: 102 + k, Holder: holder, Message: 1})
			}
			got[g] = c.Runs()
		})
	}
	wg.Wait()
	for g := range n {
		holder := core.Holder(fmt.Sprint("g", g))
		require.Len(t, got[g], 121)
		for i, r := range got[g] {
			switch {
			case i < 100:
				require.Equal(t, core.Holder("h"), r.Holder, "goroutine %d, run %d", g, r.ID)
				require.Equal(t, "", r.Output)
			case i == 100:
				require.Equal(t, string(holder), r.Output, "goroutine %d, run %d", g, r.ID)
			case i < 120:
				require.Equal(t, holder, r.Holder, "goroutine %d, run %d", g, r.ID)
				require.Equal(t, string(holder), r.Output, "goroutine %d, run %d", g, r.ID)
			}
		}
	}
	require.Equal(t, core.RunID(101), base.LastRun())
	last, _ := base.Run(101)
	require.Equal(t, core.StateActive, last.State, "the base's newest run")
}

// TestRunEndCostsNoHistory: a run's end, its output and the next start,
// applied to a copy of a thread of 10,000 runs, allocate a few hundred
// bytes, not a copy of the runs (1.1 MB each before the runs were held
// apart). Bytes allocated are counted, not time, over enough turns that
// the settled runs' array doubles once (its copy is amortised).
func TestRunEndCostsNoHistory(t *testing.T) {
	th := endedRuns(10_000)
	const turns = 20_000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for k := range core.RunID(turns) {
		c := *th // as a cache's transaction copies its state's header
		c.Apply(core.Event{Kind: core.RunEnded, Run: 10_001 + k})
		c.Apply(core.Event{Kind: core.RunOutput, Run: 10_001 + k, Text: "said"})
		c.Apply(core.Event{Kind: core.RunStarted, Run: 10_002 + k, Holder: "h", Message: 1})
		th = &c
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / turns
	t.Logf("%d bytes a turn on a thread of 10,000 runs", per)
	if per > 2048 {
		t.Errorf("a turn allocates %d bytes on a thread of 10,000 runs: the runs are copied", per)
	}
}

// endedRuns returns a thread of n ended runs and a run n+1 active.
func endedRuns(n core.RunID) *core.Thread {
	th := core.NewThread("t")
	th.Apply(core.Event{Kind: core.MessagePosted, Message: 1})
	for id := core.RunID(1); id <= n; id++ {
		th.Apply(core.Event{Kind: core.RunStarted, Run: id, Holder: "h", Message: 1})
		th.Apply(core.Event{Kind: core.RunEnded, Run: id})
	}
	th.Apply(core.Event{Kind: core.RunStarted, Run: n + 1, Holder: "h", Message: 1})
	return th
}
