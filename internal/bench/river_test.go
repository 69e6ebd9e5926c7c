package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	poster  *river.Client[pgx.Tx]
	pPool   *pgxpool.Pool
	pools   []*pgxpool.Pool
	clients []*river.Client[pgx.Tx]
	worker  *msgWorker
}

func newRiver() system { return &riverSystem{} }

func (*riverSystem) name() string { return "river" }

const riverSchema = "river_bench"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func (r *riverSystem) config(workers bool) *river.Config {
	c := &river.Config{Schema: riverSchema, Logger: quiet, Workers: river.NewWorkers()}
	river.AddWorker(c.Workers, r.worker)
	if workers {
		c.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}
	}
	return c
}

func (r *riverSystem) setup(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
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
		pool, err := pgxpool.New(ctx, url)
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
