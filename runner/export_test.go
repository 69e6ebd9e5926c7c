package runner

import "reflect"

// TurnFields returns the fields of a turn that say where it is, by name
// (all but its runner, locks, contexts and span, and with its run handles
// as their claim's holder, prompt and run), and the number of fields a
// Turn has.
func TurnFields(t *Turn) (map[string]any, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	handle := func(h *RunHandle) any {
		if h == nil {
			return nil
		}
		return [3]any{h.Claim.Holder, h.Prompt, h.RunID()}
	}
	var handles []any
	for _, h := range t.handles {
		handles = append(handles, handle(h))
	}
	return map[string]any{
		"thread": t.thread, "next": t.next, "claim": [2]any{t.claim.Thread, t.claim.Holder},
		"abandon": t.abandon, "plan": t.plan, "handle": handle(t.handle), "handles": handles,
		"runErr": t.runErr, "outcome": t.outcome, "err": t.err, "begun": t.begun, "consumes": t.consumes,
		"yielded": t.yielded, "takeover": t.takeover, "planned": t.planned, "mutant": t.mutant,
		"lost": t.lost, "stopping": t.stopping, "releasing": t.releasing, "over": t.over, "doubt": t.doubt,
		"stepping":     t.stepping.Load(),
		"cancelled":    t.runCtx != nil && t.runCtx.Err() != nil,
		"handleIsLast": len(t.handles) > 0 && t.handle == t.handles[len(t.handles)-1],
	}, reflect.TypeFor[Turn]().NumField()
}
