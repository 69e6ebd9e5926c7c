package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// msgArgs is a River job that carries the message.
type msgArgs struct {
	Text string `json:"text"`
}

func (msgArgs) Kind() string { return "msg" }

// msgWorker is River's no-op worker: it says the message started.
type msgWorker struct {
	river.WorkerDefaults[msgArgs]
	started func(text string)
}

func (w *msgWorker) Work(_ context.Context, job *river.Job[msgArgs]) error {
	w.started(job.Args.Text)
	return nil
}

// riverSystem is River v0.51.2 with its pgx driver: 4 clients (each its
// own pool, as 4 processes would be) of 100 workers each on the default
// queue, with River's defaults otherwise (fetches on LISTEN/NOTIFY, at
// most every FetchCooldown, 100ms, and every FetchPollInterval, 1s); the
// posters insert with an insert-only client of its own pool.
type riverSystem struct {
	// cooldown, when set, is every client's FetchCooldown, the posters'
	// included (River's default, 100ms, caps a client's fetches at 10 a
	// second: 4 clients of 100 workers start at most 4,000 jobs a second;
	// and a client notifies the workers of its inserts at most once a
	// FetchCooldown, so a job posted at a steady rate waits up to 100ms
	// for its notification or for a fetch).
	cooldown time.Duration
	poster   *river.Client[pgx.Tx]
	pPool    *pgxpool.Pool
	pools    []*pgxpool.Pool
	clients  []*river.Client[pgx.Tx]
	worker   *msgWorker
	trips    trips
}

// trips counts the round trips a pool's connections make: each query or
// Exec (BEGIN and COMMIT included), and each batch as one.
type trips struct{ n atomic.Int64 }

func (t *trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	return ctx
}
func (*trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.n.Add(1)
	return ctx
}
func (*trips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// newPool opens a pool whose round trips r.trips counts.
func (r *riverSystem) newPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.Tracer = &r.trips
	return pgxpool.NewWithConfig(ctx, cfg)
}

func (r *riverSystem) roundTrips() int64 { return r.trips.n.Load() }

func newRiver() system { return &riverSystem{} }

// newRiverFast is River with a FetchCooldown of 1ms.
func newRiverFast() system { return &riverSystem{cooldown: time.Millisecond} }

func (r *riverSystem) name() string {
	if r.cooldown > 0 {
		return "river-cooldown=" + r.cooldown.String()
	}
	return "river"
}

const riverSchema = "river_bench"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func (r *riverSystem) config(workers bool) *river.Config {
	c := &river.Config{Schema: riverSchema, Logger: quiet, Workers: river.NewWorkers(), FetchCooldown: r.cooldown}
	river.AddWorker(c.Workers, r.worker)
	if workers {
		c.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}
	}
	return c
}

func (r *riverSystem) setup(ctx context.Context, url string) error {
	pool, err := r.newPool(ctx, url)
	if err != nil {
		return err
	}
	r.pPool = pool
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+riverSchema); err != nil {
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: riverSchema, Logger: quiet})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river: migrate: %w", err)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE `+riverSchema+`.river_job`); err != nil {
		return err
	}
	r.worker = &msgWorker{started: func(string) { panic("a job started before the workers") }}
	r.poster, err = river.NewClient(riverpgxv5.New(pool), r.config(false))
	return err
}

func (r *riverSystem) post(ctx context.Context, i int) error {
	_, err := r.poster.Insert(ctx, msgArgs{Text: fmt.Sprint(i)}, nil)
	return err
}

func (r *riverSystem) donePosting() { r.pPool.Close() }

func (r *riverSystem) start(ctx context.Context, url string, started func(string)) error {
	r.worker.started = started
	for range workers {
		pool, err := r.newPool(ctx, url)
		if err != nil {
			return err
		}
		r.pools = append(r.pools, pool)
		c, err := river.NewClient(riverpgxv5.New(pool), r.config(true))
		if err != nil {
			return err
		}
		if err := c.Start(ctx); err != nil {
			return err
		}
		r.clients = append(r.clients, c)
	}
	return nil
}

func (r *riverSystem) stop(ctx context.Context, _ string) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, c := range r.clients {
		_ = c.Stop(sctx)
	}
	for _, p := range r.pools {
		p.Close()
	}
}
