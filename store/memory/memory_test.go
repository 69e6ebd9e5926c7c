package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/internal/sim/simtest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

func TestConformance(t *testing.T) {
	simtest.Exercise(t, func(*testing.T) core.Storage { return memory.New() })
}

// The mutant with holder freshness off: a holder reused across claims
// passes a later claim's fence with its stale round, and a message is
// consumed twice. The conformance suite's HolderReused and
// ReuseHolderRefused cases catch it.
func TestReuseHolderMutant(t *testing.T) {
	storetest.CheckReuseHolderMutant(t, memory.New(memory.WithHolderReuseForTesting()))
}

// The public conformance suite, as a storage outside this module runs
// it: storetest.Run alone, with no option of this package.
func TestConformancePublicSuite(t *testing.T) {
	storetest.Run(t, func(*testing.T) core.Storage { return memory.New() })
}

// With copied reads the conformance suite passes as it does without.
func TestConformanceCopiedReads(t *testing.T) {
	storetest.Run(t, func(*testing.T) core.Storage { return memory.New(memory.WithCopiedReads()) })
}

// TestCopiedReads: a thread read in a transaction is what it was at the
// read, whatever the transaction writes next, with copied reads; without
// them it is the Store's own state, which the write changes in place.
func TestCopiedReads(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		opts     []memory.Option
		wantSeen int // messages the first read shows after the Append
	}{
		{"default", nil, 1},
		{"copied", []memory.Option{memory.WithCopiedReads()}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memory.New(tc.opts...)
			ws := core.NewWorkspace(s, coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)))
			if err := ws.CreateThread(ctx, "t1"); err != nil {
				t.Fatal(err)
			}
			err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
				before, err := tx.Thread(ctx, "t1")
				if err != nil {
					return err
				}
				v, err := tx.Bump(ctx, "t1")
				if err != nil {
					return err
				}
				if err := tx.Append(ctx, "t1", core.Event{Kind: core.MessagePosted, Version: v, Message: 1, Text: "m1", At: time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)}); err != nil {
					return err
				}
				if n := len(before.Messages); n != tc.wantSeen {
					t.Errorf("the read before the write shows %d messages, want %d", n, tc.wantSeen)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHandedOutSlicesAreCopies: the thread ids and events a transaction
// hands out are the caller's; writing into them changes no storage (the
// seventh mutation pass: ThreadIDs, Events and EventsAfter returning the
// Store's own slices failed no test).
func TestHandedOutSlicesAreCopies(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	s := memory.New()
	err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		if err := tx.CreateThread(ctx, "t1"); err != nil {
			return err
		}
		return tx.Append(ctx, "t1", core.Event{Kind: core.MessagePosted, Version: 1, Message: 1, Text: "m1", At: at})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		ids, err := tx.ThreadIDs(ctx)
		if err != nil {
			return err
		}
		ids[0] = "mutated"
		evs, err := tx.Events(ctx, "t1")
		if err != nil {
			return err
		}
		evs[0].Text = "mutated"
		after, err := tx.(interface {
			EventsAfter(context.Context, core.ThreadID, core.Position) ([]core.Event, error)
		}).EventsAfter(ctx, "t1", 0)
		if err != nil {
			return err
		}
		after[0].Message = 99
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		ids, err := tx.ThreadIDs(ctx)
		if err != nil {
			return err
		}
		if len(ids) != 1 || ids[0] != "t1" {
			t.Errorf("ThreadIDs = %v after its result was written, want [t1]", ids)
		}
		evs, err := tx.Events(ctx, "t1")
		if err != nil {
			return err
		}
		if len(evs) != 1 || evs[0].Text != "m1" || evs[0].Message != 1 {
			t.Errorf("Events = %+v after its and EventsAfter's results were written, want message 1, m1", evs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWatchEventsOnAppend: a commit that appended an event wakes a
// watcher, and one that appended none does not (the seventh mutation
// pass: telling the watchers only of commits that appended nothing
// failed no test).
func TestWatchEventsOnAppend(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := memory.New()
	ch, err := s.WatchEvents(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return tx.CreateThread(ctx, "t1")
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("a commit that appended no event woke the watcher")
	default:
	}
	at := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return tx.Append(ctx, "t1", core.Event{Kind: core.MessagePosted, Version: 1, Message: 1, Text: "m1", At: at})
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("a commit that appended an event did not wake the watcher")
	}
}

// TestRawWritesRefused: the Store itself refuses a lease with no holder,
// an event whose holder PostgreSQL would refuse, and an event the thread's
// Check refuses, whatever its caller checked (the seventh mutation pass:
// each of these refusals dropped failed no test).
func TestRawWritesRefused(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	s := memory.New()
	if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		if err := tx.CreateThread(ctx, "t1"); err != nil {
			return err
		}
		return tx.Append(ctx, "t1", core.Event{Kind: core.MessagePosted, Version: 1, Message: 1, Text: "m1", At: at})
	}); err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func(context.Context, core.Transaction) error{
		"lease with no holder": func(ctx context.Context, tx core.Transaction) error {
			return tx.PutLease(ctx, core.Lease{Thread: "t1", ExpiresAt: at.Add(time.Minute)})
		},
		"holder with a NUL byte": func(ctx context.Context, tx core.Transaction) error {
			return tx.Append(ctx, "t1", core.Event{Kind: core.RunStarted, Version: 2, Run: 1, Message: 1, Holder: "h\x00", At: at})
		},
		"message not the next": func(ctx context.Context, tx core.Transaction) error {
			return tx.Append(ctx, "t1", core.Event{Kind: core.MessagePosted, Version: 2, Message: 3, Text: "m3", At: at})
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := s.Update(ctx, write)
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("err = %v, want core.ErrInvalidArgument", err)
			}
		})
	}
}

