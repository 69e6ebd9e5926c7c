package tracecheck

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/threadclaim/threadclaim/core"
)

// LinKind is an operation of the lease and fenced-consume model.
type LinKind uint8

// The model's operations: core.Workspace's Claim, Renew, Release,
// RunStart, Reply and SteerRecord, and a read of the taken cursor.
const (
	LinClaim       LinKind = iota // acquire the lease: ok, or busy
	LinRenew                      // extend the lease: ok, or busy
	LinRelease                    // give the lease up if it is the holder's: ok
	LinRunStart                   // fenced: ok with the new run's id, or busy
	LinReply                      // fenced: ok, busy, or already answered
	LinSteerRecord                // not fenced: ok, or refused (its run was abandoned)
	LinTaken                      // read the taken cursor
)

var linKindNames = [...]string{"Claim", "Renew", "Release", "RunStart", "Reply", "SteerRecord", "Taken"}

// LinKinds returns every operation of the model, in order.
func LinKinds() []LinKind {
	out := make([]LinKind, len(linKindNames))
	for i := range out {
		out[i] = LinKind(i)
	}
	return out
}

func (k LinKind) String() string {
	if int(k) < len(linKindNames) {
		return linKindNames[k]
	}
	return fmt.Sprintf("LinKind(%d)", k)
}

// LinInput is an operation's call: what the caller passed.
type LinInput struct {
	Kind   LinKind
	Thread core.ThreadID
	Holder core.Holder    // all but Taken
	Now    int64          // Claim, Renew: the caller's clock reading, in Unix nanoseconds
	TTL    time.Duration  // Claim, Renew; 0 when the time is not known (OperationsFromTrace)
	Msg    core.Seq       // RunStart: the prompt; Reply: the answer; SteerRecord: the steering
	Req    core.RequestID // Reply
	Run    core.RunID     // SteerRecord: the run given the steering
}

// LinStatus is how an operation ended.
type LinStatus uint8

// The outcomes the model knows. An operation that ended any other way
// (an unknown commit, a broken connection) is not recorded.
const (
	LinOK        LinStatus = iota
	LinBusy                // core.ErrThreadBusy: another holder's lease, or a fence's refusal
	LinAnswered            // core.ErrAlreadyAnswered
	LinAbandoned           // core.ErrRunAbandoned: a SteerRecord refused (SteerRefused)
)

var linStatusNames = [...]string{"ok", "busy", "already-answered", "run-abandoned"}

func (s LinStatus) String() string {
	if int(s) < len(linStatusNames) {
		return linStatusNames[s]
	}
	return fmt.Sprintf("LinStatus(%d)", s)
}

// LinOutput is an operation's return.
type LinOutput struct {
	Status LinStatus
	Run    core.RunID // RunStart, ok: the new run's id
	Taken  core.Seq   // Taken: the cursor read
}

// linState is one thread's state in the model: the lease, the cursor, how
// many runs started, and which messages and requests were consumed and
// answered (bitmaps in strings, so that states compare with ==).
type linState struct {
	holder   core.Holder
	expiry   int64
	taken    core.Seq
	runs     core.RunID
	consumed string
	answered string
}

func hasBit(set string, i int64) bool {
	return i >= 0 && i/8 < int64(len(set)) && set[i/8]&(1<<(i%8)) != 0
}

func withBit(set string, i int64) string {
	if i < 0 {
		return set
	}
	b := []byte(set)
	for int64(len(b)) <= i/8 {
		b = append(b, 0)
	}
	b[i/8] |= 1 << (i % 8)
	return string(b)
}

