package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/tlc"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// B3: a violation's trace.ndjson:N is line N of the file the fleet wrote.
// The merged lines come interleaved across threads; the file has them
// thread by thread, so numbering them before reordering pointed elsewhere.
func TestCheckTraceLocationIsTheFilesLine(t *testing.T) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	post := func(id core.ThreadID, tick uint64, msg core.Seq) core.TraceEvent {
		return core.TraceEvent{Tick: tick, Action: core.ActionPost, Thread: id, Proc: "poster", Msg: msg}
	}
	claim := func(id core.ThreadID, tick uint64, p string, h core.Holder) core.TraceEvent {
		return core.TraceEvent{Tick: tick, Action: core.ActionClaim, Thread: id, Proc: p, Holder: h, Lease: h}
	}
	// t2's RunStart by p2 runs under p1's lease: the fence's guard fails.
	bad := core.TraceEvent{Tick: 4, Action: core.ActionRunStart, Thread: "t2", Proc: "p2", Holder: h2, Msg: 1, Run: 1, Taken: 1, Lease: h1}
	merged := []core.TraceEvent{
		post("t2", 1, 1), post("t1", 1, 1), claim("t2", 2, "p2", h2), post("t1", 2, 2),
		claim("t2", 3, "p1", h1), claim("t1", 3, "p1", h1), bad, post("t1", 4, 3),
	}
	path := filepath.Join(t.TempDir(), "trace.ndjson")
	_, _, checkErr, err := checkTrace(path, merged)
	require.NoError(t, err)
	var v *tracecheck.Violation
	require.True(t, errors.As(checkErr, &v), "the checker must reject the unfenced RunStart: %v", checkErr)
	require.Equal(t, path, v.File)

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	var line string
	for sc.Scan() {
		if n++; n == v.Line {
			line = sc.Text()
		}
	}
	require.NotEmpty(t, line, "line %d is past the file's end", v.Line)
	got, err := tracecheck.Read(strings.NewReader(line+"\n"), "line")
	require.NoError(t, err)
	require.Equal(t, bad.Action, got[0].Action, "%s:%d is %s", path, v.Line, line)
	require.Equal(t, bad.Thread, got[0].Thread)
	require.Equal(t, bad.Tick, got[0].Tick)
}

// The replay behind max_active_runs and live_runs_abandoned counts two
// runs of a thread active at once, and an Abandon whose run's own holder
// still held the lease.
func TestActiveRuns(t *testing.T) {
	h1, h2 := core.Holder("h1"), core.Holder("h2")
	ok := []core.TraceEvent{
		{Action: core.ActionRunStart, Thread: "t1", Run: 1, Holder: h1},
		{Action: core.ActionAbandon, Thread: "t1", Run: 1, Holder: h2, Lease: h2},
		{Action: core.ActionRunStart, Thread: "t1", Run: 2, Holder: h2},
		{Action: core.ActionRunStart, Thread: "t2", Run: 1, Holder: h1},
	}
	maxActive, live := activeRuns(ok)
	require.Equal(t, 1, maxActive)
	require.Equal(t, 0, live)
	bad := []core.TraceEvent{
		{Action: core.ActionRunStart, Thread: "t1", Run: 1, Holder: h1},
		{Action: core.ActionRunStart, Thread: "t1", Run: 2, Holder: h2},
		{Action: core.ActionAbandon, Thread: "t1", Run: 2, Holder: h1, Lease: h2},
	}
	maxActive, live = activeRuns(bad)
	require.Equal(t, 2, maxActive, "two runs of t1 active at once")
	require.Equal(t, 1, live, "run 2 abandoned while h2 held the lease")
}

