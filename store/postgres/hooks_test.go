package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// hooked is the conformance suite's hooked storage: a test acts while a
// real transaction on the real server is at a hook's point.
type hooked = storetest.Hooked

// backendPID is the server process serving tx.
func backendPID(tx core.Transaction) uint32 { return tx.(*handle).t.conn.PgConn().PID() }

// waitFor polls the server until query (returning one boolean) is true.
// It observes the server's state; it is not a sleep standing in for an
// ordering.
func waitFor(t *testing.T, conn *pgx.Conn, what, query string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		require.NoError(t, conn.QueryRow(context.Background(), query, args...).Scan(&ok))
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the server to show %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rowCounts reads, with plain SQL, how many events the schema holds for
// the thread, how many of them are messages, and the row's version and
// taken cursor: what a half-written transaction would leave.
func rowCounts(t *testing.T, conn *pgx.Conn, schema string, id core.ThreadID) (events, messages int, version, taken int64) {
	t.Helper()
	ctx := testCtx(t)
	q := pgx.Identifier{schema}.Sanitize()
	require.NoError(t, conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+q+`.events WHERE thread_id = $1),
		(SELECT count(*) FROM `+q+`.events WHERE thread_id = $1 AND kind = $2), version, taken FROM `+q+`.threads WHERE id = $1`,
		string(id), string(core.MessagePosted)).Scan(&events, &messages, &version, &taken))
	return
}

// claimed is the setup the fence, fault and cancel tests share: on s, a
// thread "t" with one message, "m1", claimed as "ha" by process a (its
// round has planned the run of "m1"), whose workspace goes through the
// returned hooked storage; and process b, on s directly, whose clock a
// test moves on to let a's lease expire.
func claimed(t *testing.T, s *Store) (a, b *proc, h *hooked, id core.ThreadID, ca core.Claim) {
	t.Helper()
	ctx := testCtx(t)
	h = &hooked{Storage: s}
	a, b, id = newProc(h, "a"), newProc(s, "b"), "t"
	require.NoError(t, a.ws.CreateThread(ctx, id))
	_, err := a.ws.Post(ctx, id, "m1")
	require.NoError(t, err)
	ca, err = a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	planRun(t, a, ca)
	return a, b, h, id, ca
}
