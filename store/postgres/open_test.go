package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
