package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// BenchmarkLeaseWrites measures the writes of a lease — a Claim, a Renew
// and a Release of one thread, in turn, each by a new holder — with one
// autocommitted UPDATE of the thread's row after each, on one pool, and
// reports the median of each and its ratio to the UPDATE's, and the
// Store's round trips and failed checks per cycle of three. (A Claim
// reads another holder's lease, which the cache cannot know: two round
// trips. A Renew or a Release under the Store's own lease is one.)
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench LeaseWrites -benchtime 2000x -count 4
func BenchmarkLeaseWrites(b *testing.B) {
	ctx := context.Background()
	s, ws, update := pairedStore(ctx, b)
	const id = core.ThreadID("t")
	if err := ws.CreateThread(ctx, id); err != nil {
		b.Fatal(err)
	}
	var claim, renew, release, plain []time.Duration
	timed := func(to *[]time.Duration, op func() error) error {
		t0 := time.Now()
		if err := op(); err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := s.pool.Exec(ctx, update, string(id)); err != nil {
			return err
		}
		*to, plain = append(*to, t1.Sub(t0)), append(plain, time.Since(t1))
		return nil
	}
	trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
	b.ResetTimer()
	for i := range b.N {
		var c core.Claim
		err := timed(&claim, func() (err error) {
			c, err = ws.Claim(ctx, id, core.Holder(fmt.Sprintf("h%d", i)), time.Hour)
			return err
		})
		if err == nil {
			err = timed(&renew, func() error { return ws.Renew(ctx, c, time.Hour) })
		}
		if err == nil {
			err = timed(&release, func() error { return ws.Release(ctx, c) })
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The UPDATEs go around the Store: its counts are the lease writes'.
	b.ReportMetric(float64(s.stats.roundTrips.Load()-trips)/float64(b.N), "trips/cycle")
	b.ReportMetric(float64(s.stats.conflicts.Load()-conflicts)/float64(b.N), "conflicts/cycle")
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	u := med(plain)
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"claim", claim}, {"renew", renew}, {"release", release}} {
		f := med(m.d)
		b.ReportMetric(float64(f.Microseconds()), m.name+"-µs")
		b.ReportMetric(float64(f)/float64(u), m.name+"/update")
	}
	b.ReportMetric(float64(u.Microseconds()), "update-µs")
}
