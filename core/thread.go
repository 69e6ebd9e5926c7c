package core

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ThreadID names a thread.
type ThreadID string

// Holder names one claim on a thread. It is made fresh for every claim, so
// two claims by the same process have different holders.
type Holder string

// Seq numbers a thread's messages from 1 in the order they were posted.
// The taken cursor is a Seq: every message at or below it is consumed.
type Seq int64

// RunID numbers a thread's runs from 1.
type RunID int64

// RequestID numbers a thread's requests from 1.
type RequestID int64

// Claim is one holder's claim on one thread, made by Workspace.Claim. The
// runner makes a claim per turn and hands it to the run it starts. A claim
// knows its round: only the Workspace that made it accepts it, and only
// until its round ends; a Claim built by hand is refused.
type Claim struct {
	Thread ThreadID
	Holder Holder

	r *round
}

func (c Claim) validate() error {
	if err := checkID("thread id", string(c.Thread)); err != nil {
		return err
	}
	return checkID("holder", string(c.Holder))
}

// MaxIDBytes is the longest thread id, holder or process name
// (WithProcess) the Workspace takes. A trace line names a thread, a
// process and up to two holders: ids this long, even
// with every byte escaped as JSON escapes it (six bytes at worst), keep
// the line well under the longest line tracecheck reads (64 KiB), so the
// trace writer never writes a line its reader refuses.
const MaxIDBytes = 1024

// nilContext is the error of a Workspace call given a nil context: it is
// refused before the call reserves anything (a nil context reached
// storage, whose panic left a Claim's round reserved and a round's call in
// flight, so that the workspace refused the thread's later claims and
// Crash waited for ever).
func nilContext(call string) error {
	return fmt.Errorf("%w: %s given a nil context", ErrInvalidArgument, call)
}

// checkID refuses an empty id, one longer than MaxIDBytes, and one
// CheckText refuses, with an error wrapping ErrInvalidArgument.
func checkID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidArgument, what)
	case len(id) > MaxIDBytes:
		return fmt.Errorf("%w: %s of %d bytes, longer than %d", ErrInvalidArgument, what, len(id), MaxIDBytes)
	}
	return CheckText(what, id)
}

// CheckText refuses a string that storage could not keep as it is: one
// with a NUL byte or that is not valid UTF-8, which PostgreSQL's text
// refuses. Both storages refuse it, with this error (it wraps
// ErrInvalidArgument), and so does the Workspace before storage sees it.
func CheckText(what, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s holds a NUL byte", ErrInvalidArgument, what)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgument, what)
	}
	return nil
}

// Message is one message posted to a thread.
type Message struct {
	Seq      Seq
	Text     string
	PostedAt time.Time // the poster's clock
}

// RunState is where a run is in its life.
type RunState string

// The states of a run. Only an active run can ask, end or be abandoned.
const (
	StateActive    RunState = "active"
	StateEnded     RunState = "ended"
	StateAbandoned RunState = "abandoned"
)

// Run is one execution of the agent on a prompt, started under a claim.
type Run struct {
	ID        RunID
	Holder    Holder // the claim it started under
	Prompt    Seq
	State     RunState
	StartedAt time.Time
	// Output is what the run answered the person, recorded with its end
	// (runner.Session.Output); "" when it wrote none. An abandoned run's
	// end is refused, so it has none.
	Output string
	// Steering lists the messages the run was given while it worked and
	// recorded (SteerRecord), oldest first; each is consumed by it. Its
	// array is shared with the thread's other copies: read it, never
	// change it in place.
	Steering []Seq
}

// RequestState says whether a request has its answer.
type RequestState string

// The states of a request.
const (
	RequestOpen     RequestState = "open"
	RequestAnswered RequestState = "answered"
)

// Request is a question a run asked; a later message answers it.
type Request struct {
	ID       RequestID
	Run      RunID
	Question string
	State    RequestState
	Answer   Seq // the answering message, once answered
}

