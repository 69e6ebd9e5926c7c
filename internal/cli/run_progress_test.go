package cli

import (
	"bytes"
	"context"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/internal/progress"
)

// tickingClock is a clock that moves on by a second each time it is read
// (from any goroutine): every meter update may redraw.
type tickingClock struct{ n atomic.Int64 }

func (c *tickingClock) now() time.Time { return time.Unix(c.n.Add(1), 0) }

// A single execution shows progress while it runs: run's meter counts its
// trace lines as steps, for a seeded and for a concurrent execution, so
// the line advances before the execution's end ("0/1 executions; N
// steps").
func TestRunProgressCountsSteps(t *testing.T) {
	for _, tc := range []struct {
		name              string
		seeds, concurrent int
	}{{"seeded", 1, 0}, {"concurrent", 0, 1}} {
		var b bytes.Buffer
		clock := &tickingClock{}
		f := runFlags{seeds: tc.seeds, concurrent: tc.concurrent, steps: 300, procs: 3, threads: 2, messages: 20, workers: 1,
			ttl: 40 * time.Millisecond, porcupineTimeout: time.Minute, shrinkDir: t.TempDir(), minActions: 0,
			meter: func(total int) *progress.Meter { return progress.NewOn(&b, "run", total, "executions", clock.now) }}
		var out, errb bytes.Buffer
		if _, err := runAll(context.Background(), f, &out, &errb); err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s", tc.name, err, out.String())
		}
		m := regexp.MustCompile(`run: 0/1 executions \(0\.0%\); (\d+) steps`).FindAllStringSubmatch(b.String(), -1)
		if len(m) < 2 || m[0][1] == m[len(m)-1][1] {
			t.Errorf("%s: the meter did not advance within the execution (want two or more lines with 0/1 executions and a growing count of steps):\n%q", tc.name, b.String())
		}
	}
}
