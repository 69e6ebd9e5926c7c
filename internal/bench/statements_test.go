package bench

import (
	"context"
	"flag"
	"regexp"
	"strings"
	"testing"
)

// statements, when set, has each workload report where the server's time
// went, statement by statement, from PostgreSQL's pg_stat_statements: the
// module must be loaded (scripts/with-postgres with
// WITH_POSTGRES_SERVER_OPTS='-c shared_preload_libraries=pg_stat_statements').
// The statistics are reset when the timed span begins and read when the
// last message has started, so they hold the posters', the workers' and
// the listeners' statements of that span (and, from the database's other
// sessions, anything else that ran then). scripts/pg-statements does
// the like for a benchmark of store/postgres, over its whole run.
var statements = flag.Bool("statements", false, "log the server's statements of each workload's timed span (pg_stat_statements; see BENCH.md)")

// topStatements is how many statements a workload's report lists, the
// costliest first: with its heading, as many lines as go test shows of a
// benchmark's log without -test.v.
const topStatements = 9

// statementsReset makes sure pg_stat_statements is there and clears it,
// with -statements.
func (s *server) statementsReset(ctx context.Context, b *testing.B) {
	if !*statements {
		return
	}
	if _, err := s.conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		b.Fatalf("-statements: %v", err)
	}
	if _, err := s.conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		b.Fatalf("-statements (is pg_stat_statements in shared_preload_libraries?): %v", err)
	}
}

// statementsReport logs the costliest statements since statementsReset,
// per message of the n timed: calls, the server's time running them
// (total, and each call's least and mean: the mean has the waits for
// locks and for a core in it, the least hardly any), shared buffers hit
// and WAL records a call, rows a call, and the statement's start; with
// -statements.
func (s *server) statementsReport(ctx context.Context, b *testing.B, n int) {
	if !*statements {
		return
	}
	rows, err := s.conn.Query(ctx, `SELECT calls, total_exec_time, min_exec_time, mean_exec_time,
		shared_blks_hit::float8 / calls, wal_records::float8 / calls, rows::float8 / calls, query
		FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
		ORDER BY total_exec_time DESC LIMIT $1`, topStatements)
	if err != nil {
		b.Fatalf("-statements: %v", err)
	}
	defer rows.Close()
	b.Logf("%9s %9s %7s %7s %8s %8s %9s  %s", "calls/msg", "µs/msg", "min-µs", "mean-µs", "blk/call", "wal/call", "rows/call", "statement")
	for rows.Next() {
		var (
			calls                        int64
			total, least, mean           float64
			blocks, walRecords, rowsEach float64
			query                        string
		)
		if err := rows.Scan(&calls, &total, &least, &mean, &blocks, &walRecords, &rowsEach, &query); err != nil {
			b.Fatalf("-statements: %v", err)
		}
		b.Logf("%9.3f %9.1f %7.0f %7.0f %8.1f %8.1f %9.2f  %s", float64(calls)/float64(n), total*1000/float64(n),
			least*1000, mean*1000, blocks, walRecords, rowsEach, statementStart(query))
	}
	if err := rows.Err(); err != nil {
		b.Fatalf("-statements: %v", err)
	}
}

var (
	blanks     = regexp.MustCompile(`\s+`)
	schemaName = regexp.MustCompile(`"?(tc_bench_\d+_\d+|river_bench)"?\.`)
)

// statementStart is the first 90 characters of a statement, on one line,
// without the workload's schema.
func statementStart(q string) string {
	q = schemaName.ReplaceAllString(blanks.ReplaceAllString(q, " "), "")
	if r := []rune(q); len(r) > 90 {
		return string(r[:90])
	}
	return q
}

func TestStatementStart(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT  1\n\t FROM x", "SELECT 1 FROM x"},
		{`UPDATE "tc_bench_340676151_1".threads SET v = $1`, "UPDATE threads SET v = $1"},
		{"INSERT INTO river_bench.river_job (id)", "INSERT INTO river_job (id)"},
		{"SELECT tc_bench_x.y FROM other_schema.t", "SELECT tc_bench_x.y FROM other_schema.t"},
		{strings.Repeat("é", 100), strings.Repeat("é", 90)},
	} {
		if got := statementStart(c.in); got != c.want {
			t.Errorf("statementStart(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
