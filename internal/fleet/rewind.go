package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// KindRewind (rewind.go) emulates storage losing one acknowledged Claim,
// with plain SQL on the fleet's database behind the Stores' backs, and
// builds the interleaving that only the lease comparison of a write
// decided from the cache refuses (tracecheck/DEFECTS.md, class e): the
// Claim's process A goes on believing it holds the thread, its cache at
// the Claim's version, while another process's write (a Claim) brings the
// thread to that same version under another lease, the log unchanged.
//
// The fault holds every worker no other fault holds. Their round trips
// are slowed (rewindLatency), so that a Claim's acknowledgement reaches
// its worker well after the commit. The Claims of those workers that
// replaced a lapsed lease are watched for in storage's trace lines (a
// thread put back under no lease waits for a free turn, often longer
// than the fault; one put back under its lapsed lease is taken over
// within a TTL and a poll); the moment one is the newest line of its
// thread, its worker A is stopped (SIGSTOP), before it has learnt of the
// commit. In one transaction (a lock_timeout: a thread whose row someone
// holds locked is skipped, and so is one written since the Claim, by a
// write that moved its version or its lease, or that only appended an
// event, as a refused start's RunRefused notice does) the thread's row is put back as it was before
// the Claim — version one less, the replaced lease (holder and expiry,
// from the Claim or Renew line that stamped that expiry) — and the
// Claim's trace line and its holders row are deleted: nothing else of
// the row changes at a Claim (core.Workspace's claim bumps the version
// and puts the lease; the Store's Claim also inserts the holder into
// holders). Then, the posters held when they can be at once (a Post
// would change the log; one may wait on a stopped worker's lock), the
// thread's next write is waited for: when it is a Claim at A's version
// with the log unchanged, its worker B is stopped before it learns of
// it, A continues and writes from its cache, and B continues a TTL later
// or once the thread moved on. A restored lease's own Renew or Release
// at that version leaves A's cache the same way; A continues then too,
// its holder not stopped. Otherwise, or if nobody writes within
// rewindWait, A continues all the same, and the watch goes on for another
// Claim until one is taken again at its version, or rewindWatch is over.
// Storage's kept lines do not hold the Claims rewound: the report counts
// them among the writes storage lost.

// rewindLatency is added to each round trip of the workers a rewind
// holds, while it watches for a Claim and waits for the next one.
func rewindLatency(ttl time.Duration) time.Duration { return max(ttl/10, 2*time.Millisecond) }

// rewindWatch bounds the watch for a fresh Claim, rewindWait the wait for
// another claimant.
func rewindWatch(ttl time.Duration) time.Duration { return 20 * ttl }
func rewindWait(ttl, poll time.Duration) time.Duration {
	return 6*ttl + 2*poll
}

// rewindQueries are the rewind's statements, with the schema quoted in.
type rewindQueries struct {
	fresh, lock, appended, line, replaced, restore, dropLine, dropHolder, claimant string
}

