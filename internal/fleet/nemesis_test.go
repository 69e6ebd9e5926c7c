package fleet

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/fleet/proxy"
)

// The nemesis deals each kind once before any twice, so that a short run
// has every kind: every round of len(kinds) kinds taken holds each kind
// once, a kind not taken stays next, and the rounds' orders come from the
// seed (two seeds, two different orders in some round).
func TestKindDeckDealsEachKindOncePerRound(t *testing.T) {
	kinds := []Kind{KindStop, KindKill, KindClock, KindTerminate, KindPartition, KindLatency, KindCommit, KindRetire, KindRewind}
	deal := func(seed uint64) [][]Kind {
		rng := rand.New(rand.NewPCG(seed, 0))
		d := kindDeck{kinds: kinds}
		var rounds [][]Kind
		for range 20 {
			var round []Kind
			for range kinds {
				k := d.next(rng)
				require.Equal(t, k, d.next(rng), "a kind not taken stays next")
				d.take()
				round = append(round, k)
			}
			got := slices.Clone(round)
			slices.Sort(got)
			want := slices.Clone(kinds)
			slices.Sort(want)
			require.Equal(t, want, got, "a round deals each kind once")
			rounds = append(rounds, round)
		}
		return rounds
	}
	require.Equal(t, deal(1), deal(1), "the same seed deals the same order")
	require.NotEqual(t, deal(1), deal(2), "the order is shuffled with the seed")
}

// echoServer starts a TCP server that writes back what it reads: a proxy
// in front of it shows its faults on a plain byte stream.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// faultRun is a run of n slots for the nemesis to fault: each a worker
// process (a script that sleeps, whatever its arguments, started as the
// fleet starts a worker) behind a proxy to an echo server, and a cluster
// whose restart fails at once (pg_ctl is /bin/false).
func faultRun(t *testing.T, ttl time.Duration, seed uint64, n int) *run {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "worker")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 300\n"), 0o755))
	r := &run{
		cfg: Config{Bin: bin, TTL: ttl, Poll: ttl, NemesisEvery: time.Millisecond},
		out: io.Discard, start: time.Now(), dir: dir, schema: "fault", stopGrace: 10 * time.Second,
		cluster: &cluster{pgCtl: "/bin/false", dataDir: dir},
		died:    make(chan *proc, n),
		rng:     rand.New(rand.NewPCG(seed, 0)), workerRNG: rand.New(rand.NewPCG(seed, 1)),
	}
	up := echoServer(t)
	for range n {
		px, err := proxy.Listen("tcp", up)
		require.NoError(t, err)
		t.Cleanup(func() { _ = px.Close() })
		s := &slot{proxy: px, skew: 10 * time.Millisecond}
		_, err = r.startWorker(s)
		require.NoError(t, err)
		r.slots = append(r.slots, s)
	}
	t.Cleanup(func() {
		r.mu.Lock()
		procs := slices.Clone(r.procs)
		r.mu.Unlock()
		for _, p := range procs {
			p.setMeant()
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return r
}

// waitUntil polls cond every millisecond until it holds, failing the test
// when it has not within 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "waited 10s for %s", what)
		time.Sleep(time.Millisecond)
	}
}

// injectEnded injects a fault of kind on slot s (nil: the server) with
// its run over already, so that each hold ends at once, and returns
// inject's error, failing the test when inject has not returned within
// 10s.
func injectEnded(t *testing.T, r *run, kind Kind, s *slot) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return injectWithin(t, ctx, r, kind, s)
}

// injectWithin injects a fault of kind on slot s (nil: the server) in a
// run whose context is ctx, and returns inject's error, failing the test
// when inject has not returned within 10s.
func injectWithin(t *testing.T, ctx context.Context, r *run, kind Kind, s *slot) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.inject(ctx, kind, s) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("inject(%s) did not return within 10s", kind)
		return nil
	}
}

// procState is the state letter of process pid (T: stopped).
func procState(t *testing.T, pid int) byte {
	t.Helper()
	st, err := processState(pid)
	require.NoError(t, err)
	return st
}

// dialProxy connects to slot s's proxy.
func dialProxy(t *testing.T, s *slot) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.proxy.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echoed sends msg on c and reports whether the echo came back within d.
func echoed(t *testing.T, c net.Conn, msg []byte, d time.Duration) bool {
	t.Helper()
	_, err := c.Write(msg)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	buf := make([]byte, len(msg))
	_, err = io.ReadFull(c, buf)
	if err != nil {
		var ne net.Error
		require.True(t, errors.As(err, &ne) && ne.Timeout(), "the echo: %v", err)
		return false
	}
	require.Equal(t, msg, buf)
	return true
}