// linStep is the model's sequential specification of one operation. It is
// pure: it returns a new state.
//
// Claim succeeds exactly when nobody holds the lease or the lease has
// expired by the caller's clock (Now >= expiry), as core.Workspace.Claim;
// Renew exactly when the caller's holder has the lease, expired or not.
// RunStart and Reply are fenced: they succeed exactly when the caller's
// holder has the lease, and then consume their message, which must not
// have been consumed before (I1); RunStart returns the next run id. Reply
// to a request already answered is refused after the fence, as core does.
// SteerRecord is not fenced: the model does not follow runs, so a refusal
// (the run was abandoned) is always possible and changes nothing; a
// record that succeeds consumes its message, which must not have been
// consumed before (I1: steering given to an abandoned run and given again
// by the next holder is consumed once, by whichever record or start
// succeeds).
func linStep(state, input, output any) (bool, any) {
	s, in, out := state.(linState), input.(LinInput), output.(LinOutput)
	mine := in.Holder != "" && s.holder == in.Holder
	switch in.Kind {
	case LinClaim:
		free := s.holder == "" || in.Now >= s.expiry
		if in.TTL == 0 && s.holder != "" && out.Status == LinOK {
			free = true // time unknown (from a trace): the lease may have expired
		}
		if !free {
			return out.Status == LinBusy, s
		}
		s.holder, s.expiry = in.Holder, in.Now+int64(in.TTL)
		return out.Status == LinOK, s
	case LinRenew:
		if !mine {
			return out.Status == LinBusy, s
		}
		s.expiry = in.Now + int64(in.TTL)
		return out.Status == LinOK, s
	case LinRelease:
		if mine {
			s.holder, s.expiry = "", 0
		}
		return out.Status == LinOK, s
	case LinRunStart:
		if !mine {
			return out.Status == LinBusy, s
		}
		if out.Status != LinOK || hasBit(s.consumed, int64(in.Msg)) || out.Run != s.runs+1 {
			return false, s
		}
		s.runs++
		s.taken = in.Msg
		s.consumed = withBit(s.consumed, int64(in.Msg))
		return true, s
	case LinReply:
		switch {
		case !mine:
			return out.Status == LinBusy, s
		case hasBit(s.answered, int64(in.Req)):
			return out.Status == LinAnswered, s
		case out.Status != LinOK || hasBit(s.consumed, int64(in.Msg)):
			return false, s
		}
		s.taken = in.Msg
		s.consumed = withBit(s.consumed, int64(in.Msg))
		s.answered = withBit(s.answered, int64(in.Req))
		return true, s
	case LinSteerRecord:
		switch {
		case out.Status == LinAbandoned:
			return true, s
		case out.Status != LinOK || hasBit(s.consumed, int64(in.Msg)):
			return false, s
		}
		s.taken = in.Msg
		s.consumed = withBit(s.consumed, int64(in.Msg))
		return true, s
	case LinTaken:
		return out.Taken == s.taken, s
	}
	return false, s
}

