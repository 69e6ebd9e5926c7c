package fleet

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/fleet/proxy"
	"github.com/threadclaim/threadclaim/store/postgres"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// run is one fleet execution's state.
type run struct {
	cfg    Config
	out    io.Writer
	start  time.Time
	schema string
	dir    string
	// rewindLock bounds the rewind's wait for a thread's row lock
	// (rewindClaim); zero: 50ms. A test sets it long.
	rewindLock time.Duration
	store      *postgres.Store
	cluster    *cluster
	slots      []*slot
	threads    []core.ThreadID
	died       chan *proc // a worker that exited on its own

	mu        sync.Mutex
	rng       *rand.Rand // the nemesis's choices
	workerRNG *rand.Rand // the workers' seeds
	nextName  int
	procs     []*proc
	events    []Event
	kills     []kill
	// overran names the workers that did not stop within stopGrace of
	// their SIGTERM, and were killed (each a kill as well).
	overran   []string
	stopGrace time.Duration // stopGrace, or a test's
	postedAt  time.Time     // when the last post returned
	// KindRewind's tallies: Claims rewound; of them, those whose version
	// another worker's write took again with the log unchanged before the
	// first went on, those written otherwise first, and those nobody
	// wrote in time (rewind.go).
	rewound, retaken, rewindMissed, unclaimed int
	// postGate: the posters hold it shared for each post; a rewind holds
	// it while it waits for the thread's next write.
	postGate sync.RWMutex
	// clusterUp: a restart of the cluster (KindRestart, KindLose) holds
	// it; a worker's clean stop holds it shared from its SIGTERM until it
	// has stopped, so that it stops with storage there to end its open
	// rounds, as the check of writes in doubt at a clean stop assumes.
	clusterUp sync.RWMutex
}

// lockedWriter serialises writes: the nemesis reports replacements while
// the run reports its progress.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ErrInterrupted: the run's context ended (SIGINT, SIGTERM) before the
// run did. Workers, schema and temporary directory are cleaned up.
var ErrInterrupted = errors.New("fleet: interrupted")

// ErrWorkerDied: a worker exited by itself (not by the nemesis).
var ErrWorkerDied = errors.New("fleet: a worker exited by itself")

// Run runs one fleet execution and checks it. It returns the report, or an
// error when the execution could not run (the database unreachable, a
// worker that died by itself, ctx ended: ErrInterrupted). A report whose
// Problems are not empty is a failed check. Progress goes to progress.
//
// Whatever happens, the workers are stopped, and unless cfg.Keep the
// schema is dropped and the temporary directory removed.
func Run(ctx context.Context, cfg Config, progress io.Writer) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &run{
		cfg:       cfg,
		out:       &lockedWriter{w: progress},
		start:     time.Now(),
		died:      make(chan *proc, 1),
		rng:       rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65736973)),
		workerRNG: rand.New(rand.NewPCG(cfg.Seed, 0x666c656574)),
		cluster:   &cluster{url: cfg.URL},
		stopGrace: stopGrace,
	}
	var suffix [4]byte
	if _, err := crand.Read(suffix[:]); err != nil {
		return nil, err
	}
	r.schema = fmt.Sprintf("tcfleet_%d_%x", os.Getpid(), suffix)
	cleanup, err := r.makeDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if slices.Contains(cfg.Nemesis, KindRestart) || slices.Contains(cfg.Nemesis, KindLose) {
		if err := r.cluster.prepareRestart(ctx, cfg.Restart); err != nil {
			return nil, err
		}
	}
	if slices.Contains(cfg.Nemesis, KindLose) {
		restore, err := r.cluster.asyncCommits(ctx)
		if err != nil {
			return nil, err
		}
		defer restore()
	}
	if r.store, err = OpenStore(ctx, cfg.URL, postgres.Options{Schema: r.schema, KeepTrace: true}); err != nil {
		return nil, err
	}
	defer r.store.Close()
	if !cfg.Keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			for {
				if derr := r.store.DropSchema(dctx); derr == nil || dctx.Err() != nil {
					return
				}
				hold(dctx, 200*time.Millisecond) // the server may be restarting
			}
		}()
	}
	defer func() {
		for _, s := range r.slots {
			s.proxy.Close()
		}
	}()
	defer r.stopWorkers()

	posters, err := r.makePosters()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range posters {
			p.file.Close()
		}
	}()
	if err := r.createThreads(ctx, posters[0]); err != nil {
		return nil, interrupted(ctx, err)
	}
	fmt.Fprintf(progress, "tracecheck fleet: %d runner processes of %d turns, %d threads, %d messages by %d posters, ttl %v, fences %s, nemesis %s, schema %s, directory %s\n",
		cfg.Procs, turns(cfg.Turns), cfg.Threads, cfg.Messages, cfg.Posters, cfg.TTL, fencesText(cfg.Unfenced), nemesisString(cfg.Nemesis), r.schema, r.dir)
	if err := r.startSlots(); err != nil {
		return nil, err
	}

	// Post, with the nemesis running, until every message is consumed.
	nctx, stopNemesis := context.WithCancel(ctx)
	nemesisDone := make(chan error, 1)
	go func() { nemesisDone <- r.nemesis(nctx) }()
	postErr := make(chan error, 1)
	go func() { postErr <- r.post(nctx, posters) }()
	drained, err := r.await(ctx, postErr, nemesisDone)
	stopNemesis()
	if nerr := <-nemesisDone; err == nil && nerr != nil {
		err = nerr
	}
	if left := r.faultsInForce(); err == nil && len(left) > 0 {
		err = fmt.Errorf("the nemesis left faults in force after it stopped: %s", strings.Join(left, "; "))
	}
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	if ctx.Err() == nil {
		if drained, err = r.settle(ctx, drained); err != nil {
			return nil, interrupted(ctx, err)
		}
	}
	r.stopWorkers()
	if ctx.Err() != nil {
		return nil, ErrInterrupted
	}
	return r.check(ctx, drained)
}