// Protocol messages for the proxy's reading of the client's half: a
// StartupMessage (protocol 3.0, no parameters), then simple queries.
var (
	pgStartup = []byte{0, 0, 0, 8, 0, 3, 0, 0}
	pgSelect  = append([]byte{'Q', 0, 0, 0, 13}, "select 1\x00"...)
	pgCommit  = append([]byte{'Q', 0, 0, 0, 11}, "commit\x00"...)
	noPG      = []byte("not postgres, 16")
)

// Each kind the nemesis injects on a worker's slot is in force while it
// holds, as the kind its name says, and is over once inject returns (its
// run's end cuts its hold short): a stop continued, a lease clock put
// back, a partition healed (the connections that lived through it
// closed), latency and held COMMITs off. Written against mutants of the
// seventeenth pass that injected partitions or held COMMITs as latency,
// and that left each of these faults on for ever.
func TestInjectEachFaultAsNamedAndEnded(t *testing.T) {
	const ttl = time.Hour // a fault holds for hours, until the test ends it
	for _, tc := range []struct {
		kind Kind
		// during reports whether the fault is seen in force; after
		// checks that it is over.
		during func(t *testing.T, r *run, s *slot, p *proc) bool
		after  func(t *testing.T, r *run, s *slot, p *proc)
	}{
		{KindStop,
			func(t *testing.T, r *run, s *slot, p *proc) bool { return procState(t, p.cmd.Process.Pid) == 'T' },
			func(t *testing.T, r *run, s *slot, p *proc) {
				waitUntil(t, "the stopped worker to be continued", func() bool { return procState(t, p.cmd.Process.Pid) != 'T' })
			}},
		{KindClock,
			func(t *testing.T, r *run, s *slot, p *proc) bool {
				b, err := os.ReadFile(p.clockFile)
				require.NoError(t, err)
				o, err := time.ParseDuration(strings.TrimSpace(string(b)))
				require.NoError(t, err)
				if o == s.skew {
					return false
				}
				jump := (o - s.skew).Abs()
				require.True(t, jump >= ttl && jump <= 3*ttl, "a clock jump of %v", o-s.skew)
				return true
			},
			func(t *testing.T, r *run, s *slot, p *proc) {
				b, err := os.ReadFile(p.clockFile)
				require.NoError(t, err)
				require.Equal(t, s.skew.String(), strings.TrimSpace(string(b)), "the lease clock put back")
				require.Equal(t, s.skew, p.offset(time.Now()))
			}},
		{KindPartition,
			func(t *testing.T, r *run, s *slot, p *proc) bool { return true },
			nil}, // below: the link that lived through it is closed
		{KindLatency,
			func(t *testing.T, r *run, s *slot, p *proc) bool {
				return !echoed(t, dialProxy(t, s), noPG, 200*time.Millisecond) // at least TTL/4 a round trip
			},
			nil},
		{KindCommit,
			func(t *testing.T, r *run, s *slot, p *proc) bool {
				c := dialProxy(t, s)
				require.True(t, echoed(t, c, pgStartup, 10*time.Second), "a startup message held while COMMITs are")
				require.True(t, echoed(t, c, pgSelect, 10*time.Second), "a query that is not a COMMIT held while COMMITs are")
				return !echoed(t, c, pgCommit, 200*time.Millisecond) // held for over a TTL
			},
			func(t *testing.T, r *run, s *slot, p *proc) {
				c := dialProxy(t, s)
				require.True(t, echoed(t, c, pgStartup, 10*time.Second))
				require.True(t, echoed(t, c, pgCommit, 10*time.Second), "a COMMIT held after the fault")
			}},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			r := faultRun(t, ttl, 1, 1)
			s := r.slots[0]
			p := s.current()
			before := dialProxy(t, s)
			require.True(t, echoed(t, before, noPG, 10*time.Second), "an echo before the fault")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- r.inject(ctx, tc.kind, s) }()
			waitUntil(t, "the "+string(tc.kind)+" fault in force", func() bool { return tc.during(t, r, s, p) })
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatalf("inject(%s) did not return within 10s of its run's end", tc.kind)
			}
			if tc.after != nil {
				tc.after(t, r, s, p)
			}
			// Every proxy fault is off: a new connection echoes.
			require.True(t, echoed(t, dialProxy(t, s), noPG, 10*time.Second), "an echo after the %s fault", tc.kind)
			if tc.kind == KindPartition {
				require.NoError(t, before.SetReadDeadline(time.Now().Add(10*time.Second)))
				_, err := before.Read(make([]byte, 1))
				var ne net.Error
				require.False(t, errors.As(err, &ne) && ne.Timeout(), "a connection that lived through the partition is closed at its heal: %v", err)
				require.Error(t, err)
			}
			require.Len(t, r.events, 1)
			ev := r.events[0]
			require.Equal(t, tc.kind, ev.Kind)
			require.Empty(t, ev.Err)
			require.Equal(t, p.name, ev.Target)
			require.GreaterOrEqual(t, ev.End, ev.Start)
		})
	}
}