func linPartition(history []porcupine.Operation) [][]porcupine.Operation {
	var out [][]porcupine.Operation
	index := map[core.ThreadID]int{}
	for _, op := range history {
		id := op.Input.(LinInput).Thread
		i, ok := index[id]
		if !ok {
			i = len(out)
			index[id] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

func linPartitionEvent(history []porcupine.Event) [][]porcupine.Event {
	threadOf := map[int]core.ThreadID{}
	for _, ev := range history {
		if ev.Kind == porcupine.CallEvent {
			threadOf[ev.Id] = ev.Value.(LinInput).Thread
		}
	}
	var out [][]porcupine.Event
	index := map[core.ThreadID]int{}
	for _, ev := range history {
		id := threadOf[ev.Id]
		i, ok := index[id]
		if !ok {
			i = len(out)
			index[id] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], ev)
	}
	return out
}

func linHash(state any) uint64 {
	s := state.(linState)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%d|%d|%d|%s|%s", s.holder, s.expiry, s.taken, s.runs, s.consumed, s.answered)
	return h.Sum64()
}

func describeLinOp(input, output any) string {
	in, out := input.(LinInput), output.(LinOutput)
	var call string
	switch in.Kind {
	case LinClaim, LinRenew:
		// A history read from a trace does not know the time (TTL 0):
		// the label says so rather than show now=0, ttl=0s.
		call = fmt.Sprintf("%s(%s, time unknown)", in.Kind, in.Holder)
		if in.TTL != 0 {
			call = fmt.Sprintf("%s(%s, now=%d, ttl=%v)", in.Kind, in.Holder, in.Now, in.TTL)
		}
	case LinRelease:
		call = fmt.Sprintf("Release(%s)", in.Holder)
	case LinRunStart:
		call = fmt.Sprintf("RunStart(%s, m%d)", in.Holder, in.Msg)
	case LinReply:
		call = fmt.Sprintf("Reply(%s, q%d, m%d)", in.Holder, in.Req, in.Msg)
	case LinSteerRecord:
		call = fmt.Sprintf("SteerRecord(%s, run %d, m%d)", in.Holder, in.Run, in.Msg)
	case LinTaken:
		return fmt.Sprintf("Taken() -> %d", out.Taken)
	}
	if in.Kind == LinRunStart && out.Status == LinOK {
		return fmt.Sprintf("%s -> ok run %d", call, out.Run)
	}
	return call + " -> " + out.Status.String()
}

func bits(set string) []string {
	var out []string
	for i := int64(0); i < int64(len(set))*8; i++ {
		if hasBit(set, i) {
			out = append(out, fmt.Sprint(i))
		}
	}
	return out
}

func describeLinState(state any) string {
	s := state.(linState)
	lease := "none"
	if s.holder != "" {
		lease = fmt.Sprintf("%s until %d", s.holder, s.expiry)
	}
	return fmt.Sprintf("lease %s, taken %d, runs %d, consumed {%s}, answered {%s}",
		lease, s.taken, s.runs, strings.Join(bits(s.consumed), ","), strings.Join(bits(s.answered), ","))
}

// LeaseModel returns the porcupine model of the lease and fenced-consume
// operations on threads, partitioned per thread. It is a pure value. Each
// operation's sequential specification is documented in the source, at
// the unexported linStep.
func LeaseModel() porcupine.Model {
	return porcupine.Model{
		Partition:         linPartition,
		PartitionEvent:    linPartitionEvent,
		Init:              func() any { return linState{} },
		Step:              linStep,
		Hash:              linHash,
		DescribeOperation: describeLinOp,
		DescribeState:     describeLinState,
	}
}

// History records porcupine operations as they happen. Its clock must be
// monotonic (successive readings never decrease); it is read just before
// each call and just after its return. It is safe for concurrent use.
type History struct {
	mu  sync.Mutex
	now func() int64
	ops []porcupine.Operation
}

// NewHistory returns an empty History whose timestamps come from now,
// which must not be nil (Begin panics, as it does on the zero History).
func NewHistory(now func() int64) *History { return &History{now: now} }

// Begin reads the clock for a call by client of in, and returns the
// function that records its return with out. An operation whose outcome
// is not one the model knows must not be recorded (its function is not
// called): it must also have changed nothing, as a transaction that
// returned an error has not.
func (h *History) Begin(client int, in LinInput) func(out LinOutput) {
	if h.now == nil {
		panic("tracecheck: History has no clock: make it with NewHistory and a non-nil now")
	}
	call := h.now()
	return func(out LinOutput) {
		ret := h.now()
		h.mu.Lock()
		h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
		h.mu.Unlock()
	}
}

// Operations returns a copy of the operations recorded so far.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Len returns how many operations were recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// LinClient makes one client's calls on a core.Workspace and records them
// in a History. The workspace's clock must move only between the client's
// own calls (a manual clock, coretest.Clock, that the client advances), so that the clock reading
// recorded for a Claim or Renew is the one core stamps the lease with.
// W and H must be set (the zero LinClient's calls panic).
type LinClient struct {
	ID int
	W  *core.Workspace
	H  *History
}

func linStatus(err error) (LinStatus, bool) {
	switch {
	case err == nil:
		return LinOK, true
	case errors.Is(err, core.ErrThreadBusy):
		return LinBusy, true
	case errors.Is(err, core.ErrAlreadyAnswered):
		return LinAnswered, true
	case errors.Is(err, core.ErrRunAbandoned):
		return LinAbandoned, true
	}
	return 0, false
}

func (c *LinClient) record(in LinInput, call func() (LinOutput, error)) error {
	done := c.H.Begin(c.ID, in)
	out, err := call()
	st, known := linStatus(err)
	if known {
		out.Status = st
		done(out)
	}
	return err
}

// Claim calls Workspace.Claim and records it.
func (c *LinClient) Claim(ctx context.Context, id core.ThreadID, holder core.Holder, ttl time.Duration) (core.Claim, error) {
	var cl core.Claim
	err := c.record(LinInput{Kind: LinClaim, Thread: id, Holder: holder, Now: c.W.Now().UnixNano(), TTL: ttl}, func() (LinOutput, error) {
		var err error
		cl, err = c.W.Claim(ctx, id, holder, ttl)
		return LinOutput{}, err
	})
	return cl, err
}

// Renew calls Workspace.Renew and records it.
func (c *LinClient) Renew(ctx context.Context, cl core.Claim, ttl time.Duration) error {
	return c.record(LinInput{Kind: LinRenew, Thread: cl.Thread, Holder: cl.Holder, Now: c.W.Now().UnixNano(), TTL: ttl}, func() (LinOutput, error) {
		return LinOutput{}, c.W.Renew(ctx, cl, ttl)
	})
}

// Release calls Workspace.Release and records it.
func (c *LinClient) Release(ctx context.Context, cl core.Claim) error {
	return c.record(LinInput{Kind: LinRelease, Thread: cl.Thread, Holder: cl.Holder}, func() (LinOutput, error) {
		return LinOutput{}, c.W.Release(ctx, cl)
	})
}

// RunStart calls Workspace.RunStart and records it.
func (c *LinClient) RunStart(ctx context.Context, cl core.Claim, prompt core.Seq) (core.RunID, error) {
	var run core.RunID
	err := c.record(LinInput{Kind: LinRunStart, Thread: cl.Thread, Holder: cl.Holder, Msg: prompt}, func() (LinOutput, error) {
		var err error
		run, err = c.W.RunStart(ctx, cl, prompt)
		return LinOutput{Run: run}, err
	})
	return run, err
}

// Reply calls Workspace.Reply and records it.
func (c *LinClient) Reply(ctx context.Context, cl core.Claim, req core.RequestID, answer core.Seq) error {
	return c.record(LinInput{Kind: LinReply, Thread: cl.Thread, Holder: cl.Holder, Msg: answer, Req: req}, func() (LinOutput, error) {
		return LinOutput{}, c.W.Reply(ctx, cl, req, answer)
	})
}

// SteerRecord calls Workspace.SteerRecord and records it.
func (c *LinClient) SteerRecord(ctx context.Context, cl core.Claim, run core.RunID, msg core.Seq) error {
	return c.record(LinInput{Kind: LinSteerRecord, Thread: cl.Thread, Holder: cl.Holder, Msg: msg, Run: run}, func() (LinOutput, error) {
		return LinOutput{}, c.W.SteerRecord(ctx, cl, run, msg)
	})
}

// Taken reads the thread's taken cursor and records it.
func (c *LinClient) Taken(ctx context.Context, id core.ThreadID) (core.Seq, error) {
	var taken core.Seq
	err := c.record(LinInput{Kind: LinTaken, Thread: id}, func() (LinOutput, error) {
		th, err := c.W.Thread(ctx, id)
		if err != nil {
			return LinOutput{}, err
		}
		taken = th.Taken
		return LinOutput{Taken: taken}, nil
	})
	return taken, err
}

// OperationsFromTrace makes a porcupine history of the lease and
// fenced-consume operations in trace lines stamped with their call and
// return times (core.TraceClock): Claim, Renew and Release lines; RunStart
// and Reply (ok) and StartFenced and ReplyFenced (busy); SteerRecord (ok)
// and SteerRefused (run-abandoned). Refused Claims and
// Renews are not traced, and change nothing, so they are missing; a trace
// carries no clock readings, so Claims are checked without time: one may
// take a lease another holder has (it may have expired), as the trace
// checker infers a Lapse. Clients are numbered by process, in order of
// appearance. A line without its times (Call and Return 0, a trace
// written without a core.TraceClock) makes an operation that overlaps
// every other at time 0: such a history checks no real-time order.
func OperationsFromTrace(lines []core.TraceEvent) []porcupine.Operation {
	var ops []porcupine.Operation
	clients := map[string]int{}
	for _, ev := range lines {
		in := LinInput{Thread: ev.Thread, Holder: ev.Holder, Msg: ev.Msg, Req: ev.Req}
		out := LinOutput{Status: LinOK}
		switch ev.Action {
		case core.ActionClaim:
			in.Kind = LinClaim
		case core.ActionRenew:
			in.Kind = LinRenew
		case core.ActionRelease:
			in.Kind = LinRelease
		case core.ActionRunStart:
			in.Kind, out.Run = LinRunStart, ev.Run
		case core.ActionStartFenced:
			in.Kind, out.Status = LinRunStart, LinBusy
		case core.ActionReply:
			in.Kind = LinReply
		case core.ActionReplyFenced:
			in.Kind, out.Status = LinReply, LinBusy
		case core.ActionSteerRecord:
			in.Kind, in.Run = LinSteerRecord, ev.Run
		case core.ActionSteerRefused:
			in.Kind, in.Run, out.Status = LinSteerRecord, ev.Run, LinAbandoned
		default:
			continue
		}
		id, ok := clients[ev.Proc]
		if !ok {
			id = len(clients)
			clients[ev.Proc] = id
		}
		ops = append(ops, porcupine.Operation{ClientId: id, Input: in, Call: ev.Call, Output: out, Return: ev.Return})
	}
	return ops
}

// The outcomes of CheckLinearizable other than porcupine.Ok.
var (
	// ErrNotLinearizable: porcupine found no linearization (Illegal).
	ErrNotLinearizable = errors.New("history is not linearizable")
	// ErrLinearizabilityUnknown: porcupine ran out of time (Unknown). It
	// is not a pass.
	ErrLinearizabilityUnknown = errors.New("linearizability unknown: the check timed out")
)

// CheckLinearizable checks the operations against LeaseModel with porcupine
// within timeout (0 or less: none). It returns porcupine.Ok and nil, or
// porcupine.Illegal and an error wrapping ErrNotLinearizable, or
// porcupine.Unknown and an error wrapping ErrLinearizabilityUnknown; or,
// checking nothing, porcupine.Unknown and an error naming the first
// operation that is not the model's (an Input not a LinInput, an Output
// not a LinOutput, a Return before its Call). An empty history is Ok. On
// Illegal, when htmlPath is not empty, it writes porcupine's visualisation
// of the history there (a self-contained HTML file), making its directory
// if it is missing; on any other outcome it writes nothing.
func CheckLinearizable(ops []porcupine.Operation, timeout time.Duration, htmlPath string) (porcupine.CheckResult, error) {
	return checkLinearizable(LeaseModel(), ops, timeout, htmlPath)
}

// linOperations returns an error naming the first operation that is not
// one of the model's: its Input not a LinInput, its Output not a
// LinOutput, or a return before its call.
func linOperations(ops []porcupine.Operation) error {
	for i, op := range ops {
		_, in := op.Input.(LinInput)
		_, out := op.Output.(LinOutput)
		switch {
		case !in || !out:
			return fmt.Errorf("tracecheck: operation %d: input %T and output %T, not LinInput and LinOutput", i, op.Input, op.Output)
		case op.Return < op.Call:
			return fmt.Errorf("tracecheck: operation %d (%v) returns at %d, before its call at %d", i, op.Input.(LinInput).Kind, op.Return, op.Call)
		}
	}
	return nil
}

// checkLinearizable is CheckLinearizable against any model, so that a test
// can make the outcome Unknown deterministically with a model that cannot
// finish in time.
func checkLinearizable(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration, htmlPath string) (porcupine.CheckResult, error) {
	if err := linOperations(ops); err != nil {
		return porcupine.Unknown, err
	}
	res := porcupine.CheckOperationsTimeout(model, ops, timeout)
	switch res {
	case porcupine.Ok:
		return res, nil
	case porcupine.Unknown:
		return res, fmt.Errorf("%w (%d operations, timeout %v)", ErrLinearizabilityUnknown, len(ops), timeout)
	}
	if htmlPath == "" {
		return res, fmt.Errorf("%w (%d operations)", ErrNotLinearizable, len(ops))
	}
	// Again, verbose, for the visualisation of the partial linearizations.
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	err := os.MkdirAll(filepath.Dir(htmlPath), 0o755)
	if err == nil {
		err = porcupine.VisualizePath(model, info, htmlPath)
	}
	if err != nil {
		return res, fmt.Errorf("%w (%d operations); writing its visualisation: %v", ErrNotLinearizable, len(ops), err)
	}
	return res, fmt.Errorf("%w (%d operations); visualisation in %s", ErrNotLinearizable, len(ops), htmlPath)
}
