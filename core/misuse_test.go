package core_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// Misuse of the Workspace's API by a careless caller (the session-42
// misuse pass, 8 Dec 2026): each call is refused with a sentinel error,
// writes nothing, and leaves the Workspace usable.

// A ttl too long for a lease's expiry to be carried (past April 2262, in
// a trace line's Unix nanoseconds) is refused by Claim and Renew, and the
// thread stays free for a claim with a sane one. Before, a ttl of
// math.MaxInt64 (a "lease for ever") wrapped round as it was rounded up
// to a microsecond: the lease was stamped expired in 1734, and another
// workspace's Claim took the thread at once.
func TestClaimRefusesTTLPastTheLastExpiry(t *testing.T) {
	w := newWorld(t, "m1")
	forever := time.Duration(math.MaxInt64)
	centuries := 250 * 365 * 24 * time.Hour // expiry past 2262: UnixNano overflows
	for _, long := range []time.Duration{forever, forever - 500, centuries} {
		w.refused(t, core.ErrInvalidArgument, func() error {
			_, err := w.a.Claim(w.ctx, "t", "ha", long)
			return err
		})
		lease, err := w.a.Lease(w.ctx, "t")
		require.NoError(t, err)
		require.Equal(t, core.Lease{}, lease, "a refused Claim took no lease")
	}
	c, err := w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err, "the refused claims left no round open")
	for _, long := range []time.Duration{forever, centuries} {
		w.refused(t, core.ErrInvalidArgument, func() error { return w.a.Renew(w.ctx, c, long) })
	}
	_, err = w.b.Claim(w.ctx, "t", "hb", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy, "the lease is still ha's, as its Claim stamped it")
	// The longest a lease can last: a century, carried and checked.
	require.NoError(t, w.a.Renew(w.ctx, c, 100*365*24*time.Hour))
	w.valid(t)
}