// Thread is a thread's state, the fold of its events plus its taken cursor
// and its version. Storage returns it inside a transaction.
//
// Its runs are read with Run, LastRun, ActiveRuns and Runs. They are held
// so that Apply never changes a run another Thread value can see: values
// copied one from another (a storage's cached state and a transaction's)
// share their runs, and ending a run costs the same on a thread of ten
// runs as on one of a hundred thousand.
type Thread struct {
	ID ThreadID
	// Version counts the thread's committed writes (posts, lease writes,
	// run events). It orders the thread's trace lines.
	Version  uint64
	Taken    Seq
	Messages []Message
	Requests []Request

	runs runs
}

// runs is a thread's runs. settled holds runs 1 to len(settled), every
// one ended or abandoned before a later run started: they change no more
// (but for a RunOutput written for one of them after that, which copies
// settled). Values share settled's array; writing at index len of it is
// safe for the one value that wins grow, the append right shared by
// every value with that array and length (a value that loses it copies
// the array first). live holds the later runs; it is never changed in
// place, only replaced, and stays short: the run in progress, the last
// one ended, and those a lapsed holder left active until they are
// abandoned.
type runs struct {
	settled []Run
	grow    *atomic.Bool // settled's append right; nil: none, copy first
	live    []Run
}

// at returns a pointer to run id, which the caller must not change; nil
// when there is no such run.
func (rs *runs) at(id RunID) *Run {
	i := int(id) - 1
	switch {
	case i < 0:
		return nil
	case i < len(rs.settled):
		return &rs.settled[i]
	case i-len(rs.settled) < len(rs.live):
		return &rs.live[i-len(rs.settled)]
	}
	return nil
}

// own returns run id, which exists, in an array of this value's own, for
// the caller to change: live is copied (a few runs), or, for a run
// already settled, settled is (see runs).
func (rs *runs) own(id RunID) *Run {
	i := int(id) - 1
	if i >= len(rs.settled) {
		rs.live = append([]Run(nil), rs.live...)
		return &rs.live[i-len(rs.settled)]
	}
	rs.settled, rs.grow = append(make([]Run, 0, cap(rs.settled)), rs.settled...), new(atomic.Bool)
	return &rs.settled[i]
}

// start appends a new run, settling first the leading runs of live that
// are over: a RunOutput for them is no longer expected.
func (rs *runs) start(r Run) {
	k := 0
	for k < len(rs.live) && rs.live[k].State != StateActive {
		k++
	}
	if k > 0 {
		rs.settle(rs.live[:k])
	}
	live := make([]Run, len(rs.live)-k, len(rs.live)-k+1)
	copy(live, rs.live[k:])
	rs.live = append(live, r)
}

// settle appends done to settled: in place when the array has room and
// this value wins its append right, into a new array of twice the size
// otherwise (amortised O(1) a run along a thread's history).
func (rs *runs) settle(done []Run) {
	n := len(rs.settled)
	if n+len(done) > cap(rs.settled) || rs.grow == nil || !rs.grow.CompareAndSwap(false, true) {
		s := make([]Run, n, max(2*(n+len(done)), 8))
		copy(s, rs.settled)
		rs.settled = s
	}
	rs.settled = append(rs.settled, done...)
	rs.grow = new(atomic.Bool)
}

// NewThread returns an empty thread.
func NewThread(id ThreadID) *Thread { return &Thread{ID: id} }

// Last is the seq of the newest message, 0 when there is none.
func (t *Thread) Last() Seq { return Seq(len(t.Messages)) }

// Unconsumed reports whether a posted message is not yet taken.
func (t *Thread) Unconsumed() bool { return t.Taken < t.Last() }

// Run returns the run with that id.
func (t *Thread) Run(id RunID) (Run, bool) {
	r := t.runs.at(id)
	if r == nil {
		return Run{}, false
	}
	return *r, true
}

