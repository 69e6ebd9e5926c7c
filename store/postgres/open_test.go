package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// Open refuses an empty url unless asked for pgx's defaults, and names a
// server it cannot reach as a connection failure, not a migration's.
func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, "", Options{})
	require.ErrorContains(t, err, "empty database url")

	_, err = Open(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5", Options{})
	require.ErrorContains(t, err, "postgres: connect to 127.0.0.1:1")
	require.NotContains(t, err.Error(), "migrate")
}

// BenchmarkOpen times what a runner process does before its first look
// for work, on a schema that is up to date (another process migrated
// it): Open (connect, migrate) and, with wakeups=on, Wakeups too (its
// listening connection and its LISTENs).
// Issue 25's drain counts the four runners' starts (internal/bench).
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	schema := testSchema(b)
	openStore(b, poolConfig(b, "tc-open-first"), schema) // migrates
	for _, wake := range []bool{false, true} {
		b.Run(fmt.Sprintf("wakeups=%s", map[bool]string{false: "off", true: "on"}[wake]), func(b *testing.B) {
			cfg := poolConfig(b, "tc-open")
			for b.Loop() {
				s, err := open(ctx, cfg.Copy(), Options{Schema: schema})
				if err != nil {
					b.Fatal(err)
				}
				if wake {
					wctx, cancel := context.WithCancel(ctx)
					if _, err := s.Wakeups(wctx); err != nil {
						b.Fatal(err)
					}
					cancel()
				}
				s.Close()
			}
		})
	}
}

// Open refuses PostgreSQL's own schemas before it connects.
func TestOpenRefusesSystemSchemas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, schema := range []string{"information_schema", "pg_catalog", "pg_mine"} {
		_, err := Open(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5", Options{Schema: schema})
		require.ErrorContains(t, err, fmt.Sprintf("schema name %q is PostgreSQL's own", schema))
	}
}

// DropSchema drops a schema only when all it holds is the Store's own: a
// table or a function of someone else's in it makes it refuse, dropping
// nothing, and so does the schema public, whatever it holds.
func TestDropSchemaRefusesOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := (&Store{schema: "public"}).DropSchema(ctx)
	require.ErrorContains(t, err, `drop schema "public": refused`)

	s := newStore(t)
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	conn := admin(t)
	schema := pgx.Identifier{s.Schema()}.Sanitize()
	exists := func() bool {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, s.Schema()).Scan(&n))
		return n == 1
	}
	for _, c := range []struct{ make, drop, name string }{
		{`CREATE TABLE ` + schema + `.users (id int)`, `DROP TABLE ` + schema + `.users`, "users"},
		{`CREATE FUNCTION ` + schema + `.f() RETURNS int LANGUAGE sql AS 'SELECT 1'`, `DROP FUNCTION ` + schema + `.f()`, "f()"},
		{`CREATE SEQUENCE ` + schema + `.ids`, `DROP SEQUENCE ` + schema + `.ids`, "ids"},
	} {
		_, err := conn.Exec(ctx, c.make)
		require.NoError(t, err)
		err = s.DropSchema(ctx)
		require.ErrorContains(t, err, "refused: it holds what this Store did not make ("+c.name+")")
		require.True(t, exists(), "the schema was dropped with %s in it", c.name)
		_, err = ws.Post(ctx, "t", "still here")
		require.NoError(t, err)
		_, err = conn.Exec(ctx, c.drop)
		require.NoError(t, err)
	}
	require.NoError(t, s.DropSchema(ctx))
	require.False(t, exists(), "the schema is still there")
}

// ownObjects is what the migrations leave in a fresh schema, no more, no
// less: a migration that adds a table or a function must add it there,
// or DropSchema refuses the Store's own schemas.
func TestOwnObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newStore(t)
	var all []string
	require.NoError(t, admin(t).QueryRow(ctx, othersSQL, s.Schema(), []string{}).Scan(&all))
	want := slices.Clone(ownObjects)
	slices.Sort(want)
	require.Equal(t, want, all)
}

// Once a Store is closed, Listen and Wakeups refuse, opening no
// connection.
func TestListenAfterClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := open(ctx, poolConfig(t, randomName("tc_")), Options{Schema: testSchema(t)})
	require.NoError(t, err)
	s.Close()
	_, err = s.Listen(ctx)
	require.ErrorIs(t, err, errStoreClosed)
	_, err = s.Wakeups(ctx)
	require.ErrorIs(t, err, errStoreClosed)
}

// Open refuses, before it connects, a schema name PostgreSQL cannot take
// as the Store needs it, with an error wrapping core.ErrInvalidArgument:
// longer than 55 bytes (a 55-byte one is taken), PostgreSQL's own, or
// holding a NUL byte or invalid UTF-8 (pgx's quoting drops a NUL, so
// "a\x00b" would name the schema "ab": another Store's).
func TestOpenRefusesBadSchemaNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const unreachable = "postgres://nobody@127.0.0.1:1/none?connect_timeout=5"
	for _, c := range []struct{ schema, says string }{
		{strings.Repeat("s", 56), "longer than 55 bytes"},
		{"information_schema", "PostgreSQL's own"},
		{"pg_mine", "PostgreSQL's own"},
		{"tc\x00other", "NUL byte"},
		{"tc\xff", "not valid UTF-8"},
	} {
		_, err := Open(ctx, unreachable, Options{Schema: c.schema})
		require.ErrorIs(t, err, core.ErrInvalidArgument, "schema %q", c.schema)
		require.ErrorContains(t, err, c.says, "schema %q", c.schema)
	}
	_, err := Open(ctx, unreachable, Options{Schema: strings.Repeat("s", 55)})
	require.ErrorContains(t, err, "postgres: connect to 127.0.0.1:1", "a 55-byte schema name is refused before connecting")
}

// A schema name with a NUL byte in it does not open the schema of the
// same name without it (pgx's quoting drops the NUL): Open refuses it,
// and the other schema gets nothing. (Before Open refused it, such a
// Store opened on the other schema, up to date, and wrote its threads
// there.)
func TestOpenNULSchemaNameTouchesNoOther(t *testing.T) {
	ctx := testCtx(t)
	schema := testSchema(t)
	openStore(t, poolConfig(t, "tc"), schema)
	s, err := open(ctx, poolConfig(t, "tc"), Options{Schema: schema[:2] + "\x00" + schema[2:]})
	if err == nil {
		_ = core.NewWorkspace(s, core.SystemClock{}).CreateThread(ctx, "t")
		s.Close()
	}
	var n int
	require.NoError(t, admin(t).QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+`.threads`).Scan(&n))
	require.Zero(t, n, "threads written into %s by a Store opened on a name with a NUL in it", schema)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
}
