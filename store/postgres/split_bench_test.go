package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	var rawID string
	var rawArgs [][]byte
	var version, seq int64
	fresh := func(i int) {
		c, starts = storetest.FreshStarts(ctx, b, s, core.SystemClock{}, 2*i, 256)
		rc := storetest.FreshClaim(ctx, b, ws, 2*i+1)
		rawID = string(rc.Thread)
		var created int64
		var holder string
		var expires time.Time
		err := s.pool.QueryRow(ctx, fmt.Sprintf(`SELECT t.created, t.version, (SELECT count(*) FROM %[1]s.events e WHERE e.thread_id = t.id),
			l.holder, l.expires_at FROM %[1]s.threads t JOIN %[1]s.leases l ON l.key = t.id WHERE t.id = $1`, pgx.Identifier{s.Schema()}.Sanitize()),
			rawID).Scan(&created, &version, &seq, &holder, &expires)
		if err != nil {
			b.Fatal(err)
		}
		rawArgs = [][]byte{[]byte(rawID), be(created), nil, []byte(holder), be(pgMicros(expires)), nil, be(0), be(1), be(1),
			nil, nil, []byte(core.RunStarted), nil, be(1), []byte(""), nil, be(0), []byte(holder)}
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
		rawArgs[2], rawArgs[5], rawArgs[9], rawArgs[10], rawArgs[15] = be(version), be(version+1), be(seq+1), be(version+1), be(seq+1)
		rawArgs[12] = be(pgMicros(t1))
		t2 := time.Now()
		if err := execRaw(ctx, s, rawArgs); err != nil {
			return fmt.Errorf("raw write: %w", err)
		}
		version, seq = version+1, seq+1
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

// execRaw sends the Store's one-statement write with args, already
// encoded in binary (as the Store sends them), on a connection of s's
// pool.
func execRaw(ctx context.Context, s *Store, args [][]byte) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	sd, err := c.Conn().Prepare(ctx, "split_raw", s.q.saveUnchanged)
	if err != nil {
		return err
	}
	_, err = c.Conn().PgConn().ExecStatement(ctx, sd, args, []int16{pgx.BinaryFormatCode}, nil).Close()
	return err
}

// be is i in PostgreSQL's binary form of a bigint.
func be(i int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
