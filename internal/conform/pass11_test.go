package conform

import (
	"strings"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// With the abandon fence off, Go abandons for a claim that lost its lease:
// conform must ask that Abandon as a refusal (FenceAbandon => HasLease(p))
// and report it, besides the AbandonFenced edges it takes as Abandon.
func TestConformAsksFencedAbandon(t *testing.T) {
	g := small(t)
	rep, err := Run(runCtx(t, 5*time.Minute), g, Options{Unfenced: core.Fences{Abandon: true}, Keep: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.First {
		if strings.HasPrefix(d.Step, "Abandon(") && strings.Contains(d.Detail, "does not enable") {
			return
		}
	}
	t.Fatalf("no unfenced Abandon asked as a refusal (%d divergences)", rep.Divergences)
}