// LastRun is the id of the newest run, 0 when there is none.
func (t *Thread) LastRun() RunID { return RunID(len(t.runs.settled) + len(t.runs.live)) }

// Runs returns a new slice of the thread's runs, run 1 first (run id at
// index id-1). It copies them all: Run, LastRun and ActiveRuns do not.
func (t *Thread) Runs() []Run {
	out := make([]Run, 0, len(t.runs.settled)+len(t.runs.live))
	return append(append(out, t.runs.settled...), t.runs.live...)
}

// request returns the request with that id.
func (t *Thread) request(id RequestID) (Request, bool) {
	if id < 1 || int(id) > len(t.Requests) {
		return Request{}, false
	}
	return t.Requests[id-1], true
}

// ActiveRuns returns the thread's active runs, oldest first. (Every
// active run is live: it costs a few runs, not the thread's history.)
func (t *Thread) ActiveRuns() []Run {
	var out []Run
	for _, r := range t.runs.live {
		if r.State == StateActive {
			out = append(out, r)
		}
	}
	return out
}

// openRequests returns the thread's unanswered requests, oldest first.
func (t *Thread) openRequests() []Request {
	var out []Request
	for _, r := range t.Requests {
		if r.State == RequestOpen {
			out = append(out, r)
		}
	}
	return out
}

// Consumed counts how many times each message was consumed, as a run's
// prompt, as a run's recorded steering or as a request's answer. Every
// count is 1 while I1_ConsumedAtMostOnce holds.
func (t *Thread) Consumed() map[Seq]int {
	n := map[Seq]int{}
	for _, rs := range [][]Run{t.runs.settled, t.runs.live} {
		for _, r := range rs {
			n[r.Prompt]++
			for _, m := range r.Steering {
				n[m]++
			}
		}
	}
	for _, q := range t.Requests {
		if q.State == RequestAnswered {
			n[q.Answer]++
		}
	}
	return n
}

// Clone returns a copy that shares nothing t's Apply or a change to its
// fields could reach: its messages and requests are copied; its runs,
// which Apply never changes in place, are shared (see Thread).
func (t *Thread) Clone() *Thread {
	c := *t
	c.Messages = append([]Message(nil), t.Messages...)
	c.Requests = append([]Request(nil), t.Requests...)
	return &c
}

