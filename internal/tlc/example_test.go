package tlc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/threadclaim/threadclaim/internal/tlc"
)

// Parse reads TLC's -tool output by its message codes.
func ExampleParse() {
	out := `@!@!@STARTMSG 2262:0 @!@!@
TLC2 Version 2.19 of 08 August 2024 (rev: 5a47802)
@!@!@ENDMSG 2262 @!@!@
@!@!@STARTMSG 2110:1 @!@!@
Invariant I1_ConsumedAtMostOnce is violated.
@!@!@ENDMSG 2110 @!@!@
@!@!@STARTMSG 2121:1 @!@!@
The behavior up to this point is:
@!@!@ENDMSG 2121 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
1: <Initial predicate>
/\ consumed = <<0>>
@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
2: <RunStart("p1") line 171, col 5 to line 181, col 71 of module ThreadClaimLapse>
/\ consumed = <<2>>
@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2199:0 @!@!@
1505 states generated, 497 distinct states found, 230 states left on queue.
@!@!@ENDMSG 2199 @!@!@
@!@!@STARTMSG 2186:0 @!@!@
Finished in 993ms at (2026-12-01 01:17:14)
@!@!@ENDMSG 2186 @!@!@
`
	res, err := tlc.Parse(strings.NewReader(out))
	if err != nil {
		fmt.Println(err)
		return
	}
	last := res.Trace[len(res.Trace)-1]
	consumed, _ := last.Var("consumed")
	fmt.Println(res.Outcome, res.Name)
	fmt.Println(res.Distinct, "distinct states;", last.ActionName(), "leaves consumed =", consumed)
	// Output:
	// invariant violated I1_ConsumedAtMostOnce
	// 497 distinct states; RunStart("p1") leaves consumed = <<2>>
}

// Find and Run check one model with its own deadline.
func ExampleEnv_Run() {
	ctx := context.Background()
	env, err := tlc.Find(ctx, tlc.FindConfig{})
	if errors.Is(err, tlc.ErrNotFound) {
		fmt.Println("TLC was not run:", err)
		return
	}
	res, err := env.Run(ctx, tlc.Job{
		Spec: "ThreadClaimLapse.tla", Config: "ThreadClaimLapseUnfenced.cfg",
		Dir: "/tmp/copy-of-spec", Timeout: 10 * time.Minute,
	})
	if err != nil {
		fmt.Println(err) // deadline passed, TLC crashed, or could not start
		return
	}
	fmt.Println(res.Outcome, res.Name, len(res.Trace))
}