// TestCloneKeepsHolderReuse: a clone of the holder-reuse mutant's store
// is the mutant too (the seventh mutation pass: a Clone that dropped the
// option failed no test).
func TestCloneKeepsHolderReuse(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		opts      []memory.Option
		wantReuse bool
	}{
		{"default", nil, false},
		{"reuse", []memory.Option{memory.WithHolderReuseForTesting()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memory.New(tc.opts...)
			if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
				if err := tx.CreateThread(ctx, "t1"); err != nil {
					return err
				}
				if err := tx.PutLease(ctx, core.Lease{Thread: "t1", Holder: "a", ExpiresAt: at}); err != nil {
					return err
				}
				return tx.DeleteLease(ctx, "t1")
			}); err != nil {
				t.Fatal(err)
			}
			err := s.Clone().Update(ctx, func(ctx context.Context, tx core.Transaction) error {
				return tx.PutLease(ctx, core.Lease{Thread: "t1", Holder: "a", ExpiresAt: at})
			})
			if reused := err == nil; reused != tc.wantReuse {
				t.Fatalf("the clone's second lease to holder a: err = %v, want reuse %v", err, tc.wantReuse)
			}
			if err != nil && !errors.Is(err, core.ErrHolderReused) {
				t.Fatalf("err = %v, want core.ErrHolderReused", err)
			}
		})
	}
}

// TestFailedUpdateUndoesSaveTaken: a transaction that saved the taken
// cursor and then failed leaves the cursor where it was (the seventh
// mutation pass: SaveTaken with no undo record failed no test).
func TestFailedUpdateUndoesSaveTaken(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return tx.CreateThread(ctx, "t1")
	}); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("failed")
	err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		if err := tx.SaveTaken(ctx, "t1", 5); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("err = %v, want the transaction's own", err)
	}
	if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		th, err := tx.Thread(ctx, "t1")
		if err != nil {
			return err
		}
		if th.Taken != 0 {
			t.Errorf("Taken = %d after a failed transaction saved 5, want 0", th.Taken)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A transaction is fn's only while fn runs: a call of one kept past its
// Update is refused with core.ErrInvalidArgument and writes nothing,
// after a commit as after a rollback. Before, such a call wrote the store
// without its lock and kept the write, even after its Update had failed
// and rolled back.
func TestTransactionKeptPastItsUpdateRefused(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	var committed, rolledBack core.Transaction
	if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		committed = tx
		return tx.CreateThread(ctx, "t1")
	}); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("failed")
	if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		rolledBack = tx
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("err = %v, want the transaction's own", err)
	}
	for name, tx := range map[string]core.Transaction{"committed": committed, "rolled back": rolledBack} {
		for call, err := range map[string]error{
			"CreateThread": tx.CreateThread(ctx, "t2"),
			"PutLease":     tx.PutLease(ctx, core.Lease{Thread: "t1", Holder: "h1"}),
			"SaveTaken":    tx.SaveTaken(ctx, "t1", 1),
			"Append":       tx.Append(ctx, "t1", core.Event{Version: 1, Kind: core.MessagePosted, Message: 1, Text: "m"}),
			"DeleteLease":  tx.DeleteLease(ctx, "t1"),
		} {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Errorf("%s of a %s transaction after its Update: err = %v, want core.ErrInvalidArgument", call, name, err)
			}
		}
		if _, err := tx.Bump(ctx, "t1"); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("Bump of a %s transaction after its Update: err = %v", name, err)
		}
		if _, err := tx.Thread(ctx, "t1"); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("Thread of a %s transaction after its Update: err = %v", name, err)
		}
	}
	if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		ids, err := tx.ThreadIDs(ctx)
		if err != nil {
			return err
		}
		th, err := tx.Thread(ctx, "t1")
		if err != nil {
			return err
		}
		l, err := tx.Lease(ctx, "t1")
		if err != nil {
			return err
		}
		if len(ids) != 1 || th.Version != 0 || th.Taken != 0 || len(th.Messages) != 0 || l != (core.Lease{}) {
			t.Errorf("the refused calls wrote: threads %v, thread %+v, lease %+v", ids, th, l)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A fn that panics has its writes undone, as one that returns an error,
// and the panic reaches Update's caller; the store goes on. Before, what
// fn wrote before the panic was kept (core.Thread.Apply panics on an
// event storage should have refused).
func TestPanicInUpdateUndoesWrites(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	func() {
		defer func() {
			if v := recover(); v != "fn's bug" {
				t.Errorf("recovered %v, want fn's panic", v)
			}
		}()
		_ = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
			if err := tx.CreateThread(ctx, "t1"); err != nil {
				return err
			}
			panic("fn's bug")
		})
	}()
	if err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		ids, err := tx.ThreadIDs(ctx)
		if len(ids) != 0 {
			t.Errorf("threads %v after a panicking Update, want none", ids)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// The zero Store is an empty one (before, its first write panicked on a
// nil map).
func TestZeroStoreIsEmpty(t *testing.T) {
	ctx := context.Background()
	var s memory.Store
	ws := core.NewWorkspace(&s, coretest.NewClock(time.Unix(0, 0)))
	if err := ws.CreateThread(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Post(ctx, "t1", "m1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Claim(ctx, "t1", "h1", time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := ws.Pending(ctx)
	if err != nil || len(p) != 1 || p[0].Lease.Holder != "h1" {
		t.Fatalf("Pending = %+v, %v; want t1 held by h1", p, err)
	}
}
