package tracecheck

import (
	"testing"
	"time"
)

// TestLinLabels: porcupine's labels show the caller's clock and TTL when
// the history knows them, and say the time is unknown when it does not
// (a history read from a trace), rather than now=0, ttl=0s.
func TestLinLabels(t *testing.T) {
	for _, c := range []struct {
		in   LinInput
		want string
	}{
		{LinInput{Kind: LinClaim, Holder: "h1"}, "Claim(h1, time unknown) -> ok"},
		{LinInput{Kind: LinRenew, Holder: "h1"}, "Renew(h1, time unknown) -> ok"},
		{LinInput{Kind: LinClaim, Holder: "h1", Now: 5, TTL: time.Second}, "Claim(h1, now=5, ttl=1s) -> ok"},
	} {
		if got := describeLinOp(c.in, LinOutput{Status: LinOK}); got != c.want {
			t.Errorf("%+v: %q, want %q", c.in, got, c.want)
		}
	}
}
