package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// BenchmarkConsumingWrite is the conformance suite's benchmark of
// RunStart on a real server, beside what it is compared with:
//
//	write=fenced          RunStart, every fence on (a deployment): one round trip
//	write=unfenced        RunStart with the fences off (WithFencesForTesting)
//	write=fenced-locking  RunStart with LockingReads: two round trips
//	write=fenced-nocache  RunStart folding the whole log each time (CachedThreads -1)
//	write=update-tx       BEGIN; one UPDATE of the thread's row; COMMIT (pgx.Tx)
//	write=update          the same UPDATE alone, autocommitted: one round trip
//
// Compare side by side with benchstat:
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench ConsumingWrite -count 6 > bench.txt
//	benchstat -col /write bench.txt
func BenchmarkConsumingWrite(b *testing.B) {
	with := func(opts Options) func(b *testing.B) core.Storage {
		return func(b *testing.B) core.Storage {
			opts.Schema = testSchema(b)
			s, err := open(context.Background(), poolConfig(b, "tc-bench"), opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			return s
		}
	}
	update := func(tx bool) func(s core.Storage, c core.Claim) func(ctx context.Context) error {
		return func(cs core.Storage, c core.Claim) func(ctx context.Context) error {
			s := cs.(*Store)
			q := `UPDATE ` + pgx.Identifier{s.Schema()}.Sanitize() + `.threads SET version = version + 1 WHERE id = $1`
			if tx {
				return func(ctx context.Context) error {
					return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
						_, err := tx.Exec(ctx, q, string(c.Thread))
						return err
					})
				}
			}
			return func(ctx context.Context) error {
				_, err := s.pool.Exec(ctx, q, string(c.Thread))
				return err
			}
		}
	}
	storetest.BenchmarkConsumingWrite(b, with(Options{}),
		storetest.WriteBench{Name: "fenced-locking", Storage: with(Options{LockingReads: true})},
		storetest.WriteBench{Name: "fenced-nocache", Storage: with(Options{CachedThreads: -1})},
		storetest.WriteBench{Name: "update-tx", Op: update(true)},
		storetest.WriteBench{Name: "update", Op: update(false)},
	)
}