func newRewindQueries(schema string) rewindQueries {
	s := pgx.Identifier{schema}.Sanitize()
	return rewindQueries{
		// The threads whose newest line is a Claim, by one of the procs $1,
		// that replaced a lapsed lease (its line names the replaced
		// expiry), and whose lease is still that Claim's.
		fresh: `SELECT t.id, t.version, t.lease_holder, coalesce((l.line->>'replaced')::bigint, 0), l.line->>'proc' FROM ` + s + `.threads t
			JOIN ` + s + `.trace_lines l ON l.thread_id = t.id AND l.tick = t.version
			WHERE l.line->>'action' = 'Claim' AND l.line->>'proc' = ANY($1) AND l.line ? 'replaced'
			  AND t.lease_holder = l.line->>'holder'
			  AND NOT EXISTS (SELECT FROM ` + s + `.trace_lines n WHERE n.thread_id = t.id AND n.tick > t.version)`,
		// The thread's row, locked.
		lock: `SELECT version, coalesce(lease_holder, ''), log_n FROM ` + s + `.threads WHERE id = $1 FOR UPDATE`,
		// Whether an event was appended at or past the Claim's version
		// $2: a Claim appends none and takes the row to $2, so one there
		// came after it — a RunRefused notice, which leaves the row's
		// version and lease as they were. A statement of its own, after
		// the lock: in READ COMMITTED a statement's subqueries read the
		// snapshot it took before waiting for the row's lock, so in the
		// lock's statement it missed a notice that the transaction it
		// waited for committed (the soak under load: "the row is at
		// version 84, its event 65 at 85").
		appended: `SELECT EXISTS (SELECT FROM ` + s + `.events WHERE thread_id = $1 AND version >= $2)`,
		line: `SELECT line->>'action', line->>'holder', coalesce((line->>'replaced')::bigint, 0) FROM ` + s + `.trace_lines
			WHERE thread_id = $1 AND tick = $2 AND NOT EXISTS (SELECT FROM ` + s + `.trace_lines n WHERE n.thread_id = $1 AND n.tick > $2)`,
		// The lease a Claim replaced: the newest Claim or Renew before it
		// that stamped the expiry the Claim's line names.
		replaced: `SELECT line->>'holder' FROM ` + s + `.trace_lines
			WHERE thread_id = $1 AND tick < $2 AND line->>'action' IN ('Claim', 'Renew') AND (line->>'expires')::bigint = $3
			ORDER BY tick DESC LIMIT 1`,
		restore: `UPDATE ` + s + `.threads SET version = version - 1, lease_holder = $4, lease_expires = $5
			WHERE id = $1 AND version = $2 AND lease_holder = $3`,
		dropLine:   `DELETE FROM ` + s + `.trace_lines WHERE thread_id = $1 AND tick = $2`,
		dropHolder: `DELETE FROM ` + s + `.holders WHERE key = $1 AND holder = $2`,
		// The thread's version and log length, and the process and
		// action of the write that made that version.
		claimant: `SELECT t.version, t.log_n, coalesce(l.line->>'proc', ''), coalesce(l.line->>'action', '') FROM ` + s + `.threads t
			LEFT JOIN ` + s + `.trace_lines l ON l.thread_id = t.id AND l.tick = t.version
			WHERE t.id = $1`,
	}
}

// claimSeen is a Claim the watch found: its thread, version, holder and
// process, the expiry of the lease it replaced (Unix nanoseconds; 0:
// none), and the thread's log length (read as it is rewound).
type claimSeen struct {
	thread, holder, proc    string
	version, replaced, logN int64
}

// errSkip: the fresh Claim could not be rewound (its row locked, or
// written meanwhile).
var errSkip = errors.New("skipped")

// rewind injects KindRewind, starting from slot s (which the nemesis
// holds), and describes it in ev. The other slots no fault holds are held
// too, for the fault's length: the Claim rewound may be any of their
// workers', and the second claimant is stopped among them.
func (r *run) rewind(ctx context.Context, s *slot, ev *Event) {
	q := newRewindQueries(r.schema)
	ttl := r.cfg.TTL
	held := append([]*slot{s}, r.holdOthers(s)...)
	defer r.releaseSlots(held[1:])
	for _, h := range held {
		h.proxy.SetLatency(rewindLatency(ttl))
	}
	defer s.proxy.SetLatency(0)
	deadline := time.Now().Add(rewindWatch(ttl))
	var details []string
	err := r.cluster.admin(ctx, func(conn *pgx.Conn) error {
		// Claim after Claim until one is taken again at its version, or
		// the watch is over.
		for {
			for _, h := range held {
				h.proxy.SetLatency(rewindLatency(ttl))
			}
			detail, done, err := r.rewindOne(ctx, conn, q, held, deadline, ev)
			if detail != "" {
				details = append(details, detail)
			}
			if err != nil || done {
				return err
			}
		}
	})
	ev.Detail = strings.Join(details, "; and ")
	if err != nil {
		ev.Err = err.Error()
	}
	if ev.Detail == "" && ev.Err == "" {
		ev.Detail = fmt.Sprintf("no fresh Claim within %v", rewindWatch(ttl))
	}
}

