package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles holds the schema's migrations, NNNN_name.sql, applied in
// the order of NNNN. A released migration is never edited: a change is a
// new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) { return migrationsIn(migrationFiles) }

// migrationsIn reads the migrations of fsys's folder migrations, and
// refuses a file not named NNNN_name.sql (NNNN above 0) and versions that
// do not run 1, 2, ... (a gap, or two files of one version).
func migrationsIn(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, "migrations/"+e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %q: versions must run 1, 2, ... without gaps", m.name)
		}
	}
	return ms, nil
}

// migrateLockClass is the first half of the advisory lock key that
// serialises migrations; the second is a hash of the schema's name.
const migrateLockClass = 0x7463 // "tc"

// migrate creates the schema and applies the migrations it lacks, in one
// transaction that holds an advisory lock on the schema's name: two
// processes opening one schema at once apply each migration once, and the
// second sees the first's work. A schema already at this binary's
// version is read once, with no lock and no transaction. A schema
// migrated by a newer binary (a version this one does not know) is an
// error.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return migrateTo(ctx, pool, schema, ms)
}

// migrateTo applies the migrations of ms the schema lacks (ms is every
// migration, or the first ones: a test makes an older schema with it).
func migrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, ms []migration) error {
	ident := pgx.Identifier{schema}.Sanitize()
	// A schema already at this binary's version (the usual case: another
	// process migrated it) needs no lock: one read says so. Anything else
	// (an older or newer schema, no schema, no table yet, an error) is
	// the locked path's below, which decides and reports it.
	var have int
	if pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+ident+`.schema_migrations`).Scan(&have) == nil && have == len(ms) {
		return nil
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(migrateLockClass), schema); err != nil {
			return fmt.Errorf("lock migrations: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+ident); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+ident); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if have > len(ms) {
			return fmt.Errorf("schema %s is at version %d, newer than this binary's %d", ident, have, len(ms))
		}
		for _, m := range ms[have:] {
			// No arguments: pgx sends the file with the simple protocol,
			// which runs all its statements.
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
		}
		return nil
	})
}
