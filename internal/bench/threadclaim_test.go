package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/postgres"
)

// tcSystem is this project's runner: 4 runners, each with its own Store
// (its own pool and listening connection, as 4 processes would have),
// over 100 threads, waking on the Store's Wakeups (LISTEN/NOTIFY) and
// polling every 50ms, ClaimTTL 2s, the runner's defaults otherwise (4
// turns at once, unless turns says more); the posters post round-robin
// over the threads through a Store of their own. Each workload gets a
// fresh schema.
type tcSystem struct {
	turns   int // MaxConcurrentTurns; 0: the runner's default
	schema  string
	poster  *postgres.Store
	ws      *core.Workspace
	threads []core.ThreadID
	stores  []*postgres.Store
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

var schemas atomic.Int64

func newThreadclaim() system { return &tcSystem{} }

// newThreadclaimTurns16 is the runner with 16 turns at once, as River's
// is with a FetchCooldown of 1ms: a setting that trades one workload for
// another (BENCH.md, "Sixteen turns a runner").
func newThreadclaimTurns16() system { return &tcSystem{turns: 16} }

func (t *tcSystem) name() string {
	if t.turns > 0 {
		return "threadclaim-turns=" + strconv.Itoa(t.turns)
	}
	return "threadclaim"
}

func (t *tcSystem) setup(ctx context.Context, url string) error {
	t.schema = fmt.Sprintf("tc_bench_%d_%d", time.Now().UnixNano()%1e9, schemas.Add(1))
	s, err := postgres.Open(ctx, url, postgres.Options{Schema: t.schema})
	if err != nil {
		return err
	}
	t.poster, t.ws = s, core.NewWorkspace(s, core.SystemClock{}, core.WithProcess("poster"))
	for i := range threads {
		id := core.ThreadID(fmt.Sprintf("t%03d", i))
		if err := t.ws.CreateThread(ctx, id); err != nil {
			return err
		}
		t.threads = append(t.threads, id)
	}
	return nil
}

func (t *tcSystem) post(ctx context.Context, i int) error {
	_, err := t.ws.Post(ctx, t.threads[i%len(t.threads)], fmt.Sprint(i))
	return err
}

func (t *tcSystem) donePosting() { t.poster.Close() }

func (t *tcSystem) start(ctx context.Context, url string, started func(string)) error {
	ctx, t.cancel = context.WithCancel(ctx)
	agent := runner.AgentFunc(func(_ context.Context, s *runner.Session) error {
		started(s.Delivered.Prompt.Text)
		return nil
	})
	for i := range workers {
		s, err := postgres.Open(ctx, url, postgres.Options{Schema: t.schema})
		if err != nil {
			return err
		}
		t.stores = append(t.stores, s)
		wake, err := s.Wakeups(ctx)
		if err != nil {
			return err
		}
		r, err := runner.New(runner.Config{
			Workspace: core.NewWorkspace(s, core.SystemClock{}, core.WithProcess(fmt.Sprintf("runner-%d", i))),
			Agent:     agent,
			Clock:     core.SystemClock{},
			ClaimTTL:  2 * time.Second,
			PollEvery: 50 * time.Millisecond,
			Wake:      wake,

			MaxConcurrentTurns: t.turns,
		})
		if err != nil {
			return err
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			_ = r.Run(ctx)
		}()
	}
	return nil
}

// stop drops the schema through a runner's Store, with no connection of
// its own: the workload's count of the connections the server took
// (sessions) is read after stop. (Before 7 Dec 2026 it opened a Store to
// drop it, and every runner workload counted one connection more.)
func (t *tcSystem) stop(ctx context.Context, _ string) {
	t.cancel()
	t.wg.Wait()
	if len(t.stores) > 0 {
		_ = t.stores[0].DropSchema(ctx)
	}
	for _, s := range t.stores {
		s.Close()
	}
}