// rewindOne watches for one Claim until deadline, and rewinds it (see
// KindRewind). It says what happened, and done when the watch is over or
// the Claim was taken again at its version.
func (r *run) rewindOne(ctx context.Context, conn *pgx.Conn, q rewindQueries, held []*slot, deadline time.Time, ev *Event) (detail string, done bool, err error) {
	c, a, err := r.watchClaim(ctx, conn, q, held, deadline)
	if err != nil || a == nil {
		return "", true, err
	}
	defer func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) }()
	ev.Target = a.name
	if err := r.rewindClaim(ctx, conn, q, &c); err != nil {
		if errors.Is(err, errSkip) {
			return fmt.Sprintf("%s's Claim of %s: %v", a.name, c.thread, err), false, nil
		}
		return "", true, err
	}
	r.mu.Lock()
	r.rewound++
	r.mu.Unlock()
	over := "no lease"
	if c.replaced != 0 {
		over = "a lapsed lease, restored"
	}
	detail = fmt.Sprintf("%s's Claim of %s (over %s) at version %d lost; ", a.name, c.thread, over, c.version)
	then, retaken := r.secondClaim(ctx, conn, q, c, a, held)
	a.note("Claim of %s rewound", c.thread)
	return detail + then, retaken, nil
}

// watchClaim polls for a Claim of a held slot's worker that became the
// newest line of its thread since the last poll, and stops that worker
// (SIGSTOP) the moment it sees one, and returns it (nil when none came
// before deadline). Claims seen at the first poll are old: their
// workers may have written after them. Each held worker's round trips
// are slowed meanwhile (rewindLatency): the one stopped has not yet
// learnt that its Claim committed.
func (r *run) watchClaim(ctx context.Context, conn *pgx.Conn, q rewindQueries, held []*slot, deadline time.Time) (claimSeen, *proc, error) {
	procs := map[string]*proc{}
	var names []string
	for _, h := range held {
		p := h.current()
		procs[p.name] = p
		names = append(names, p.name)
	}
	var seen map[string]bool
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rows, err := conn.Query(ctx, q.fresh, names)
		if err != nil {
			return claimSeen{}, nil, err
		}
		var found []claimSeen
		for rows.Next() {
			var x claimSeen
			if err := rows.Scan(&x.thread, &x.version, &x.holder, &x.replaced, &x.proc); err != nil {
				rows.Close()
				return claimSeen{}, nil, err
			}
			found = append(found, x)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return claimSeen{}, nil, err
		}
		now := map[string]bool{}
		for _, x := range found {
			key := fmt.Sprintf("%s/%d", x.thread, x.version)
			now[key] = true
			if seen != nil && !seen[key] {
				a := procs[x.proc]
				if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					return claimSeen{}, nil, err
				}
				for _, h := range held {
					if h.current() == a {
						h.proxy.SetLatency(0)
					}
				}
				return x, a, nil
			}
		}
		seen = now
		hold(ctx, time.Millisecond)
	}
	return claimSeen{}, nil, ctx.Err()
}

// rewindClaim puts c's thread back as it was before the Claim, in one
// transaction, and deletes the Claim's trace line and holder.
func (r *run) rewindClaim(ctx context.Context, conn *pgx.Conn, q rewindQueries, c *claimSeen) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		wait := r.rewindLock
		if wait <= 0 {
			wait = 50 * time.Millisecond
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", wait.Milliseconds())); err != nil {
			return err
		}
		var version int64
		var holder string
		var appended bool
		if err := tx.QueryRow(ctx, q.lock, c.thread).Scan(&version, &holder, &c.logN); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "57014") {
				return fmt.Errorf("%w: its row is locked", errSkip)
			}
			return err
		}
		if version != c.version || holder != c.holder {
			return fmt.Errorf("%w: written after the Claim", errSkip)
		}
		if err := tx.QueryRow(ctx, q.appended, c.thread, c.version).Scan(&appended); err != nil {
			return err
		}
		if appended {
			// Storage that lost the Claim lost what committed after it
			// too: rewinding the row under the later event would leave
			// a log no storage could have (an event past its version).
			return fmt.Errorf("%w: an event was appended after the Claim", errSkip)
		}
		var action, lineHolder string
		var replaced int64
		if err := tx.QueryRow(ctx, q.line, c.thread, c.version).Scan(&action, &lineHolder, &replaced); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: its Claim is not the newest line", errSkip)
			}
			return err
		}
		if action != "Claim" || lineHolder != c.holder || replaced != c.replaced {
			return fmt.Errorf("%w: its newest line is not the Claim", errSkip)
		}
		// The lease before the Claim: none, or the one it replaced.
		var before, expires any
		if replaced != 0 {
			var prev string
			if err := tx.QueryRow(ctx, q.replaced, c.thread, c.version, replaced).Scan(&prev); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return fmt.Errorf("%w: no line stamped the lease its Claim replaced", errSkip)
				}
				return err
			}
			before, expires = prev, time.Unix(0, replaced).UTC()
		}
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{q.restore, []any{c.thread, c.version, c.holder, before, expires}},
			{q.dropLine, []any{c.thread, c.version}},
			{q.dropHolder, []any{c.thread, c.holder}},
		} {
			tag, err := tx.Exec(ctx, st.sql, st.args...)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("rewind of %s: %q changed %d rows, not 1", c.thread, st.sql, tag.RowsAffected())
			}
		}
		return nil
	})
}