// A kill (SIGKILL) and a retirement (a partition, healed, then SIGTERM)
// each end the slot's worker as meant (its exit is no failure) and start
// a new one in its slot; a kill is counted among the kills the handovers
// are timed from, a retirement is not, and its partition is over. Written
// against mutants of the seventeenth pass that left the kill unmeant or
// uncounted, and the retired worker's slot cut off for ever.
func TestInjectReplacesTheWorker(t *testing.T) {
	for _, kind := range []Kind{KindKill, KindRetire} {
		t.Run(string(kind), func(t *testing.T) {
			r := faultRun(t, time.Hour, 1, 1)
			s := r.slots[0]
			p := s.current()
			require.NoError(t, injectEnded(t, r, kind, s))
			select {
			case <-p.done:
			default:
				t.Fatalf("%s: the worker has not exited", kind)
			}
			p.mu.Lock()
			meant := p.meant
			p.mu.Unlock()
			require.True(t, meant, "the fleet's own %s is meant, not a worker that died", kind)
			np := s.current()
			require.NotSame(t, p, np)
			require.Len(t, r.events, 1)
			require.Empty(t, r.events[0].Err)
			require.Contains(t, r.events[0].Detail, "replaced by "+np.name)
			if kind == KindKill {
				require.Len(t, r.kills, 1)
				require.Same(t, p, r.kills[0].proc)
			} else {
				require.Empty(t, r.kills, "a clean stop counted as a kill")
			}
			require.True(t, echoed(t, dialProxy(t, s), noPG, 10*time.Second), "the slot's proxy passes nothing after the %s", kind)
		})
	}
}

// A restart of the cluster is pg_ctl restart, fast (or immediate, drawn,
// when no acknowledged commit can be lost); the lose kind's is always
// immediate, to lose the commits whose WAL was not written. Written
// against a mutant of the seventeenth pass that restarted fast for lose,
// so that it lost nothing while the report said it did.
func TestRestartModes(t *testing.T) {
	r := faultRun(t, time.Hour, 1, 1)
	args := filepath.Join(r.dir, "pg_ctl.args")
	r.cluster.pgCtl = filepath.Join(r.dir, "pg_ctl")
	require.NoError(t, os.WriteFile(r.cluster.pgCtl, []byte("#!/bin/sh\necho \"$@\" >>"+args+"\n"), 0o755))
	for _, tc := range []struct {
		kind      Kind
		immediate bool // the cluster's: synchronous_commit is on
		modes     []string
	}{
		{KindLose, false, []string{"immediate"}},
		{KindRestart, false, []string{"fast"}},
		{KindRestart, true, []string{"fast", "immediate"}},
	} {
		r.cluster.immediate = tc.immediate
		seen := map[string]bool{}
		for range 12 {
			require.NoError(t, os.WriteFile(args, nil, 0o644))
			require.NoError(t, injectWithin(t, context.Background(), r, tc.kind, nil)) // a restart holds nothing
			b, err := os.ReadFile(args)
			require.NoError(t, err)
			f := strings.Fields(string(b))
			i := slices.Index(f, "-m")
			require.True(t, i >= 0 && i+1 < len(f), "%s: pg_ctl %s", tc.kind, b)
			seen[f[i+1]] = true
		}
		var modes []string
		for m := range seen {
			modes = append(modes, m)
		}
		slices.Sort(modes)
		require.Equal(t, tc.modes, modes, "%s, immediate %v", tc.kind, tc.immediate)
	}
	for _, ev := range r.events {
		require.Empty(t, ev.Err)
	}
}

// A worker that exits by itself, not ended by the fleet, is reported on
// the run's died channel (the run then fails with ErrWorkerDied); one the
// fleet ends itself is not. Written against a mutant of the seventeenth
// pass that reported the meant exits and let the others go unseen.
func TestStartWorkerReportsADeath(t *testing.T) {
	r := faultRun(t, time.Hour, 1, 1)
	s := r.slots[0]
	require.NoError(t, os.WriteFile(r.cfg.Bin+"-exits", []byte("#!/bin/sh\nexit 3\n"), 0o755))
	r.cfg.Bin += "-exits"
	p, err := r.startWorker(s)
	require.NoError(t, err)
	select {
	case d := <-r.died:
		require.Same(t, p, d)
	case <-time.After(10 * time.Second):
		t.Fatal("a worker that exited by itself was not reported within 10s")
	}
}