// makeDir makes the run's directory: cfg.Dir, which must be empty, or a
// temporary one, removed by cleanup unless cfg.Keep.
func (r *run) makeDir() (cleanup func(), err error) {
	cleanup = func() {}
	if r.cfg.Dir == "" {
		d, err := os.MkdirTemp("", "tracecheck-fleet-")
		if err != nil {
			return cleanup, err
		}
		r.dir = d
		if !r.cfg.Keep {
			cleanup = func() { os.RemoveAll(d) }
		}
		return cleanup, nil
	}
	// Histories are appended to: another run's would be merged in.
	if entries, err := os.ReadDir(r.cfg.Dir); err == nil && len(entries) > 0 {
		return cleanup, configErrorf("-dir %s is not empty", r.cfg.Dir)
	}
	if err := os.MkdirAll(r.cfg.Dir, 0o755); err != nil {
		return cleanup, err
	}
	r.dir = r.cfg.Dir
	return cleanup, nil
}

// startSlots starts the cfg.Procs workers, each behind a proxy of its
// own, their clocks skewed evenly up to cfg.MaxSkew.
func (r *run) startSlots() error {
	cfg := r.cfg
	for i := range cfg.Procs {
		skew := time.Duration(0)
		if cfg.Procs > 1 {
			skew = time.Duration(i) * cfg.MaxSkew / time.Duration(cfg.Procs-1)
		}
		s := &slot{skew: skew}
		p, err := proxyFor(cfg.URL)
		if err != nil {
			return err
		}
		s.proxy, s.url = p.proxy, p.url
		r.slots = append(r.slots, s)
		if _, err := r.startWorker(s); err != nil {
			return err
		}
	}
	return nil
}

// interrupted returns ErrInterrupted when ctx ended, else err.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ErrInterrupted
	}
	return err
}

func nemesisString(ks []Kind) string {
	if len(ks) == 0 {
		return "none"
	}
	return joinKinds(ks)
}

type proxied struct {
	proxy *proxy.Proxy
	url   string
}

// proxyFor starts a proxy in front of the database dbURL names.
func proxyFor(dbURL string) (proxied, error) {
	_, network, address, err := proxiedURL(dbURL, 0)
	if err != nil {
		return proxied{}, err
	}
	p, err := proxy.Listen(network, address)
	if err != nil {
		return proxied{}, err
	}
	u, _, _, err := proxiedURL(dbURL, p.Addr().Port)
	if err != nil {
		p.Close()
		return proxied{}, err
	}
	return proxied{p, u}, nil
}

// await waits until the posters are done and every message is consumed
// (true), or the timeout after the last post (false). It returns an error
// when a worker died by itself, the posters failed, or ctx ended.
func (r *run) await(ctx context.Context, postErr <-chan error, nemesisDone <-chan error) (bool, error) {
	select {
	case err := <-postErr:
		if err != nil {
			return false, err
		}
	case p := <-r.died:
		return false, r.diedError(p)
	case err := <-nemesisDone:
		if err == nil {
			err = ErrInterrupted
		}
		return false, err
	case <-ctx.Done():
		return false, ctx.Err()
	}
	r.mu.Lock()
	r.postedAt = time.Now()
	r.mu.Unlock()
	fmt.Fprintf(r.out, "posted every message after %v; waiting for them to be consumed\n", time.Since(r.start).Round(time.Millisecond))
	drained, _, err := r.drain(ctx, time.Now().Add(r.cfg.Timeout))
	return drained, err
}

