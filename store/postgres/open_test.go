package postgres

import (
	"context"
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