// When its run ends, the nemesis heals the faults in progress at once
// and returns, its slots free again; until then it deals every kind of
// its deck, the restart (which holds no slot) once a round like the
// others. Written against mutants of the seventeenth pass: the free
// slots drawn from the busy ones, a slot never marked busy or never
// freed, a hold that outlived its run, and a restart that stayed next
// in the deck (so that, dealt first, it was all the nemesis injected).
func TestNemesisHealsWhenItsRunEnds(t *testing.T) {
	for seed := range uint64(4) {
		r := faultRun(t, time.Hour, seed, 2)
		r.cfg.Nemesis = []Kind{KindRestart, KindStop, KindClock}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.nemesis(ctx) }()
		busy := func() int {
			n := 0
			for _, s := range r.slots {
				s.mu.Lock()
				if s.busy {
					n++
				}
				s.mu.Unlock()
			}
			return n
		}
		waitUntil(t, "a stop and a clock jump holding both slots", func() bool { return busy() == 2 })
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("seed %d: the nemesis did not return within 10s of its run's end", seed)
		}
		require.Zero(t, busy(), "seed %d: a slot still held after the nemesis returned", seed)
		got := map[Kind]int{}
		for _, ev := range r.events {
			got[ev.Kind]++
		}
		require.Equal(t, 1, got[KindStop], "seed %d: %v", seed, got)
		require.Equal(t, 1, got[KindClock], "seed %d: %v", seed, got)
		for _, s := range r.slots {
			p := s.current()
			require.NotEqual(t, byte('T'), procState(t, p.cmd.Process.Pid), "seed %d: %s left stopped", seed, p.name)
			require.Equal(t, s.skew, p.offset(time.Now()), "seed %d: %s's lease clock left off", seed, p.name)
		}
	}
}

// between draws from lo to hi, both included: the nemesis flips a coin
// with between(0, 1) (a clock jump back or forward, a restart fast or
// immediate). Written against a mutant of the seventeenth pass that
// drew from [lo, hi), so that every clock jump went back and no restart
// was immediate.
func TestBetweenIncludesBothEnds(t *testing.T) {
	r := &run{rng: rand.New(rand.NewPCG(1, 2))}
	seen := map[time.Duration]bool{}
	for range 200 {
		d := r.between(0, 1)
		require.True(t, d == 0 || d == 1, "between(0, 1) = %v", d)
		seen[d] = true
		d = r.between(5, 8)
		require.True(t, d >= 5 && d <= 8, "between(5, 8) = %v", d)
	}
	require.Len(t, seen, 2, "between(0, 1) gave one side only")
}

// A clock fault jumps the worker's lease clock back or forward, by one to
// three TTLs, each about as often: the nemesis makes clocks run behind as
// well as ahead. Written against a mutant of the seventeenth pass whose
// jumps all went forward.
func TestClockJumpsBothWays(t *testing.T) {
	const ttl = time.Hour
	r := faultRun(t, ttl, 1, 1)
	s := r.slots[0]
	p := s.current()
	signs := map[bool]int{}
	for range 16 {
		require.NoError(t, injectEnded(t, r, KindClock, s))
		p.mu.Lock()
		jump := p.offsets[len(p.offsets)-2].offset - s.skew
		back := p.offsets[len(p.offsets)-1].offset
		p.mu.Unlock()
		require.True(t, jump.Abs() >= ttl && jump.Abs() <= 3*ttl, "a clock jump of %v", jump)
		require.Equal(t, s.skew, back, "the lease clock put back")
		signs[jump < 0]++
	}
	require.Len(t, signs, 2, "16 clock jumps, all one way: %v", signs)
}

// faultsInForce, which the run asks once the nemesis has returned, names
// each fault left on a worker's slot (its proxy's, a lease clock off its
// skew, a worker stopped) and nothing once every one is healed: the soak
// itself, not only this package's unit tests, refuses a run the nemesis
// never let recover.
func TestFaultsInForceNamed(t *testing.T) {
	r := faultRun(t, time.Hour, 1, 2)
	require.Empty(t, r.faultsInForce(), "workers just started")
	s := r.slots[1]
	p := s.current()
	s.proxy.SetLatency(7 * time.Millisecond)
	s.proxy.Partition(true)
	require.NoError(t, p.setOffset(s.skew+time.Second))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGSTOP))
	waitUntil(t, "the worker stopped", func() bool { return procState(t, p.cmd.Process.Pid) == 'T' })
	left := strings.Join(r.faultsInForce(), "\n")
	for _, want := range []string{p.name + ": partitioned", p.name + ": latency 7ms", p.name + `: lease clock offset "1.01s"`, p.name + ": stopped"} {
		require.Contains(t, left, want)
	}
	require.NotContains(t, left, r.slots[0].current().name+":", "the other worker has no fault")
	s.proxy.SetLatency(0)
	s.proxy.Partition(false)
	require.NoError(t, p.setOffset(s.skew))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGCONT))
	waitUntil(t, "the worker continued", func() bool { return procState(t, p.cmd.Process.Pid) != 'T' })
	require.Empty(t, r.faultsInForce(), "every fault healed")
}
