package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// BenchmarkConsumingWriteSplit splits a consuming write's time between
// the client and the server. It alternates, op by op on one pool, three
// writes of a thread's row:
//
//	fenced   a fenced RunStart through the Workspace and the Store
//	raw      the very statement the Store sends for it (the one-statement
//	         write, check and event included), prepared, sent by hand on a
//	         connection of the same pool with its arguments encoded
//	         beforehand, as the Store encodes them: the server's work and
//	         the protocol, without the Workspace and the Store
//	update   one autocommitted UPDATE of the thread's row
//
// fenced − raw is then the client's part (the Workspace, the fold, the
// Store's encoding and its connection handling), raw − update the
// server's and the larger message's.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench ConsumingWriteSplit -benchtime 3000x -count 4
func BenchmarkConsumingWriteSplit(b *testing.B) {
	ctx := context.Background()
	s, ws, update := pairedStore(ctx, b)
	var (
		c      core.Claim
		starts []func(context.Context) error
	)
	var raw *rawThread
	fresh := func(i int) {
		c, starts = storetest.FreshStarts(ctx, b, s, core.SystemClock{}, 2*i, 256)
		raw = newRawThread(ctx, b, s, storetest.FreshClaim(ctx, b, ws, 2*i+1).Thread)
	}
	fresh(0)
	var fenced, sent, plain []time.Duration
	b.ResetTimer()
	storetest.Ops(b, 256, fresh, func(int) error {
		start := starts[0]
		starts = starts[1:]
		t0 := time.Now()
		if err := start(ctx); err != nil {
			return err
		}
		t1 := time.Now()
		raw.next(t1)
		t2 := time.Now()
		if err := raw.send(ctx); err != nil {
			return fmt.Errorf("raw write: %w", err)
		}
		t3 := time.Now()
		if _, err := s.pool.Exec(ctx, update, string(c.Thread)); err != nil {
			return err
		}
		fenced, sent, plain = append(fenced, t1.Sub(t0)), append(sent, t3.Sub(t2)), append(plain, time.Since(t3))
		return nil
	})
	b.StopTimer()
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	f, r, u := med(fenced), med(sent), med(plain)
	b.ReportMetric(float64(f.Microseconds()), "fenced-µs")
	b.ReportMetric(float64(r.Microseconds()), "raw-µs")
	b.ReportMetric(float64(u.Microseconds()), "update-µs")
	b.ReportMetric(float64(f)/float64(u), "fenced/update")
	b.ReportMetric(float64(r)/float64(u), "raw/update")
}

// rawThread is a claimed thread written by hand with the very statement
// the Store sends for a RunStart (checkedWriteSQL), its arguments encoded
// beforehand as the Store encodes them; TestRawWrite keeps it in step
// with the statement.
type rawThread struct {
	s    *Store
	args [][]byte
	// The row as the last write left it: its version, log_n and log_at.
	version, seq, lastAt int64
}

// newRawThread reads the row of thread id, claimed and with one message.
func newRawThread(ctx context.Context, tb testing.TB, s *Store, id core.ThreadID) *rawThread {
	tb.Helper()
	r := &rawThread{s: s}
	var created int64
	var holder string
	var expires time.Time
	var logAt *time.Time
	err := s.pool.QueryRow(ctx, fmt.Sprintf(`SELECT created, version, log_n, log_at, lease_holder, lease_expires
		FROM %s.threads WHERE id = $1`, pgx.Identifier{s.Schema()}.Sanitize()),
		string(id)).Scan(&created, &r.version, &r.seq, &logAt, &holder, &expires)
	if err != nil {
		tb.Fatal(err)
	}
	if logAt == nil || r.seq == 0 {
		tb.Fatalf("thread %s: a claimed thread with a message has no log end (log_n %d)", id, r.seq)
	}
	r.lastAt = pgMicros(*logAt)
	// checkedWriteSQL's arguments (fastpath.go): the check ($1-$5), the
	// row ($6-$9), the event ($10-$18), the log's end as checked ($19,
	// $20) and as written ($21, $22); nil: set at each write.
	r.args = [][]byte{[]byte(id), be(created), nil, []byte(holder), be(pgMicros(expires)), nil, be(0), be(1), be(1),
		nil, nil, []byte(core.RunStarted), nil, be(1), []byte(""), nil, be(0), []byte(holder), nil, nil, nil, nil}
	return r
}

// next encodes the arguments of the next write: a run's start at at.
func (r *rawThread) next(at time.Time) {
	a, v, n := pgMicros(at), r.version, r.seq
	r.args[2], r.args[5], r.args[9], r.args[10], r.args[15] = be(v), be(v+1), be(n+1), be(v+1), be(n+1)
	r.args[12], r.args[18], r.args[19], r.args[20], r.args[21] = be(a), be(n), be(r.lastAt), be(n+1), be(a)
}

// send sends the statement with next's arguments on a connection of the
// Store's pool.
func (r *rawThread) send(ctx context.Context) error {
	c, err := r.s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	sd, err := c.Conn().Prepare(ctx, "split_raw", r.s.q.saveUnchanged)
	if err != nil {
		return err
	}
	if _, err := c.Conn().PgConn().ExecStatement(ctx, sd, r.args, []int16{pgx.BinaryFormatCode}, nil).Close(); err != nil {
		return err
	}
	r.version, r.seq = r.version+1, r.seq+1
	r.lastAt = int64(binary.BigEndian.Uint64(r.args[21]))
	return nil
}

// TestRawWrite keeps BenchmarkConsumingWriteSplit's hand-made write in
// step with the Store's statement: it ran with the arguments of an older
// statement (18 of 22) and failed, unseen, since benchmarks are not part
// of the tests. Two writes, the second checked against the row the first
// left; then the row's version, its log end and the events counted.
func TestRawWrite(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t)
	ws := core.NewWorkspace(s, core.SystemClock{})
	id := core.ThreadID("raw")
	require.NoError(t, ws.CreateThread(ctx, id))
	_, err := ws.Post(ctx, id, "m")
	require.NoError(t, err)
	_, err = ws.Claim(ctx, id, "h-raw", time.Hour)
	require.NoError(t, err)
	r := newRawThread(ctx, t, s, id)
	v0, n0 := r.version, r.seq
	for range 2 {
		r.next(time.Now())
		require.NoError(t, r.send(ctx), "the hand-made write, checked against the row")
	}
	var version, logN, events int64
	require.NoError(t, s.pool.QueryRow(ctx, fmt.Sprintf(`SELECT version, log_n, (SELECT count(*) FROM %[1]s.events WHERE thread_id = $1)
		FROM %[1]s.threads WHERE id = $1`, pgx.Identifier{s.Schema()}.Sanitize()), string(id)).Scan(&version, &logN, &events))
	require.Equal(t, []int64{v0 + 2, n0 + 2, n0 + 2}, []int64{version, logN, events}, "version, log_n and events after two writes")
}

// be is i in PostgreSQL's binary form of a bigint.
func be(i int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
