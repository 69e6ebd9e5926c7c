package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// Run with a nil Factory, or one that returns a nil storage, fails the
// test naming the misuse, rather than panicking out of the test binary.
// The suite runs in a child process (a failing Run fails its test).
func TestRunMisuseFails(t *testing.T) {
	switch os.Getenv("STORETEST_MISUSE") {
	case "nil-factory":
		storetest.Run(t, nil)
		return
	case "nil-storage":
		storetest.Run(t, func(*testing.T) core.Storage { return nil })
		return
	}
	for misuse, want := range map[string]string{
		"nil-factory": "storetest.Run: a nil Factory",
		"nil-storage": "storetest.Run: the Factory returned a nil core.Storage",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRunMisuseFails$", "-test.count=1")
		cmd.Env = append(os.Environ(), "STORETEST_MISUSE="+misuse)
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("%s: gave up after 2m waiting for the child test to end", misuse)
		}
		if err == nil {
			t.Fatalf("%s: Run passed:\n%s", misuse, out)
		}
		if got := string(out); !contains(got, want) || contains(got, "panic:") {
			t.Fatalf("%s: want a failure naming %q, no panic; got:\n%s", misuse, want, got)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// Ops with every 0 divided by zero, and with a nil fresh called it.
func TestOpsWithoutFresh(t *testing.T) {
	for _, every := range []int{0, -1, 1} {
		n := 0
		testing.Benchmark(func(b *testing.B) {
			storetest.Ops(b, every, nil, func(int) error { n++; return nil })
		})
		if n == 0 {
			t.Fatalf("every %d: op never ran", every)
		}
	}
}