// Check reports whether ev can be applied to t: ids are the next ones,
// referenced runs, requests and messages exist and are in a state that
// allows it. It returns the refusal, wrapped, or nil.
func (t *Thread) Check(ev Event) error {
	switch ev.Kind {
	case MessagePosted:
		if ev.Message != t.Last()+1 {
			return fmt.Errorf("%w: message %d posted after %d", ErrInvalidArgument, ev.Message, t.Last())
		}
	case RunStarted:
		if ev.Run != t.LastRun()+1 {
			return fmt.Errorf("%w: run %d is not the next run", ErrInvalidArgument, ev.Run)
		}
		if ev.Message < 1 || ev.Message > t.Last() {
			return fmt.Errorf("%w: prompt %d of thread %q", ErrUnknownMessage, ev.Message, t.ID)
		}
		if ev.Holder == "" {
			return fmt.Errorf("%w: run started with no holder", ErrInvalidArgument)
		}
	case Asked:
		if err := t.checkActive(ev.Run); err != nil {
			return err
		}
		if ev.Request != RequestID(len(t.Requests)+1) {
			return fmt.Errorf("%w: request %d is not the next request", ErrInvalidArgument, ev.Request)
		}
	case Answered:
		q, ok := t.request(ev.Request)
		if !ok {
			return fmt.Errorf("%w: request %d of thread %q", ErrUnknownRequest, ev.Request, t.ID)
		}
		if q.State != RequestOpen {
			return fmt.Errorf("%w: request %d of thread %q", ErrAlreadyAnswered, ev.Request, t.ID)
		}
		if ev.Message < 1 || ev.Message > t.Last() {
			return fmt.Errorf("%w: answer %d of thread %q", ErrUnknownMessage, ev.Message, t.ID)
		}
	case RunEnded, RunAbandoned:
		return t.checkActive(ev.Run)
	case RunSteered:
		if err := t.checkActive(ev.Run); err != nil {
			return err
		}
		if ev.Message < 1 || ev.Message > t.Last() {
			return fmt.Errorf("%w: steering %d of thread %q", ErrUnknownMessage, ev.Message, t.ID)
		}
	case RunOutput:
		// Storage checks only that the run exists and has ended or been
		// abandoned; the Workspace writes it after the run's end, in the
		// same transaction, and never for an abandoned run.
		r, ok := t.Run(ev.Run)
		switch {
		case !ok:
			return fmt.Errorf("%w: run %d of thread %q", ErrUnknownRun, ev.Run, t.ID)
		case r.State == StateActive:
			return fmt.Errorf("%w: output of run %d of thread %q before its end", ErrOutOfOrder, ev.Run, t.ID)
		}
	case RunRefused:
		if ev.Message < 1 || ev.Message > t.Last() {
			return fmt.Errorf("%w: refused prompt %d of thread %q", ErrUnknownMessage, ev.Message, t.ID)
		}
		if ev.Holder == "" {
			return fmt.Errorf("%w: a refusal with no holder", ErrInvalidArgument)
		}
		if ev.Version < t.Version {
			return fmt.Errorf("%w: a refusal at version %d of a thread at %d", ErrInvalidArgument, ev.Version, t.Version)
		}
	default:
		return fmt.Errorf("%w: event kind %q", ErrInvalidArgument, ev.Kind)
	}
	return nil
}

func (t *Thread) checkActive(id RunID) error {
	r, ok := t.Run(id)
	switch {
	case !ok:
		return fmt.Errorf("%w: run %d of thread %q", ErrUnknownRun, id, t.ID)
	case r.State == StateAbandoned:
		return fmt.Errorf("%w: run %d of thread %q", ErrRunAbandoned, id, t.ID)
	case r.State != StateActive:
		return fmt.Errorf("%w: run %d of thread %q is %s", ErrRunNotActive, id, t.ID, r.State)
	}
	return nil
}

// Apply folds ev into t and raises t.Version to ev.Version, never lowering
// it: the version counts committed writes, and a RunRefused notice bumps
// none (it carries the thread's version as it found it). The caller
// has checked ev with Check; an event that fails it is a broken invariant
// of the storage and panics.
func (t *Thread) Apply(ev Event) {
	if err := t.Check(ev); err != nil {
		panic(fmt.Sprintf("core: applying an event that fails its check: %v", err))
	}
	switch ev.Kind {
	case MessagePosted:
		t.Messages = append(t.Messages, Message{Seq: ev.Message, Text: ev.Text, PostedAt: ev.At})
	case RunStarted:
		t.runs.start(Run{ID: ev.Run, Holder: ev.Holder, Prompt: ev.Message, State: StateActive, StartedAt: ev.At})
	case Asked:
		t.Requests = append(t.Requests, Request{ID: ev.Request, Run: ev.Run, Question: ev.Text, State: RequestOpen})
	case Answered:
		q := &t.Requests[ev.Request-1]
		q.State, q.Answer = RequestAnswered, ev.Message
	case RunEnded:
		t.runs.own(ev.Run).State = StateEnded
	case RunAbandoned:
		t.runs.own(ev.Run).State = StateAbandoned
	case RunSteered:
		// a new array: other values share the old one
		r := t.runs.own(ev.Run)
		r.Steering = append(r.Steering[:len(r.Steering):len(r.Steering)], ev.Message)
	case RunOutput:
		t.runs.own(ev.Run).Output = ev.Text
	}
	if ev.Version > t.Version {
		t.Version = ev.Version
	}
}