// secondClaim waits, with A (p) stopped, until another worker writes c's
// thread at the version A's cache has, its log unchanged — a Claim, or
// the restored lease's Renew or Release —, so that only the lease tells
// A's cache from the thread. It then stops that worker B, continues A,
// and continues B a TTL later, or once the thread's version moved on.
// Meanwhile the other held workers' round trips stay slowed, so that B
// has not learnt of its write, let alone written again, when it is
// stopped; and the posters wait (a Post would change the log). It says
// what happened.
func (r *run) secondClaim(ctx context.Context, conn *pgx.Conn, q rewindQueries, c claimSeen, p *proc, held []*slot) (string, bool) {
	// A post may be waiting for a row lock a stopped worker holds: the
	// posters are held only when the gate is free within a millisecond.
	for range 10 {
		if r.postGate.TryLock() {
			defer r.postGate.Unlock()
			break
		}
		hold(ctx, 100*time.Microsecond)
	}
	deadline := time.Now().Add(rewindWait(r.cfg.TTL, r.cfg.Poll))
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var version, logN int64
		var by, action string
		if err := conn.QueryRow(ctx, q.claimant, c.thread).Scan(&version, &logN, &by, &action); err != nil {
			return fmt.Sprintf("reading the thread: %v; %s continued", err, p.name), false
		}
		if version < c.version {
			hold(ctx, time.Millisecond)
			continue
		}
		var b *proc
		for _, s := range held {
			if w := s.current(); w != p && w.name == by {
				b = w
			}
		}
		if action != "Claim" {
			b = nil // a Renew or Release of the restored lease: its worker may have a write of the thread in flight
		}
		if version == c.version && logN == c.logN && b == nil {
			r.mu.Lock()
			r.retaken++
			r.mu.Unlock()
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			return fmt.Sprintf("then %s by %s at version %d, not stopped; %s continued", action, by, version, p.name), true
		}
		if b == nil || version != c.version || logN != c.logN {
			r.mu.Lock()
			r.rewindMissed++
			r.mu.Unlock()
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			return fmt.Sprintf("then %s by %s at version %d (log %d, was %d), not stopped; %s continued", action, by, version, logN, c.logN, p.name), false
		}
		r.mu.Lock()
		r.retaken++
		r.mu.Unlock()
		_ = b.cmd.Process.Signal(syscall.SIGSTOP)
		for _, s := range held {
			s.proxy.SetLatency(0)
		}
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		until := time.Now().Add(r.cfg.TTL)
		now := version
		for time.Now().Before(until) && now == version && ctx.Err() == nil {
			hold(ctx, time.Millisecond)
			if err := conn.QueryRow(ctx, q.claimant, c.thread).Scan(&now, &logN, &by, &action); err != nil {
				break
			}
		}
		_ = b.cmd.Process.Signal(syscall.SIGCONT)
		return fmt.Sprintf("then %s by %s at version %d; %s stopped, %s continued, then %s (version %d)", action, b.name, version, b.name, p.name, b.name, now), true
	}
	r.mu.Lock()
	r.unclaimed++
	r.mu.Unlock()
	return fmt.Sprintf("nobody wrote it within %v; %s continued", rewindWait(r.cfg.TTL, r.cfg.Poll), p.name), false
}

// holdOthers marks busy the slots other than mine that no fault holds,
// and returns them: no other fault takes them meanwhile.
func (r *run) holdOthers(mine *slot) []*slot {
	var out []*slot
	for _, s := range r.slots {
		s.mu.Lock()
		if s != mine && !s.busy {
			s.busy = true
			out = append(out, s)
		}
		s.mu.Unlock()
	}
	return out
}

// releaseSlots takes the added latency off the slots holdOthers returned
// and frees them.
func (r *run) releaseSlots(slots []*slot) {
	for _, s := range slots {
		s.proxy.SetLatency(0)
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}
}