// settle looks at the drain again once the faults have ended, waiting
// up to a quarter of the timeout: a last chance to drain, or a second look
// at a drain seen while they ran (seen), which may not hold. Storage that
// loses commits (the lose nemesis) can take back a consumption it had
// acknowledged after the drain was seen: a restart already under way when
// the nemesis was stopped. The runners then consume the message again;
// counted at once, it was lost (a CI run of TestFleetLosesCommits on 6 Dec
// 2026, internal/fleet/BENCH.md).
func (r *run) settle(ctx context.Context, seen bool) (bool, error) {
	drained, work, err := r.drain(ctx, time.Now().Add(r.cfg.Timeout/4))
	if err == nil && seen && work {
		fmt.Fprintf(r.out, "work came back after the faults ended (storage lost acknowledged writes after the drain was seen); drained again: %v\n", drained)
	}
	return drained, err
}

// drain waits until no thread has work (a message to consume, a run
// active) or deadline. work says whether it saw a thread with work.
func (r *run) drain(ctx context.Context, deadline time.Time) (drained, work bool, err error) {
	ws := core.NewWorkspace(r.store, core.SystemClock{})
	for time.Now().Before(deadline) {
		ids, err := ws.Pending(ctx)
		if err == nil && len(ids) == 0 {
			return true, work, nil
		}
		work = work || len(ids) > 0
		select {
		case p := <-r.died:
			return false, work, r.diedError(p)
		case <-ctx.Done():
			return false, work, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false, work, nil
}

func (r *run) diedError(p *proc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	tail, _ := os.ReadFile(p.log)
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	return fmt.Errorf("%w: %s: %v; its log (%s) ends:\n%s", ErrWorkerDied, p.name, p.err, p.log, tail)
}

// poster posts messages through a workspace of its own, tracing to its
// own history file.
type poster struct {
	ws   *core.Workspace
	file *os.File
}

func (r *run) makePosters() ([]*poster, error) {
	var out []*poster
	for i := range r.cfg.Posters {
		name := fmt.Sprintf("poster%d", i+1)
		f, err := os.Create(filepath.Join(r.dir, name+".history"))
		if err != nil {
			for _, p := range out {
				p.file.Close()
			}
			return nil, err
		}
		ws := core.NewWorkspace(r.store, core.SystemClock{}, core.WithProcess(name), core.WithTracer(tracecheck.NewHistoryWriter(f)))
		out = append(out, &poster{ws, f})
	}
	return out, nil
}

func (r *run) createThreads(ctx context.Context, p *poster) error {
	for i := range r.cfg.Threads {
		id := core.ThreadID(fmt.Sprintf("t%d", i+1))
		if err := p.ws.CreateThread(ctx, id); err != nil {
			return err
		}
		r.threads = append(r.threads, id)
	}
	return nil
}

// post posts cfg.Messages, message i to thread i mod Threads by poster i
// mod Posters, paced to spread them over cfg.Duration. A post that fails
// (the server restarting, a session ended) is tried again until ctx ends:
// one whose commit was unknown may then be posted twice, which is two
// messages, each to be consumed once. A message whose post has failed
// for cfg.Timeout ends the posting: post returns that post's last error.
func (r *run) post(ctx context.Context, posters []*poster) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(posters))
	for k, p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < r.cfg.Messages; i += len(posters) {
				if r.cfg.Duration > 0 {
					at := r.start.Add(time.Duration(int64(r.cfg.Duration) * int64(i) / int64(r.cfg.Messages)))
					hold(ctx, time.Until(at))
				}
				id := r.threads[i%len(r.threads)]
				deadline := time.Now().Add(r.cfg.Timeout)
				for {
					r.postGate.RLock()
					_, err := p.ws.Post(ctx, id, fmt.Sprintf("message %d", i+1))
					r.postGate.RUnlock()
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						errs <- ctx.Err()
						return
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("fleet: posting message %d to thread %s failed for %v (-timeout); the last error: %w", i+1, id, r.cfg.Timeout, err)
						cancel() // the other posters stop
						return
					}
					hold(ctx, 20*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// ConnectDeadline bounds opening a store (connecting, creating the
// schema): a server that takes the connection and never answers fails
// the opening, where it waited for ever. A URL's connect_timeout, when
// shorter, ends it sooner. The run's store is opened within it, and so
// are the tracecheck commands' -storage stores (OpenStore).
const ConnectDeadline = 15 * time.Second

// OpenStore opens a store on url with opts within ConnectDeadline; an
// opening the deadline ended says so.
func OpenStore(ctx context.Context, url string, opts postgres.Options) (*postgres.Store, error) {
	octx, cancel := context.WithTimeout(ctx, ConnectDeadline)
	defer cancel()
	s, err := postgres.Open(octx, url, opts)
	if err != nil && ctx.Err() == nil && errors.Is(octx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w (no answer within %v)", err, ConnectDeadline)
	}
	return s, err
}