// A handover is measured from the lease's expiry as the claimant's clock
// sees it (or the kill, if later) to the next Claim by another process;
// when the killed process had left the thread with nothing to do, from the
// next Post to it if that came later.
func TestHandovers(t *testing.T) {
	start := time.Unix(1000, 0)
	ttl := 300 * time.Millisecond
	at := func(d time.Duration) int64 { return start.Add(d).UnixNano() }
	killed := &proc{name: "p1", offsets: []offsetAt{{start, 0}}}
	taker := &proc{name: "p2", offsets: []offsetAt{{start, 100 * time.Millisecond}}}
	r := &run{cfg: Config{TTL: ttl}, start: start, procs: []*proc{killed, taker}}
	lines := []core.TraceEvent{
		{Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1, Call: at(0), Return: at(0)},
		{Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "h1", Call: at(0), Return: at(time.Millisecond)},
		{Action: core.ActionRenew, Thread: "t1", Proc: "p1", Holder: "h1", Call: at(100 * time.Millisecond), Return: at(101 * time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: "h2", Call: at(340 * time.Millisecond), Return: at(350 * time.Millisecond)},
		// t2 was released before the kill: no handover.
		{Action: core.ActionClaim, Thread: "t2", Proc: "p1", Holder: "h3", Call: at(0), Return: at(time.Millisecond)},
		{Action: core.ActionRelease, Thread: "t2", Proc: "p1", Holder: "h3", Call: at(10 * time.Millisecond), Return: at(11 * time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t2", Proc: "p2", Holder: "h4", Call: at(400 * time.Millisecond), Return: at(401 * time.Millisecond)},
		// t3 was taken from p1 before the kill: no handover either.
		{Action: core.ActionClaim, Thread: "t3", Proc: "p1", Holder: "h5", Call: at(0), Return: at(time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t3", Proc: "p2", Holder: "h6", Call: at(50 * time.Millisecond), Return: at(60 * time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t3", Proc: "p2", Holder: "h7", Call: at(500 * time.Millisecond), Return: at(501 * time.Millisecond)},
		// p1 consumed t4's one message and ended its run: nothing to do
		// until the Post at 600ms.
		{Action: core.ActionPost, Thread: "t4", Proc: "poster", Msg: 1, Call: at(0), Return: at(0)},
		{Action: core.ActionClaim, Thread: "t4", Proc: "p1", Holder: "h8", Call: at(0), Return: at(time.Millisecond)},
		{Action: core.ActionRunStart, Thread: "t4", Proc: "p1", Holder: "h8", Msg: 1, Taken: 1, Run: 1, Call: at(2 * time.Millisecond), Return: at(3 * time.Millisecond)},
		{Action: core.ActionRunEnd, Thread: "t4", Proc: "p1", Holder: "h8", Taken: 1, Run: 1, Call: at(4 * time.Millisecond), Return: at(5 * time.Millisecond)},
		{Action: core.ActionRenew, Thread: "t4", Proc: "p1", Holder: "h8", Taken: 1, Call: at(100 * time.Millisecond), Return: at(101 * time.Millisecond)},
		{Action: core.ActionPost, Thread: "t4", Proc: "poster", Msg: 2, Taken: 1, Call: at(600 * time.Millisecond), Return: at(601 * time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t4", Proc: "p2", Holder: "h9", Taken: 1, Call: at(610 * time.Millisecond), Return: at(620 * time.Millisecond)},
		// p1 was killed in its Claim of t5: no call, but the line has the
		// expiry it wrote (400ms on p1's clock: 300ms on p2's).
		{Action: core.ActionPost, Thread: "t5", Proc: "poster", Msg: 1, Call: at(0), Return: at(0)},
		{Action: core.ActionClaim, Thread: "t5", Proc: "p1", Holder: "h10", Return: math.MaxInt64, Expires: at(400 * time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t5", Proc: "p2", Holder: "h11", Call: at(310 * time.Millisecond), Return: at(320 * time.Millisecond)},
		// p1 was killed in t6's RunEnd, which committed: t6 had nothing
		// to do from the kill until the Post at 700ms.
		{Action: core.ActionPost, Thread: "t6", Proc: "poster", Msg: 1, Call: at(0), Return: at(0)},
		{Action: core.ActionClaim, Thread: "t6", Proc: "p1", Holder: "h12", Call: at(100 * time.Millisecond), Return: at(101 * time.Millisecond)},
		{Action: core.ActionRunStart, Thread: "t6", Proc: "p1", Holder: "h12", Msg: 1, Taken: 1, Run: 1, Call: at(102 * time.Millisecond), Return: at(103 * time.Millisecond)},
		{Action: core.ActionRunEnd, Thread: "t6", Proc: "p1", Holder: "h12", Taken: 1, Run: 1, Return: math.MaxInt64},
		{Action: core.ActionPost, Thread: "t6", Proc: "poster", Msg: 2, Taken: 1, Call: at(700 * time.Millisecond), Return: at(701 * time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t6", Proc: "p2", Holder: "h13", Taken: 1, Call: at(710 * time.Millisecond), Return: at(720 * time.Millisecond)},
	}
	hs := r.handovers(lines, []kill{{killed, start.Add(150 * time.Millisecond)}})
	require.Len(t, hs, 4)
	// The lease stamped at 100ms + ttl on p1's clock expires at 400ms;
	// p2's clock, 100ms ahead, reaches it at 300ms. The Claim returned at
	// 350ms.
	require.Equal(t, core.ThreadID("t1"), hs[0].Thread)
	require.Equal(t, 50*time.Millisecond, hs[0].AfterExpiry)
	require.Equal(t, 50*time.Millisecond, hs[0].Raw)
	require.Equal(t, 200*time.Millisecond, hs[0].AfterKill)
	require.False(t, hs[0].Idle)
	// t4's claim was due at the Post's call (600ms), after the expiry.
	require.Equal(t, core.ThreadID("t4"), hs[1].Thread)
	require.Equal(t, 20*time.Millisecond, hs[1].AfterExpiry)
	require.Equal(t, 320*time.Millisecond, hs[1].Raw)
	require.True(t, hs[1].Idle)
	require.Equal(t, core.ThreadID("t5"), hs[2].Thread)
	require.Equal(t, 20*time.Millisecond, hs[2].AfterExpiry)
	require.Equal(t, core.ThreadID("t6"), hs[3].Thread)
	require.Equal(t, 20*time.Millisecond, hs[3].AfterExpiry)
	require.True(t, hs[3].Idle)
}

// twoProcs is a run of two processes with a TTL of 300ms: p1, the one a
// test kills, whose clock is true, and p2, whose clock runs 100ms ahead.
// at gives the time d after the run's start, in Unix nanoseconds.
func twoProcs() (r *run, killed *proc, at func(d time.Duration) int64) {
	start := time.Unix(1000, 0)
	killed = &proc{name: "p1", offsets: []offsetAt{{start, 0}}}
	taker := &proc{name: "p2", offsets: []offsetAt{{start, 100 * time.Millisecond}}}
	r = &run{cfg: Config{TTL: 300 * time.Millisecond}, start: start, procs: []*proc{killed, taker}}
	return r, killed, func(d time.Duration) int64 { return start.Add(d).UnixNano() }
}

// A lease that had expired before its holder was killed (its renewal
// stalled) is handed over from the kill, not from the expiry: until the
// kill its holder was alive, and another's Claim then is no handover of a
// dead process's thread. Sweep 3: timed from the expiry, no test failed.
func TestHandoverFromTheKill(t *testing.T) {
	r, killed, at := twoProcs()
	start := r.start
	lines := []core.TraceEvent{
		{Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1, Call: at(0), Return: at(time.Millisecond)},
		// Its expiry, 60ms on p1's clock, is -40ms on p2's; p1 is killed
		// at 150ms, and p2's Claim returns at 170ms.
		{Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "h1", Call: at(2 * time.Millisecond), Return: at(3 * time.Millisecond), Expires: at(60 * time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: "h2", Call: at(160 * time.Millisecond), Return: at(170 * time.Millisecond)},
	}
	hs := r.handovers(lines, []kill{{killed, start.Add(150 * time.Millisecond)}})
	require.Len(t, hs, 1)
	require.Equal(t, 20*time.Millisecond, hs[0].Raw, "from the kill at 150ms")
	require.Equal(t, 20*time.Millisecond, hs[0].AfterExpiry)
	require.Equal(t, 20*time.Millisecond, hs[0].AfterKill)
	require.False(t, hs[0].Idle)
}

// Issue 26: a handover is measured only from a moment the thread had work
// and its holder was gone. A write whose commit its writer never learned,
// but which storage's log has, ended the thread's work: the thread was
// idle from then. The old measure kept it busy until a later write with a
// known return, and reported a handover of 7.7 s that was a Claim 17 ms
// after the thread's next Post.
func TestHandoverAfterWriteInDoubt(t *testing.T) {
	r, killed, at := twoProcs()
	start := r.start
	lines := []core.TraceEvent{
		{Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1, Call: at(0), Return: at(time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t1", Proc: "p3", Holder: "h1", Call: at(10 * time.Millisecond), Return: at(11 * time.Millisecond)},
		{Action: core.ActionRunStart, Thread: "t1", Proc: "p3", Holder: "h1", Msg: 1, Taken: 1, Run: 1, Call: at(12 * time.Millisecond), Return: at(13 * time.Millisecond)},
		// p3's lease lapsed while its run went on; p1 took the thread, and
		// was killed at 150ms holding it: the lease, stamped at 100ms on
		// p1's clock, expires at 400ms, 300ms on p2's.
		{Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "h2", Taken: 1, Call: at(100 * time.Millisecond), Return: at(101 * time.Millisecond), Expires: at(400 * time.Millisecond)},
		// p3's RunEnd, called before p1's Claim, committed after it; p3 was
		// never told. Storage's log has it: t1 had nothing to do from
		// then, before p1's lease expired.
		{Action: core.ActionRunEnd, Thread: "t1", Proc: "p3", Holder: "h1", Taken: 1, Run: 1, Call: at(90 * time.Millisecond), Return: math.MaxInt64},
		{Action: core.ActionCrash, Read: true, Thread: "t1", Proc: "p3", Holder: "h1", Taken: 1, Call: at(200 * time.Millisecond), Return: at(201 * time.Millisecond)},
		{Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2, Taken: 1, Call: at(8000 * time.Millisecond), Return: at(8001 * time.Millisecond)},
		{Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: "h3", Taken: 1, Call: at(8010 * time.Millisecond), Return: at(8017 * time.Millisecond)},
	}
	hs := r.handovers(lines, []kill{{killed, start.Add(150 * time.Millisecond)}})
	require.Len(t, hs, 1)
	require.Equal(t, 17*time.Millisecond, hs[0].AfterExpiry, "from the next Post's call, not from the expiry at 300ms")
	require.True(t, hs[0].Idle, "t1 had nothing to do when p1's lease expired")
	require.Equal(t, 7717*time.Millisecond, hs[0].Raw)
}

// Issue 26: the fleet's counts are checked against storage's trace
// lines. A report that drops a duplicate (here, a message storage's log
// shows consumed by two runs, counted 0 twice) has a problem naming the
// disagreement; a report that counts as the log does has none.
func TestCountsCrossChecked(t *testing.T) {
	lines := []core.TraceEvent{
		{Action: core.ActionPost, Thread: "t1", Msg: 1},
		{Action: core.ActionPost, Thread: "t1", Msg: 2},
		{Action: core.ActionRunStart, Thread: "t1", Holder: "h1", Msg: 1, Run: 1},
		{Action: core.ActionStartFenced, Read: true, Thread: "t1", Holder: "h1", Msg: 2, Run: 2},
		{Action: core.ActionRunStart, Thread: "t1", Holder: "h2", Msg: 1, Run: 2},
		{Action: core.ActionPost, Thread: "t2", Msg: 1},
		{Action: core.ActionPost, Thread: "t2", Msg: 2},
		{Action: core.ActionPost, Thread: "t2", Msg: 3},
		{Action: core.ActionRunStart, Thread: "t2", Holder: "h3", Msg: 1, Run: 1},
		{Action: core.ActionSteerRecord, Thread: "t2", Holder: "h3", Msg: 2, Run: 1},
		{Action: core.ActionReply, Thread: "t2", Holder: "h3", Msg: 3, Req: 1},
	}
	posted, once, twice, lost := consumedFromLog(lines)
	require.Equal(t, []int{5, 3, 1, 1}, []int{posted, once, twice, lost})

	dropped := &Report{Posted: 5, ConsumedOnce: 3, ConsumedTwice: 0, Lost: 1}
	dropped.crossCheckCounts(lines)
	require.Len(t, dropped.Problems, 1, "a duplicate the report dropped")
	require.Contains(t, dropped.Problems[0], "the counts disagree")
	right := &Report{Posted: 5, ConsumedOnce: 3, ConsumedTwice: 1, Lost: 1}
	right.crossCheckCounts(lines)
	require.Empty(t, right.Problems)
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	require.Equal(t, time.Duration(50), percentile(ds, 50))
	require.Equal(t, time.Duration(99), percentile(ds, 99))
	require.Equal(t, time.Duration(0), percentile(nil, 50))
	require.Equal(t, time.Duration(7), percentile([]time.Duration{7}, 99))
}

// B8: the database URL, password and all, goes to a worker through its
// environment, never its command line, which ps shows to every user.
func TestWorkerCommandKeepsTheURLOffTheCommandLine(t *testing.T) {
	url := "postgres://u:s3cret@127.0.0.1:5432/db"
	cmd := workerCommand("/bin/tracecheck", url, "app", []string{"-name", "p1"})
	for _, a := range cmd.Args {
		require.NotContains(t, a, "s3cret", "argv: %q", cmd.Args)
	}
	require.Contains(t, cmd.Env, "DATABASE_URL="+url)
	require.Contains(t, cmd.Env, "PGAPPNAME=app")
	n := 0
	for _, kv := range cmd.Env {
		if strings.HasPrefix(kv, "DATABASE_URL=") {
			n++
		}
	}
	require.Equal(t, 1, n, "one DATABASE_URL in the environment")
}

func TestProxiedURL(t *testing.T) {
	u, network, addr, err := proxiedURL("postgres://postgres@/postgres?host=/tmp/x/sock&port=5433&sslmode=disable", 4000)
	require.NoError(t, err)
	require.Equal(t, "unix", network)
	require.Equal(t, "/tmp/x/sock/.s.PGSQL.5433", addr)
	require.Equal(t, "postgres://postgres@127.0.0.1:4000/postgres?sslmode=disable", u)

	u, network, addr, err = proxiedURL("host=db.example port=6000 user=u dbname=d", 4001)
	require.NoError(t, err)
	require.Equal(t, "tcp", network)
	require.Equal(t, "db.example:6000", addr)
	require.Equal(t, "host=db.example port=6000 user=u dbname=d host=127.0.0.1 port=4001", u)

	_, _, _, err = proxiedURL("postgres://[bad", 1)
	require.ErrorIs(t, err, ErrConfig)
}

func TestUnfencedFlagAndKinds(t *testing.T) {
	var u UnfencedFlag
	require.NoError(t, u.Set("start"))
	require.Equal(t, core.Fences{Start: true}, u.Off)
	require.Equal(t, "start", u.String())
	require.NoError(t, u.Set("reply,abandon"))
	require.Equal(t, core.Fences{Reply: true, Abandon: true}, u.Off)
	require.True(t, u.Mutant())
	require.NoError(t, u.Set("true"))
	require.Equal(t, core.AllFences(), u.Off)
	require.Equal(t, "off: start,reply,abandon", fencesText(u.Off))
	require.NoError(t, u.Set("false"))
	require.False(t, u.Mutant())
	require.Equal(t, "false", u.String())
	require.Equal(t, "on", fencesText(u.Off))
	require.ErrorIs(t, u.Set("claim"), ErrConfig)

	ks, err := ParseKinds("kill,stop,kill")
	require.NoError(t, err)
	require.Equal(t, []Kind{KindKill, KindStop}, ks)
	ks, err = ParseKinds("all")
	require.NoError(t, err)
	require.Equal(t, Kinds(), ks)
	require.NotContains(t, DefaultKinds(), KindRestart)
	require.NotContains(t, DefaultKinds(), KindLose)
	require.Contains(t, DefaultKinds(), KindRewind, "SQL on the fleet's own schema: no cluster of its own")
	_, err = ParseKinds("flood")
	require.ErrorIs(t, err, ErrConfig)
}

// A run with a fence off draws the nemesis kinds that take a lease from a
// live holder, over more messages than a plain run, unless told otherwise:
// the calibrated kill check.
func TestMutantDefaults(t *testing.T) {
	plain := Config{}.withDefaults()
	require.Equal(t, 600, plain.Messages)
	require.Equal(t, DefaultKinds(), plain.Nemesis)
	mutant := Config{Unfenced: core.Fences{Abandon: true}}.withDefaults()
	require.Equal(t, MutantMessages, mutant.Messages)
	require.Equal(t, MutantKinds(), mutant.Nemesis)
	require.Equal(t, 600, Config{Unfenced: core.Fences{Abandon: true}, Messages: 600}.withDefaults().Messages, "given, kept")
}

func TestConfigValidate(t *testing.T) {
	good := Config{URL: "postgres://x", Bin: "/bin/true"}
	require.NoError(t, good.Validate())
	for flag, c := range map[string]Config{
		"-ttl":                   {URL: "postgres://u", Bin: "b", TTL: 2 * time.Nanosecond},
		"-procs":                 {URL: "postgres://u", Bin: "b", Procs: -1},
		"-threads":               {URL: "postgres://u", Bin: "b", Threads: -1},
		"-messages":              {URL: "postgres://u", Bin: "b", Messages: -1},
		"-posters":               {URL: "postgres://u", Bin: "b", Posters: -1},
		"-duration":              {URL: "postgres://u", Bin: "b", Duration: -time.Second},
		"-bin":                   {URL: "postgres://u"},
		"storage":                {Bin: "b"},
		"-storage: cannot parse": {URL: "postgres://%zz", Bin: "b"}, // exit 2, where connecting said 4
	} {
		err := c.Validate()
		require.ErrorIs(t, err, ErrConfig, flag)
		require.Contains(t, err.Error(), flag)
	}
	err := Config{URL: "postgres://u", Bin: "b", Procs: 1, Nemesis: []Kind{KindKill}}.Validate()
	require.ErrorContains(t, err, "-procs 1")
	require.NoError(t, Config{URL: "postgres://u", Bin: "b", Procs: 1, NoNemesis: true}.Validate())
}

// A claim is due at the lease's expiry when the thread had work then, even
// if the work ended and new work came before the claim; when it was idle,
// at the next start of work.
func TestDueAt(t *testing.T) {
	changes := []workChange{{0, true}, {100, false}, {300, true}, {400, false}, {600, true}}
	for _, c := range []struct {
		from, due int64
		idle      bool
	}{
		{50, 50, false},   // work at the expiry
		{200, 300, true},  // idle at the expiry: due at the next post
		{350, 350, false}, // work at the expiry, idle later, then work again
		{500, 600, true},
		{700, 700, false},
	} {
		due, idle := dueAt(changes, c.from)
		require.Equal(t, c.due, due, "expiry at %d", c.from)
		require.Equal(t, c.idle, idle, "expiry at %d", c.from)
	}
	due, idle := dueAt([]workChange{{0, true}, {10, false}}, 50)
	require.Equal(t, int64(50), due, "claimed with no work at all since: from the expiry")
	require.True(t, idle)
}

// A post that keeps failing ends the posting after -timeout, with its
// last error; before, the posters retried for ever and printed nothing.
func TestPostingDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := memory.New()
	r := &run{cfg: Config{Messages: 3, Timeout: 100 * time.Millisecond}, threads: []core.ThreadID{"no-such-thread"}, start: time.Now()}
	posters := []*poster{{ws: core.NewWorkspace(st, core.SystemClock{})}, {ws: core.NewWorkspace(st, core.SystemClock{})}}
	err := r.post(ctx, posters)
	require.NoError(t, ctx.Err(), "the posting did not end within 10 s of a post that kept failing")
	require.Error(t, err)
	require.ErrorIs(t, err, core.ErrUnknownThread, "the last error")
	require.Contains(t, err.Error(), "failed for 100ms (-timeout)")
}

// Each failure the runs and the counts can show fails the fleet on its
// own: set alone on an otherwise clean report, each adds its problem, and
// a clean report has none. (The fleet's mutant test is caught by several
// checks at once, so it cannot tell that each one bites.)
func TestVerdictProblemsEachAlone(t *testing.T) {
	clean := func() *Report { return &Report{Posted: 10, ConsumedOnce: 10, Drained: true} }
	described := func() string { return "the lost messages, described" }
	if ps := append(clean().runProblems(), clean().countProblems(time.Minute, described)...); len(ps) != 0 {
		t.Fatalf("a clean report has problems: %q", ps)
	}
	for _, tc := range []struct {
		name string
		set  func(*Report)
		want []string
	}{
		{"two runs active", func(r *Report) { r.MaxActiveRuns = 2 }, []string{"I3_OneActiveRun: 2 runs"}},
		{"a live abandon", func(r *Report) { r.LiveAbandoned = 1 }, []string{"NoLiveAbandon: 1 runs"}},
		{"one consumed twice", func(r *Report) { r.ConsumedTwice, r.ConsumedOnce = 1, 9 }, []string{"I1_ConsumedAtMostOnce: 1 messages"}},
		{"one lost", func(r *Report) { r.Lost, r.ConsumedOnce = 1, 9 }, []string{"Liveness: 1 of 10 messages never consumed", "the lost messages, described"}},
		{"not drained", func(r *Report) { r.Drained = false }, []string{"Liveness: threads still had work 1m0s"}},
	} {
		r := clean()
		tc.set(r)
		ps := append(r.runProblems(), r.countProblems(time.Minute, described)...)
		if len(ps) != len(tc.want) {
			t.Errorf("%s: problems %q, want %d", tc.name, ps, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(ps[i], w) {
				t.Errorf("%s: problem %q, want it to begin %q", tc.name, ps[i], w)
			}
		}
	}
}

// The acknowledged writes storage lost are counted by action, and the
// posts among them apart: a post lost before anyone took it is no message
// to consume, and the report says how many.
func TestNoteStorageLost(t *testing.T) {
	var rep Report
	rep.noteStorageLost([]core.TraceEvent{{Action: core.ActionPost}, {Action: core.ActionClaim}, {Action: core.ActionClaim}})
	require.Equal(t, 3, rep.StorageLostWrites)
	require.Equal(t, 1, rep.PostsLost)
	require.Equal(t, map[core.Action]int{core.ActionPost: 1, core.ActionClaim: 2}, rep.StorageLost)
	var none Report
	none.noteStorageLost(nil)
	require.Zero(t, none.StorageLostWrites)
	require.Nil(t, none.StorageLost)
}

// The trace checker's, porcupine's and TLC's verdicts each make a problem
// alone, on a clean report: a rejected trace, a history that is not
// linearizable (one porcupine could not decide is inconclusive, no
// problem), a thread TLC rejects, and a thread on which TLC and the Go
// checker disagree, of verdict or of line. Sweep 3: each append could be
// dropped with the fleet's end-to-end tests still failing on another.
func TestVerdictNotesEachAlone(t *testing.T) {
	var clean Report
	clean.noteTrace(nil)
	clean.noteLinearizable(nil)
	require.Empty(t, clean.Problems)
	require.True(t, clean.TraceAccepted)
	require.True(t, clean.Linearizable)

	var rejected Report
	rejected.noteTrace(errors.New("trace.ndjson:7: RunStart by p2: guard fails"))
	require.False(t, rejected.TraceAccepted)
	require.Equal(t, []string{"trace.ndjson:7: RunStart by p2: guard fails"}, rejected.Problems)

	var notLin, unknown Report
	notLin.noteLinearizable(tracecheck.ErrNotLinearizable)
	require.False(t, notLin.Linearizable)
	require.Equal(t, []string{tracecheck.ErrNotLinearizable.Error()}, notLin.Problems)
	unknown.noteLinearizable(fmt.Errorf("after 1m: %w", tracecheck.ErrLinearizabilityUnknown))
	require.True(t, unknown.Inconclusive)
	require.Empty(t, unknown.Problems)

	read := func(name string) []core.TraceEvent {
		lines, err := tracecheck.ReadFile(filepath.Join("..", "..", "tracecheck", "testdata", name))
		require.NoError(t, err)
		return lines
	}
	// Two threads, their lines interleaved in the file: the Go checker
	// accepts the first, and rejects the second at its 5th line, which is
	// the file's 10th.
	okLines, badLines := read("ok-crash-takeover.ndjson"), read("bad-start-under-other-lease.ndjson")
	var file []core.TraceEvent
	for i := range max(len(okLines), len(badLines)) {
		if i < len(okLines) {
			file = append(file, okLines[i])
		}
		if i < len(badLines) {
			l := badLines[i]
			l.Thread = "t2"
			file = append(file, l)
		}
	}
	ths := tlc.SplitThreads(file)
	require.Len(t, ths, 2)
	ok, bad := ths[0], ths[1]
	require.Equal(t, 10, bad.N[4])
	for _, tc := range []struct {
		name   string
		th     tlc.Thread
		tlcAt  int
		prefix []string
	}{
		{"both accept", ok, 0, nil},
		{"both reject at one line", bad, 10, []string{"TLC trace validation: t.ndjson:10: thread t2"}},
		{"TLC rejects what Go accepts", ok, 5, []string{"TLC trace validation: t.ndjson:5:", "TLC and the Go checker disagree"}},
		{"TLC accepts what Go rejects", bad, 0, []string{"TLC and the Go checker disagree"}},
		{"both reject, at other lines", bad, 5, []string{"TLC trace validation: t.ndjson:5:", "TLC and the Go checker disagree"}},
	} {
		var rep Report
		rep.noteTLC("t.ndjson", []tlc.Thread{tc.th}, []int{tc.tlcAt})
		if len(rep.Problems) != len(tc.prefix) {
			t.Errorf("%s: problems %q, want %d", tc.name, rep.Problems, len(tc.prefix))
			continue
		}
		for i, p := range tc.prefix {
			require.True(t, strings.HasPrefix(rep.Problems[i], p), "%s: problem %q, want it to begin %q", tc.name, rep.Problems[i], p)
		}
		require.Equal(t, []string{string(tc.th.ID)}, rep.TLCThreads)
	}
}

// A worker's lease clock offset at a moment is the one set last before
// it: the offset it started with, a clock fault's jump while it held,
// and the offset put back after. The handovers time a lease's expiry
// with it. Written against a mutant of the seventeenth pass that read
// the last offset whatever the moment.
func TestProcOffsetAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := &proc{offsets: []offsetAt{{t0, 10 * time.Millisecond}, {t0.Add(time.Second), -90 * time.Millisecond}, {t0.Add(3 * time.Second), 10 * time.Millisecond}}}
	for _, tc := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{-time.Second, 0}, // before the process started: none yet
		{0, 10 * time.Millisecond},
		{time.Second, -90 * time.Millisecond},
		{2 * time.Second, -90 * time.Millisecond},
		{3 * time.Second, 10 * time.Millisecond},
		{time.Hour, 10 * time.Millisecond},
	} {
		require.Equal(t, tc.want, p.offset(t0.Add(tc.at)), "the offset %v after the start", tc.at)
	}
}
