package tracecheck_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Checking a trace: one claim's round on thread t1, then the same trace
// with a RunStart under a lease another holder took (the fence was off).
func ExampleCheckReader() {
	ok := `{"tick":1,"read":false,"action":"Post","thread":"t1","proc":"poster","holder":"","msg":1,"req":0,"run":0,"taken":0,"lease":""}
{"tick":2,"read":false,"action":"Claim","thread":"t1","proc":"p1","holder":"ha","msg":0,"req":0,"run":0,"taken":0,"lease":"ha"}
{"tick":2,"read":true,"action":"Plan","thread":"t1","proc":"p1","holder":"ha","msg":1,"req":0,"run":0,"taken":0,"lease":"","kind":"run"}
{"tick":3,"read":false,"action":"RunStart","thread":"t1","proc":"p1","holder":"ha","msg":1,"req":0,"run":1,"taken":1,"lease":"ha"}
{"tick":4,"read":false,"action":"RunEnd","thread":"t1","proc":"p1","holder":"ha","msg":0,"req":0,"run":1,"taken":1,"lease":""}
{"tick":5,"read":false,"action":"Release","thread":"t1","proc":"p1","holder":"ha","msg":0,"req":0,"run":0,"taken":1,"lease":""}
`
	stats, err := tracecheck.CheckReader(strings.NewReader(ok), "ok.ndjson")
	fmt.Println(stats.Lines, "lines, error:", err)

	bad := `{"tick":1,"read":false,"action":"Post","thread":"t1","proc":"poster","holder":"","msg":1,"req":0,"run":0,"taken":0,"lease":""}
{"tick":2,"read":false,"action":"Claim","thread":"t1","proc":"p1","holder":"ha","msg":0,"req":0,"run":0,"taken":0,"lease":"ha"}
{"tick":2,"read":true,"action":"Plan","thread":"t1","proc":"p1","holder":"ha","msg":1,"req":0,"run":0,"taken":0,"lease":"","kind":"run"}
{"tick":3,"read":false,"action":"Claim","thread":"t1","proc":"p2","holder":"hb","msg":0,"req":0,"run":0,"taken":0,"lease":"hb"}
{"tick":4,"read":false,"action":"RunStart","thread":"t1","proc":"p1","holder":"ha","msg":1,"req":0,"run":1,"taken":1,"lease":"hb"}
`
	_, err = tracecheck.CheckReader(strings.NewReader(bad), "bad.ndjson")
	var v *tracecheck.Violation
	if errors.As(err, &v) {
		fmt.Println("rejected:", v.File, "line", v.Line, v.Action, "guard", v.Rule)
	}
	// Output:
	// 6 lines, error: <nil>
	// rejected: bad.ndjson line 5 RunStart guard Fenced => HasLease(p)
}

// Checking what the real code did: a Recorder is the Workspace's Tracer,
// and Check follows its lines through the specification. (A process that
// writes a file passes a Writer instead, and the file is checked with
// CheckFile or `tracecheck validate`.)
func ExampleRecorder() {
	ctx := context.Background()
	rec := &tracecheck.Recorder{}
	clock := coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC))
	ws := core.NewWorkspace(memory.New(), clock, core.WithProcess("p1"), core.WithTracer(rec))
	_ = ws.CreateThread(ctx, "t1")
	_, _ = ws.Post(ctx, "t1", "deploy staging")

	c, _ := ws.Claim(ctx, "t1", "9f3c2a", 30*time.Second)
	p, _ := ws.Plan(ctx, c)
	run, _ := ws.RunStart(ctx, c, p.Message)
	_ = ws.RunEnd(ctx, c, run, "")
	_ = ws.Release(ctx, c)

	stats, err := tracecheck.Check(rec.Lines())
	fmt.Println(stats.Lines, "lines,", stats.PerAction[core.ActionRunStart], "RunStart, error:", err)
	// Output:
	// 6 lines, 1 RunStart, error: <nil>
}