// BenchmarkWakeUp measures how long a posted message takes to wake a
// listener in another Store: from Post's call to the wake-up's arrival,
// with its p50 and p99 reported as metrics. Each post goes to a thread of
// its own, made off the clock: only a post to a free thread with no work
// wakes anyone (postSQL), so a second post to one thread would wait for
// a wake-up that never comes. A wake-up that does not come within
// wakeWithin fails the benchmark, naming the thread.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench WakeUp -count 6
func BenchmarkWakeUp(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(b)
	listener, err := open(ctx, poolConfig(b, "tc-bench"), Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer listener.Close()
	poster, err := open(ctx, poolConfig(b, "tc-bench"), Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer poster.Close()
	ws := core.NewWorkspace(poster, core.SystemClock{})
	const wakeWithin = 10 * time.Second
	var id core.ThreadID
	fresh := func(i int) {
		id = core.ThreadID(fmt.Sprintf("t%d", i))
		if err := ws.CreateThread(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	wake, err := listener.Listen(ctx)
	if err != nil {
		b.Fatal(err)
	}
	fresh(0)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	storetest.Ops(b, 1, fresh, func(int) error {
		start := time.Now()
		if _, err := ws.Post(ctx, id, "m"); err != nil {
			return err
		}
		select {
		case got := <-wake:
			if got != id {
				return fmt.Errorf("woken for %q, posted to %q", got, id)
			}
		case <-time.After(wakeWithin):
			return fmt.Errorf("no wake-up within %v of the post to %q, a free thread with no work", wakeWithin, id)
		}
		lat = append(lat, time.Since(start))
		return nil
	})
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkConsumingWritePaired measures the ratio the one-round-trip
// target is stated in — a fenced RunStart against one autocommitted
// UPDATE of the thread's row — with the two alternating, op by op, on the
// same connection pool and server: a load that comes and goes on a shared
// machine then weighs on both alike, where separate sub-benchmarks, each
// a few seconds long, may each meet a different load. It reports the
// median of each and their ratio (fenced/update). first= says which of
// the two goes first in each pair: the op after a write of the row pays
// for some of that write's aftermath on the server, so both orders are
// measured.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench ConsumingWritePaired -benchtime 3000x -count 4
func BenchmarkConsumingWritePaired(b *testing.B) {
	inEachOrder(b, "fenced", "update", benchPaired)
}

// inEachOrder runs bench for a pair of ops alternated op by op, once
// with x first (first=x) and once with y first (first=y).
func inEachOrder(b *testing.B, x, y string, bench func(b *testing.B, xFirst bool)) {
	for _, xFirst := range []bool{true, false} {
		name := "first=" + x
		if !xFirst {
			name = "first=" + y
		}
		b.Run(name, func(b *testing.B) { bench(b, xFirst) })
	}
}

// reportMedians reports the medians of the paired ops' times, x's and
// y's, in µs, and their ratio x/y.
func reportMedians(b *testing.B, x, y string, xs, ys []time.Duration) {
	slices.Sort(xs)
	slices.Sort(ys)
	mx, my := xs[len(xs)/2], ys[len(ys)/2]
	b.ReportMetric(float64(mx.Microseconds()), x+"-µs")
	b.ReportMetric(float64(my.Microseconds()), y+"-µs")
	b.ReportMetric(float64(mx)/float64(my), x+"/"+y)
}

// pairedStore opens a Store on a schema of its own for a benchmark that
// sets its writes against one autocommitted UPDATE of a thread's row, with
// a Workspace over it, and returns them with that UPDATE's text (its one
// argument: the thread's id). The Store closes when b ends.
func pairedStore(ctx context.Context, b *testing.B) (*Store, *core.Workspace, string) {
	b.Helper()
	s, err := open(ctx, poolConfig(b, "tc-bench"), Options{Schema: testSchema(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	ws := core.NewWorkspace(s, core.SystemClock{})
	update := `UPDATE ` + pgx.Identifier{s.Schema()}.Sanitize() + `.threads SET last_message = last_message WHERE id = $1`
	return s, ws, update
}

func benchPaired(b *testing.B, fencedFirst bool) {
	ctx := context.Background()
	s, _, update := pairedStore(ctx, b)
	var (
		c      core.Claim
		starts []func(context.Context) error
	)
	fresh := func(i int) { c, starts = storetest.FreshStarts(ctx, b, s, core.SystemClock{}, i, 256) }
	fresh(0)
	fenced := make([]time.Duration, 0, b.N)
	plain := make([]time.Duration, 0, b.N)
	ops := [2]func() error{
		func() error { start := starts[0]; starts = starts[1:]; return start(ctx) },
		func() error { _, err := s.pool.Exec(ctx, update, string(c.Thread)); return err },
	}
	times := [2]*[]time.Duration{&fenced, &plain}
	if !fencedFirst {
		ops[0], ops[1], times[0], times[1] = ops[1], ops[0], times[1], times[0]
	}
	b.ResetTimer()
	storetest.Ops(b, 256, fresh, func(int) error {
		for i, op := range ops {
			t0 := time.Now()
			if err := op(); err != nil {
				return err
			}
			*times[i] = append(*times[i], time.Since(t0))
		}
		return nil
	})
	b.StopTimer()
	reportMedians(b, "fenced", "update", fenced, plain)
}

// BenchmarkRowChecks measures what migration 0010 bought: a Post (its
// thread row's UPDATE and its event's insert, one statement) on a schema
// with the CHECK constraints 0010 dropped from threads and events put
// back, against a Post on a schema without them, alternated op by op on
// one server, round-robin over 100 threads each; the ratio is of the two
// sides' medians. first= says which goes first in each pair.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench RowChecks -benchtime 5000x -count 3
func BenchmarkRowChecks(b *testing.B) {
	postsInEachOrder(b, "checked", "unchecked", func(ctx context.Context, s *Store) error {
		_, err := s.pool.Exec(ctx, addDroppedChecksSQL(pgx.Identifier{s.Schema()}.Sanitize()))
		return err
	})
}

// BenchmarkMessagesTable measures what migration 0011 bought: a Post as
// the Store sent it before 0011 (postWithMessageSQL: its event's insert
// and a second copy of the message in the messages table, one statement),
// on a schema with that table put back, against a Post as it is sent now,
// alternated op by op on one server as BenchmarkRowChecks is.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench MessagesTable -benchtime 5000x -count 3
func BenchmarkMessagesTable(b *testing.B) {
	postsInEachOrder(b, "messages", "events", func(ctx context.Context, s *Store) error {
		q := pgx.Identifier{s.Schema()}.Sanitize()
		_, err := s.pool.Exec(ctx, `CREATE TABLE `+q+`.messages (
			thread_id text NOT NULL, seq bigint NOT NULL, text text NOT NULL, posted_at timestamptz NOT NULL,
			PRIMARY KEY (thread_id, seq))`)
		if err != nil {
			return err
		}
		s.q.post, err = postWithMessageSQL(q)
		return err
	})
}

// postWithMessageSQL is postSQL for the schema q (quoted) with the second
// copy of the message that a post made before migration 0011: its row in
// the messages table, inserted from the row the UPDATE returned.
func postWithMessageSQL(q string) (string, error) {
	const end, withCopy = "\n)\nSELECT ", `
), m AS (
	INSERT INTO %[1]s.messages (thread_id, seq, text, posted_at)
	SELECT id, last_message, $2, $3 FROM w
)
SELECT `
	if strings.Count(postSQL, end) != 1 {
		return "", fmt.Errorf("postSQL no longer ends its WITH with %q: put the messages copy back by hand", end)
	}
	return fmt.Sprintf(strings.Replace(postSQL, end, withCopy, 1), q), nil
}

// postsInEachOrder runs benchPosts for x (the Store setup changes) and y
// in each order.
func postsInEachOrder(b *testing.B, x, y string, setup func(context.Context, *Store) error) {
	inEachOrder(b, x, y, func(b *testing.B, xFirst bool) { benchPosts(b, xFirst, x, y, setup) })
}

// benchPosts times Posts on two Stores of schemas of their own, alternated
// op by op, round-robin over 100 threads each: x's, which setup changes
// before the threads are made, and y's, as Open leaves it; xFirst says
// which posts first in each pair. It reports the two sides' medians and
// their ratio.
func benchPosts(b *testing.B, xFirst bool, x, y string, setup func(context.Context, *Store) error) {
	const threads = 100
	ctx := context.Background()
	xs, xWS, _ := pairedStore(ctx, b)
	if err := setup(ctx, xs); err != nil {
		b.Fatal(err)
	}
	_, yWS, _ := pairedStore(ctx, b)
	for _, ws := range []*core.Workspace{xWS, yWS} {
		for i := range threads {
			if err := ws.CreateThread(ctx, core.ThreadID(fmt.Sprintf("t%03d", i))); err != nil {
				b.Fatal(err)
			}
		}
	}
	xt := make([]time.Duration, 0, b.N)
	yt := make([]time.Duration, 0, b.N)
	wss := [2]*core.Workspace{xWS, yWS}
	times := [2]*[]time.Duration{&xt, &yt}
	if !xFirst {
		wss[0], wss[1], times[0], times[1] = wss[1], wss[0], times[1], times[0]
	}
	b.ResetTimer()
	for i := range b.N {
		id := core.ThreadID(fmt.Sprintf("t%03d", i%threads))
		for k, ws := range wss {
			t0 := time.Now()
			if _, err := ws.Post(ctx, id, "m"); err != nil {
				b.Fatal(err)
			}
			*times[k] = append(*times[k], time.Since(t0))
		}
	}
	b.StopTimer()
	reportMedians(b, x, y, xt, yt)
}

// BenchmarkUpdateOverhead measures what an Update costs the client alone:
// fn reads and writes nothing, so the transaction takes no connection and
// sends nothing (commit's "fn read and wrote nothing"), and what is left
// is run's own work: the pooled txn, its reset, and the handle fn is
// given (newHandle: 16 bytes of a slab of 64, no allocation of its own).
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench UpdateOverhead -benchmem -count 6
func BenchmarkUpdateOverhead(b *testing.B) {
	s := newStore(b)
	ctx := context.Background()
	fn := func(context.Context, core.Transaction) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Update(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
}
