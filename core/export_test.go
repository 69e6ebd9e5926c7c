package core

import "reflect"

// RoundFields returns the fields of claim c's round that describe where
// it is (all but its workspace, its lock and its calls in flight), by
// name, and the number of fields the round has.
func RoundFields(c Claim) (map[string]any, int) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	v := reflect.ValueOf(c.r).Elem()
	out := map[string]any{}
	for i := range v.NumField() {
		switch name := v.Type().Field(i).Name; name {
		case "ws", "mu", "idle", "calls", "sole", "ending": // the calls in flight, none in a fork
		default:
			f := v.Field(i)
			switch f.Kind() {
			case reflect.Bool:
				out[name] = f.Bool()
			case reflect.Uint64, reflect.Uint8, reflect.Uint, reflect.Uint32:
				out[name] = f.Uint()
			case reflect.Int64, reflect.Int, reflect.Int32, reflect.Uint16:
				out[name] = f.Int()
			case reflect.String:
				out[name] = f.String()
			case reflect.Pointer:
				if f.IsNil() {
					out[name] = nil
				} else {
					switch name {
					case "doubtLine":
						out[name] = *c.r.doubtLine
					case "doubtPlan":
						out[name] = *c.r.doubtPlan
					default:
						panic("RoundFields: a pointer field it does not know: " + name)
					}
				}
			default:
				out[name] = f.String() // a struct: compared by the test below
			}
		}
	}
	out["plan"] = c.r.plan
	return out, v.NumField()
}

// MarkRoundInDoubt sets the fields a round has only after a write whose
// commit was unknown, so that a test sees them copied.
func MarkRoundInDoubt(c Claim) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.doubt, c.r.claimDoubt, c.r.crashFailed, c.r.doubtReleased = true, true, true, true
	c.r.doubtLine = &TraceEvent{Action: ActionRunEnd, Thread: c.Thread, Tick: c.r.tick + 1}
	c.r.doubtPlan = &TraceEvent{Action: ActionPlan, Read: true, Thread: c.Thread, Tick: c.r.tick + 1}
}

// RecentHolders is how many holders a Workspace remembers to refuse
// their reuse.
const RecentHolders = recentHolders

// SameRound reports whether two claims name the same round.
func SameRound(a, b Claim) bool { return a.r == b.r }
