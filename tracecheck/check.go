package tracecheck

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// The kinds of Violation; errors.Is(err, ErrGuard) and the others tell them
// apart.
var (
	// ErrGuard: the line names an action whose guard does not hold in the
	// spec's state: no spec action explains it.
	ErrGuard = errors.New("guard does not hold")
	// ErrLineValue: the action's guard holds, but a value on the line
	// (msg, req, run, taken, lease, holder, kind, read) is not the one the
	// action gives in the spec's state.
	ErrLineValue = errors.New("line disagrees with the spec's state")
	// ErrOrder: the line's tick does not follow: a write's tick must be
	// the previous write's plus one, a read's the current version.
	ErrOrder = errors.New("line out of order")
	// ErrInvariant: the action was taken and an invariant no longer holds.
	ErrInvariant = errors.New("invariant violated")
)

// Violation is the first line of a thread that no action of the spec
// explains, or after which an invariant fails.
type Violation struct {
	File   string          // the trace's name, as given by WithFile
	Line   int             // the line's 1-based number in the file
	Event  core.TraceEvent // the line
	Action core.Action     // the action tried: the line's
	// Lapse is true when a Lapse was inferred just before the line: the
	// Claim took a lease another holder had not released.
	Lapse bool
	// Kind is ErrGuard, ErrLineValue, ErrOrder or ErrInvariant; Unwrap
	// returns it.
	Kind error
	// Rule is what failed, in the spec's words: a guard's conjunct (such
	// as `Fenced => HasLease(p)`), an invariant's name (such as
	// I1_ConsumedAtMostOnce), "tick", or the line's field ("line.taken").
	Rule string
	// Failed lists every guard conjunct, or every invariant, that fails
	// on this line, Rule first.
	Failed []string
	Detail string // what the line says against what the spec's state gives
	// State is a compact dump of the spec's state of the thread: before
	// the line for a guard, value or order failure; after it for an
	// invariant.
	State string
}

func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: %s", v.File, v.Line, v.Action)
	if v.Event.Proc != "" {
		fmt.Fprintf(&b, " by %s", v.Event.Proc)
	}
	switch v.Kind {
	case ErrGuard:
		fmt.Fprintf(&b, ": guard %s fails", v.Rule)
	case ErrInvariant:
		fmt.Fprintf(&b, ": invariant %s violated", v.Rule)
	case ErrOrder:
		fmt.Fprintf(&b, ": out of order (%s)", v.Rule)
	default:
		fmt.Fprintf(&b, ": %s disagrees with the spec", v.Rule)
	}
	if len(v.Failed) > 1 {
		fmt.Fprintf(&b, " (also %s)", strings.Join(v.Failed[1:], ", "))
	}
	if v.Detail != "" {
		fmt.Fprintf(&b, ": %s", v.Detail)
	}
	if v.Lapse {
		b.WriteString(" [after an inferred Lapse]")
	}
	fmt.Fprintf(&b, "\n\tline:  %s\n\tstate: %s", strings.TrimSuffix(string(appendLine(nil, &v.Event)), "\n"), v.State)
	return b.String()
}

// Unwrap returns the violation's kind.
func (v *Violation) Unwrap() error { return v.Kind }

// Stats counts what a check saw.
type Stats struct {
	Lines          int                 // lines checked (the failing one included)
	PerAction      map[core.Action]int // lines per action
	LapsesInferred int                 // Lapse steps inferred before a Claim
	LiveLapses     int                 // of those, lapses under a holder some process still worked under (fine: skew, stalls)
	// EarlyClaims counts Claims over a lease not yet expired by the
	// claimant's own clock (their timing fields say so). It must be 0:
	// each is a violation.
	EarlyClaims     int
	TimedLines      int // Claim and Renew lines whose timing was checked
	InvariantChecks int // invariant evaluations: four per line applied
	Threads         int // threads seen
}

// Option configures a Checker. A nil Option is ignored; when an option
// is given twice, the last one given holds.
type Option func(*Checker)

// WithFile names the trace in violations. Default "trace".
func WithFile(name string) Option { return func(c *Checker) { c.file = name } }

// WithFences sets the fences the spec's guards require (its constants
// FenceStart, FenceReply and FenceAbandon). Default core.AllFences(), as
// in spec/ThreadClaimLapse.cfg; the unfenced cfgs switch some off. The
// guards of RunStart's and Reply's fences are named with the spec's
// older single constant for both: `Fenced => HasLease(p)`, `Fenced`.
func WithFences(f core.Fences) Option { return func(c *Checker) { c.fences = f } }

// Checker follows the spec's actions line by line. Each thread is followed
// on its own, from the spec's Init, from its first line: a thread's lines
// are checked in the order Step is given them (the order rule: it never
// reorders); threads may interleave. It is not safe for concurrent use.
// The zero Checker is NewChecker(): a new one follows each trace (one fed
// the lines of a second file goes on from the first's states). Step's ev
// must not be nil.
type Checker struct {
	file      string
	fences    core.Fences
	threads   map[core.ThreadID]int // index in list
	list      []*threadState        // the threads by first appearance
	recent    [4]int32              // threads seen lately: 1 + their index in list, 0 for none
	nextSlot  int                   // the slot of recent a thread not in it takes
	perAction [numActions]int
	stats     Stats
	failed    []string // scratch for guard conjuncts
	first     *Violation
	seed      maphash.Seed // the threads' holder sets hash with it
}

// NewChecker returns a Checker with no thread seen yet.
func NewChecker(opts ...Option) *Checker {
	c := &Checker{file: "trace", fences: core.AllFences(), threads: map[core.ThreadID]int{}, seed: maphash.MakeSeed()}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// Check checks a whole trace, each thread's lines in the order given (the
// order rule: Check never reorders; Sort first lines recorded as
// concurrent processes called their Tracer). It returns the Stats and, at
// the first line no spec action explains, a *Violation; the check stops
// there. Line numbers are positions in lines plus one, as Read gives.
// An empty trace (nil) is accepted: there is no line to reject; Reader and
// CheckReader refuse one (ErrEmpty). Lines not read by a Reader are not
// held to its input contract's form: an empty thread is one more thread.
func Check(lines []core.TraceEvent, opts ...Option) (Stats, error) {
	c := NewChecker(opts...)
	for i := range lines {
		if err := c.Step(i+1, &lines[i]); err != nil {
			break
		}
	}
	return c.Stats(), c.Err()
}

// CheckReader reads a trace from r with a Reader, naming it name, and
// checks each line as it is read: memory does not grow with the trace's
// length. It returns the Reader's *LineError for input that is not a
// well-formed trace (an empty one included), and otherwise what Check
// returns. name names the trace in both; a WithFile among opts renames it
// in violations only.
func CheckReader(r io.Reader, name string, opts ...Option) (Stats, error) {
	c := NewChecker(append([]Option{WithFile(name)}, opts...)...)
	rd := NewReader(r, name)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return c.Stats(), nil
		}
		if err != nil {
			return c.Stats(), err
		}
		if err := c.Step(rd.Line(), ev); err != nil {
			return c.Stats(), err
		}
	}
}

// CheckFile checks the trace in the file at path (CheckReader). A path
// that cannot be read (missing, a directory) is a *LineError at line 0.
func CheckFile(path string, opts ...Option) (Stats, error) {
	f, err := openTrace(path)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	return CheckReader(f, path, opts...)
}

// Stats returns what the checker has seen so far.
func (c *Checker) Stats() Stats {
	s := c.stats
	s.PerAction = map[core.Action]int{}
	for i, a := range actionNames {
		if n := c.perAction[i]; n > 0 {
			s.PerAction[a] = n
		}
	}
	s.Threads = len(c.threads)
	return s
}

// Err returns the violation at the lowest line number among the threads'
// first violations so far, or nil.
func (c *Checker) Err() error {
	if c.first == nil {
		return nil
	}
	return c.first
}

// thread returns the thread's state, from the few threads seen lately
// when it is one of them (lines of a few threads interleave), else from
// the map. recent holds indexes, not pointers: a hit writes nothing the
// garbage collector must see.
func (c *Checker) thread(id core.ThreadID) *threadState {
	for _, k := range c.recent {
		if k > 0 && sameString(string(c.list[k-1].id), string(id)) {
			return c.list[k-1]
		}
	}
	k, ok := c.threads[id]
	if !ok {
		k = len(c.list)
		c.threads[id] = k
		c.list = append(c.list, newThreadState(id, c.seed))
	}
	c.recent[c.nextSlot] = int32(k + 1)
	c.nextSlot = (c.nextSlot + 1) % len(c.recent)
	return c.list[k]
}

// Step checks the line numbered n (1-based) and, if the spec explains it,
// takes it. It returns a *Violation when it does not; that thread is then
// stopped, and Step returns the same violation for its later lines.
func (c *Checker) Step(n int, ev *core.TraceEvent) error {
	if c.threads == nil { // the zero Checker
		*c = *NewChecker()
	}
	t := c.thread(ev.Thread)
	if t.violation != nil {
		return t.violation
	}
	c.stats.Lines++
	ai := actionIndex(ev.Action)
	if ai >= 0 {
		c.perAction[ai]++
	}
	if v := c.step(t, n, ev, ai); v != nil {
		v.File, v.Line, v.Event, v.Action = c.file, n, *ev, ev.Action
		t.violation = v
		if c.first == nil || v.Line < c.first.Line {
			c.first = v
		}
		return v
	}
	return nil
}

// The actions' indexes: their places in core.Actions(), the spec's order.
const (
	aPost = iota
	aClaim
	aRenew
	aLapse
	aRelease
	aAbandon
	aAbandonFenced
	aPlan
	aRunStart
	aStartFenced
	aReply
	aReplyFenced
	aAsk
	aRunEnd
	aEndRefused
	aSteer
	aSteerRecord
	aSteerRefused
	aCrash
	numActions
)

// actionIndex is the action's place in core.Actions(), or -1. Step
// computes it once a line: the rest of the check switches on it.
func actionIndex(a core.Action) int {
	if len(a) < 2 {
		return -1
	}
	i := actionSlots[actionKey(a[0], a[len(a)-2], len(a))]
	if i < 0 || actionNames[i] != a {
		return -1
	}
	return int(i)
}

// actionNames are the actions by index: core.Actions(), in its order
// (TestActionIndexIsCoreOrder holds them to it). An action core's table
// adds is no action here, and its lines are malformed, until it has its
// index, its name here, its case in step and its method
// (core/ACTIONS.md).
var actionNames = [numActions]core.Action{
	aPost: core.ActionPost, aClaim: core.ActionClaim, aRenew: core.ActionRenew, aLapse: core.ActionLapse,
	aRelease: core.ActionRelease, aAbandon: core.ActionAbandon, aAbandonFenced: core.ActionAbandonFenced,
	aPlan: core.ActionPlan, aRunStart: core.ActionRunStart, aStartFenced: core.ActionStartFenced,
	aReply: core.ActionReply, aReplyFenced: core.ActionReplyFenced, aAsk: core.ActionAsk,
	aRunEnd: core.ActionRunEnd, aEndRefused: core.ActionEndRefused, aSteer: core.ActionSteer,
	aSteerRecord: core.ActionSteerRecord, aSteerRefused: core.ActionSteerRefused, aCrash: core.ActionCrash,
}

// actionKey hashes an action's name (of two bytes or more) by its first
// byte, its last byte but one, and its length: the nineteen names take
// nineteen different slots of actionSlots (a perfect hash), so that
// finding a name's index costs one string comparison. (The last byte
// does not do: StartFenced and SteerRecord share their first and last
// bytes and their length.) A name core adds that collides stops the
// package at start.
func actionKey(first, penult byte, n int) int { return (n + int(first) + 2*int(penult)) & 63 }

// actionSlots maps an actionKey to the index of the one action that has
// it, or -1.
var actionSlots = func() (slots [64]int8) {
	for k := range slots {
		slots[k] = -1
	}
	for i, a := range actionNames {
		k := actionKey(a[0], a[len(a)-2], len(a))
		if slots[k] >= 0 {
			panic(fmt.Sprintf("tracecheck: actions %s and %s share a slot: change actionKey", actionNames[slots[k]], a))
		}
		slots[k] = int8(i)
	}
	return slots
}()

// Process counters, as the spec's pc.
const (
	pcIdle uint8 = iota
	pcClaimed
	pcPlanned
	pcRunning
	pcSteered
)

var pcNames = [...]string{core.PCIdle, core.PCClaimed, core.PCPlanned, core.PCRunning, core.PCSteered}

// Plan kinds, as the spec's plan[p].kind.
const (
	planNone uint8 = iota
	planRun
	planReply
	planSteer
)

var planNames = [...]string{core.PlanKindNone, core.PlanKindRun, core.PlanKindReply, core.PlanKindSteer}

// Run states, as the spec's runs[r].state.
const (
	runActive uint8 = iota
	runEnded
	runAbandoned
)

var runStateNames = [...]string{string(core.StateActive), string(core.StateEnded), string(core.StateAbandoned)}

type specRun struct {
	holder int
	prompt int64
	state  uint8
}

type specReq struct {
	run      int64
	answered bool
	answer   int64
}

// steerPair is an element <<run, msg>> of the ghost steered.
type steerPair struct{ run, msg int64 }

type specProc struct {
	name     string
	pc       uint8
	hold     int
	planKind uint8
	planMsg  int64
	planReq  int64
	run      int64
}

// threadState is the spec's state of one thread, plus what maps the
// trace's values onto it. Everything grows by at most one element a line,
// and only on lines that add a message, a run, a request or a holder.
type threadState struct {
	id        core.ThreadID
	version   uint64 // the tick of the last write
	lastWrite int    // its line

	msgs, taken int64
	// lease.holder: an abstract holder, 0 for none. lease.expired is not
	// kept: a Lapse is possible whenever the lease has a holder, and the
	// checker places one just before the Claim that needs it.
	lease int
	// expires is the lease's expiry as its holder's last Claim or Renew
	// stamped it (Unix nanoseconds), 0 when that line had no timing.
	expires      int64
	runs         []specRun
	active       int // Cardinality(ActiveRuns)
	reqs         []specReq
	firstOpen    int     // no request below this index is open
	consumed     []int32 // consumed[m], m from 1; index 0 unused
	overConsumed int     // messages with consumed[m] > 1
	liveAband    bool    // liveAbandoned
	// The ghosts given and steered: given[m] (index 0 unused), the number
	// of steered pairs of each message (steeredOf[m]), and the pairs
	// whose run is not abandoned (an abandoned run's pair stays in
	// steered for good and keeps SteeringException's second conjunct:
	// only steeredOf counts it). misgiven counts the messages with
	// given[m] # consumed[m] + steeredOf[m].
	given     []int32
	steeredOf []int32
	steered   []steerPair
	misgiven  int

	holders holderSet      // every holder in names, for Claim's freshness guard
	names   []core.Holder  // names[h] is abstract holder h's string; names[0] = ""
	procs   map[string]int // index in order, once there are more than 8; nil before
	order   []*specProc    // procs by first appearance, for dumps
	lastP   int            // 1 + the index in order of the process of the thread's last line

	lapses    int
	lastLapse int // line of the Claim the last inferred Lapse came before

	violation *Violation
}

func newThreadState(id core.ThreadID, seed maphash.Seed) *threadState {
	return &threadState{
		id: id, holders: holderSet{seed: seed}, names: []core.Holder{""},
		consumed: []int32{0}, given: []int32{0}, steeredOf: []int32{0},
	}
}

// sameString is a == b, telling most different names apart by their
// last bytes before comparing them whole: names that differ are mostly
// numbered alike (t1, t2; p1, p2), and comparing whole strings of the
// same length that are not the same string calls the runtime.
func sameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || a[len(a)-1] == b[len(b)-1]) && a == b
}

// holderSet is the set of the holders a thread has seen, for Claim's
// guard that a holder is fresh: an open-addressing table of the holders'
// hashes, each with the holder's abstract number (its index in the
// thread's names) to confirm a match. A Claim looks up and adds one
// holder; a Go map of the strings cost most of a Claim's check (hashing
// each string twice, growing by rehashing them), this costs a hash and a
// probe or two in a compact array of 16 bytes a holder.
type holderSet struct {
	seed  maphash.Seed
	slots []holderSlot // a power of two long, at most half full; nil when empty
	n     int
}

type holderSlot struct {
	hash uint64
	h    int // 0: an empty slot
}

func (s *holderSet) hash(name core.Holder) uint64 { return maphash.String(s.seed, string(name)) }

// has reports whether name, of the given hash, is in the set; names are
// the thread's holders by abstract number.
func (s *holderSet) has(hash uint64, name core.Holder, names []core.Holder) bool {
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := hash & mask; ; i = (i + 1) & mask {
		switch sl := s.slots[i]; {
		case sl.h == 0:
			return false
		case sl.hash == hash && names[sl.h] == name:
			return true
		}
	}
}

// add puts abstract holder h (h > 0), of the given hash, in the set.
func (s *holderSet) add(hash uint64, h int) {
	if 2*(s.n+1) > len(s.slots) {
		old := s.slots
		s.slots = make([]holderSlot, max(16, 2*len(old)))
		s.n = 0
		for _, sl := range old {
			if sl.h != 0 {
				s.add(sl.hash, sl.h)
			}
		}
	}
	mask := uint64(len(s.slots) - 1)
	i := hash & mask
	for s.slots[i].h != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = holderSlot{hash, h}
	s.n++
}

// proc returns the process's state. lastP is an index, not a pointer:
// setting it writes nothing the garbage collector must see.
func (t *threadState) proc(name string) *specProc {
	if k := t.lastP - 1; k >= 0 && sameString(t.order[k].name, name) {
		return t.order[k]
	}
	if len(t.order) <= 8 { // a few processes: comparing beats hashing
		for k, q := range t.order {
			if sameString(q.name, name) {
				t.lastP = k + 1
				return q
			}
		}
	} else if k, ok := t.procs[name]; ok {
		t.lastP = k + 1
		return t.order[k]
	}
	p := &specProc{name: name}
	if len(t.order) == 8 {
		// The map is kept from the ninth process on: a few are found by
		// comparing, and a thread's state is cheap to clone.
		t.procs = make(map[string]int, 16)
		for k, q := range t.order {
			t.procs[q.name] = k
		}
	}
	if t.procs != nil {
		t.procs[name] = len(t.order)
	}
	t.order = append(t.order, p)
	t.lastP = len(t.order)
	return p
}

// hasLease is the spec's HasLease(p).
func (t *threadState) hasLease(p *specProc) bool { return p.hold != 0 && t.lease == p.hold }

// oldestOpen returns Min(OpenReqs), or 0 when no request is open.
func (t *threadState) oldestOpen() int64 {
	for t.firstOpen < len(t.reqs) && t.reqs[t.firstOpen].answered {
		t.firstOpen++
	}
	if t.firstOpen < len(t.reqs) {
		return int64(t.firstOpen + 1)
	}
	return 0
}

// isRead says whether an action's line is a read: it carries the version
// it saw (the action table's LineRead). Release is either (see release).
func isRead(a core.Action) bool { return readAt(actionIndex(a)) }

// readAt is isRead by the action's index.
func readAt(ai int) bool { return ai >= 0 && lineRules[ai].line == core.LineRead }

// The values a line may carry besides tick, read, action, thread, proc
// and taken (every line has those): the action table's fields, and the
// timing this package's format adds to Claim and Renew. A field an action
// does not carry must be zero.
const (
	cHolder uint16 = 1 << iota
	cMsg
	cReq
	cRun
	cLease
	cKind
	cTiming   // now, ttl, expires: Claim and Renew
	cReplaced // replaced: Claim
	cOutput   // output: RunEnd
)

// lineRule is what the checker reads of an action's row in core's action
// table, by actionIndex.
type lineRule struct {
	line    core.LineKind
	carries uint16
}

// lineRules is derived once from core.ActionTable: constant data.
var lineRules = func() (rules [numActions]lineRule) {
	bits := []struct {
		f core.Field
		c uint16
	}{{core.FieldHolder, cHolder}, {core.FieldMsg, cMsg}, {core.FieldReq, cReq}, {core.FieldRun, cRun},
		{core.FieldLease, cLease}, {core.FieldKind, cKind}}
	for i, a := range actionNames {
		info, ok := core.Info(a)
		if !ok {
			panic(fmt.Sprintf("tracecheck: action %q is not in core's table", a))
		}
		rules[i].line = info.Line
		for _, b := range bits {
			if info.Carries.Has(b.f) {
				rules[i].carries |= b.c
			}
		}
	}
	rules[actionIndex(core.ActionClaim)].carries |= cTiming | cReplaced
	rules[actionIndex(core.ActionRenew)].carries |= cTiming
	rules[actionIndex(core.ActionRunEnd)].carries |= cOutput
	return rules
}()

// unexpected returns the first field the line has that its action (of
// index ai, a valid one) does not carry, with its value, or "".
func unexpected(ev *core.TraceEvent, ai int) (string, any) {
	has := lineRules[ai].carries
	switch {
	case has&cHolder == 0 && ev.Holder != "":
		return "line.holder", strconv.Quote(string(ev.Holder))
	case has&cMsg == 0 && ev.Msg != 0:
		return "line.msg", ev.Msg
	case has&cReq == 0 && ev.Req != 0:
		return "line.req", ev.Req
	case has&cRun == 0 && ev.Run != 0:
		return "line.run", ev.Run
	case has&cLease == 0 && ev.Lease != "":
		return "line.lease", strconv.Quote(string(ev.Lease))
	case has&cKind == 0 && ev.Kind != "":
		return "line.kind", strconv.Quote(ev.Kind)
	case has&cTiming == 0 && ev.Now != 0:
		return "line.now", ev.Now
	case has&cTiming == 0 && ev.TTL != 0:
		return "line.ttl", ev.TTL
	case has&cTiming == 0 && ev.Expires != 0:
		return "line.expires", ev.Expires
	case has&cReplaced == 0 && ev.Replaced != 0:
		return "line.replaced", ev.Replaced
	case has&cOutput == 0 && ev.Output:
		return "line.output", true
	}
	return "", nil
}

// guard collects the conjuncts of a guard that fail.
func (c *Checker) guard(ok bool, conjunct string) {
	if !ok {
		c.failed = append(c.failed, conjunct)
	}
}

// guardFailed returns the guard's violation when a conjunct failed.
func (c *Checker) guardFailed(t *threadState, detail func() string) *Violation {
	if len(c.failed) == 0 {
		return nil
	}
	return &Violation{Kind: ErrGuard, Rule: c.failed[0], Failed: slices.Clone(c.failed), Detail: detail(), State: t.dump()}
}

func valueViolation(t *threadState, field string, got, want any) *Violation {
	return &Violation{Kind: ErrLineValue, Rule: field, Failed: []string{field},
		Detail: fmt.Sprintf("line has %v, the spec gives %v", got, want), State: t.dump()}
}

func orderViolation(t *threadState, format string, args ...any) *Violation {
	return &Violation{Kind: ErrOrder, Rule: "tick", Failed: []string{"tick"}, Detail: fmt.Sprintf(format, args...), State: t.dump()}
}

// checkOrder checks the line's tick against the order rule (the package doc).
func (t *threadState) checkOrder(ev *core.TraceEvent) *Violation {
	switch {
	case !ev.Read && ev.Tick == t.version+1, ev.Read && ev.Tick == t.version:
		return nil
	}
	last := "before it"
	if t.lastWrite > 0 {
		last = fmt.Sprintf("(line %d)", t.lastWrite)
	}
	switch {
	case !ev.Read && ev.Tick <= t.version:
		return orderViolation(t, "a write's tick must be the previous write's plus one: line has %d, the last write %s has %d: this write is out of order (it belongs earlier) or replayed", ev.Tick, last, t.version)
	case !ev.Read:
		return orderViolation(t, "a write's tick must be the previous write's plus one: line has %d, the last write %s has %d: no write of tick %d before it", ev.Tick, last, t.version, t.version+1)
	case ev.Tick > t.version:
		return orderViolation(t, "a read's tick must be the version it saw, the last write's: line has %d, the last write %s has %d: the read runs ahead (no write of tick %d before it)", ev.Tick, last, t.version, ev.Tick)
	}
	return orderViolation(t, "a read's tick must be the version it saw, the last write's: line has %d, the last write %s has %d: the read is out of order (it belongs before that write)", ev.Tick, last, t.version)
}

// step checks one line of thread t: the order rule, the fields its action
// carries, and then the action itself, one method per action in the
// spec's order; then the invariants.
func (c *Checker) step(t *threadState, n int, ev *core.TraceEvent, ai int) *Violation {
	a := ev.Action
	if ai < 0 || ai == aLapse {
		return &Violation{Kind: ErrLineValue, Rule: "action", Failed: []string{"action"},
			Detail: fmt.Sprintf("%q is not an action a trace logs", a), State: t.dump()}
	}
	// A Release is a write or a read by whether the lease was p's; its
	// guard checks which.
	if ai != aRelease && ev.Read != readAt(ai) {
		return valueViolation(t, "line.read", ev.Read, readAt(ai))
	}
	if v := t.checkOrder(ev); v != nil {
		return v
	}
	if field, got := unexpected(ev, ai); field != "" {
		return valueViolation(t, field, got, fmt.Sprintf("none (%s does not carry %s)", a, strings.TrimPrefix(field, "line.")))
	}
	var p *specProc
	if ai != aPost {
		if ev.Proc == "" {
			return valueViolation(t, "line.proc", `""`, "a process name")
		}
		p = t.proc(ev.Proc)
	}
	c.failed = c.failed[:0]
	lapse := false
	var v *Violation
	switch ai {
	case aPost:
		v = c.post(t, ev)
	case aClaim:
		lapse, v = c.claim(t, n, p, ev)
	case aRenew:
		v = c.renew(t, p, ev)
	case aRelease:
		v = c.release(t, p, ev)
	case aAbandon:
		v = c.abandon(t, p, ev)
	case aAbandonFenced:
		v = c.abandonFenced(t, p, ev)
	case aPlan:
		v = c.plan(t, p, ev)
	case aRunStart:
		v = c.runStart(t, p, ev)
	case aStartFenced:
		v = c.startFenced(t, p, ev)
	case aReply:
		v = c.reply(t, p, ev)
	case aReplyFenced:
		v = c.replyFenced(t, p, ev)
	case aAsk:
		v = c.ask(t, p, ev)
	case aRunEnd:
		v = c.runEnd(t, p, ev)
	case aEndRefused:
		v = c.endRefused(t, p, ev)
	case aSteer:
		v = c.steer(t, p, ev)
	case aSteerRecord:
		v = c.steerRecord(t, p, ev)
	case aSteerRefused:
		v = c.steerRefused(t, p, ev)
	case aCrash:
		v = c.crash(t, p, ev)
	}
	if v != nil {
		v.Lapse = lapse
		return v
	}
	if !ev.Read {
		t.version, t.lastWrite = ev.Tick, n
	}
	return c.invariants(t, lapse)
}

// post: Post. No guard (MaxMsgs bounds the model only); msgs' = msgs + 1.
func (c *Checker) post(t *threadState, ev *core.TraceEvent) *Violation {
	if v := t.checkTaken(ev, t.taken); v != nil {
		return v
	}
	if int64(ev.Msg) != t.msgs+1 {
		return valueViolation(t, "line.msg", ev.Msg, t.msgs+1)
	}
	t.msgs++
	t.consumed = append(t.consumed, 0)
	t.given = append(t.given, 0)
	t.steeredOf = append(t.steeredOf, 0)
	return nil
}

// claim: Claim(p), after a Lapse the checker infers when the lease has a
// holder (lease.holder = 0 \/ lease.expired); with timing, the claimant's
// clock must have reached the lease's expiry.
func (c *Checker) claim(t *threadState, n int, p *specProc, ev *core.TraceEvent) (bool, *Violation) {
	c.guard(p.pc == pcIdle, `pc[p] = "idle"`)
	hash := t.holders.hash(ev.Holder)
	reused := t.holders.has(hash, ev.Holder, t.names)
	c.guard(ev.Holder != "" && !reused, `hold'[p] = nextHolder (a fresh holder)`)
	if v := c.guardFailed(t, func() string { return fmt.Sprintf("holder %q, %s", ev.Holder, p.describe(t)) }); v != nil {
		return false, v
	}
	if v := c.claimTiming(t, ev); v != nil {
		return false, v
	}
	lapse := false
	if t.lease != 0 {
		lapse = true
		t.lapses++
		t.lastLapse = n
		c.stats.LapsesInferred++
		for _, q := range t.order {
			if q.hold == t.lease {
				c.stats.LiveLapses++
				break
			}
		}
	}
	if ev.Lease != ev.Holder {
		return lapse, valueViolation(t, "line.lease", strconv.Quote(string(ev.Lease)), strconv.Quote(string(ev.Holder))+" (the new holder)")
	}
	if v := t.checkTaken(ev, t.taken); v != nil {
		return lapse, v
	}
	h := len(t.names)
	t.names = append(t.names, ev.Holder)
	t.holders.add(hash, h)
	t.lease, t.expires = h, ev.Expires
	p.hold, p.pc = h, pcClaimed
	return lapse, nil
}

// claimTiming checks a Claim's timing fields, when it has them.
func (c *Checker) claimTiming(t *threadState, ev *core.TraceEvent) *Violation {
	if v := c.stamp(t, ev); v != nil {
		return v
	}
	if ev.Now == 0 {
		return nil
	}
	if t.lease == 0 {
		if ev.Replaced != 0 {
			return valueViolation(t, "line.replaced", ev.Replaced, "none (the lease was free)")
		}
		return nil
	}
	if ev.Replaced == 0 {
		return valueViolation(t, "line.replaced", "none", fmt.Sprintf("the expiry of %s's lease, which the Claim took", t.holderName(t.lease)))
	}
	if t.expires != 0 && ev.Replaced != t.expires {
		return valueViolation(t, "line.replaced", ev.Replaced, fmt.Sprintf("%d (the expiry %s's last Claim or Renew stamped)", t.expires, t.holderName(t.lease)))
	}
	if ev.Now < ev.Replaced {
		c.stats.EarlyClaims++
		return &Violation{Kind: ErrGuard, Rule: "lease.expired by the claimant's clock", Failed: []string{"lease.expired by the claimant's clock"},
			Detail: fmt.Sprintf("the Claim took %s's lease at now %d, %v before its expiry %d: storage let a live lease be taken",
				t.holderName(t.lease), ev.Now, time.Duration(ev.Replaced-ev.Now), ev.Replaced), State: t.dump()}
	}
	return nil
}

// stamp checks the timing a Claim or Renew line carries: all of now, ttl
// and expires or none; ttl > 0; expires = now + ttl.
func (c *Checker) stamp(t *threadState, ev *core.TraceEvent) *Violation {
	if ev.Now == 0 && ev.TTL == 0 && ev.Expires == 0 {
		if ev.Replaced != 0 {
			return valueViolation(t, "line.now", "none", "a clock reading (replaced needs now, ttl and expires)")
		}
		return nil
	}
	c.stats.TimedLines++
	switch {
	case ev.Now == 0:
		return valueViolation(t, "line.now", "none", "a clock reading (ttl and expires need it)")
	case ev.TTL <= 0:
		return valueViolation(t, "line.ttl", ev.TTL, "a positive ttl")
	case ev.Expires != ev.Now+ev.TTL || ev.Now+ev.TTL < ev.Now:
		return valueViolation(t, "line.expires", ev.Expires, fmt.Sprintf("now + ttl = %d", ev.Now+ev.TTL))
	}
	return nil
}

// renew: Renew(p).
func (c *Checker) renew(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	c.guard(p.pc != pcIdle, `pc[p] # "idle"`)
	c.guard(t.hasLease(p), `HasLease(p)`)
	if v := c.guardFailed(t, func() string { return t.leaseDetail(p) }); v != nil {
		return v
	}
	if v := c.stamp(t, ev); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, t.hold(p), t.taken); v != nil {
		return v
	}
	t.expires = ev.Expires
	return nil
}

// release: Release(p). It writes (clears the lease) exactly when the lease
// is p's, and is a read otherwise, as core logs it.
func (c *Checker) release(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	c.guard(p.pc == pcClaimed, `pc[p] = "claimed"`)
	if ev.Read {
		c.guard(!t.hasLease(p), `~HasLease(p) (a Release that writes nothing)`)
	} else {
		c.guard(t.hasLease(p), `HasLease(p) (a Release that clears the lease)`)
	}
	if v := c.guardFailed(t, func() string { return t.leaseDetail(p) }); v != nil {
		return v
	}
	after := t.lease
	if t.hasLease(p) {
		after = 0
	}
	if v := t.checkProc(ev, p, t.names[after], t.taken); v != nil {
		return v
	}
	if t.hasLease(p) {
		t.lease, t.expires = 0, 0
	}
	p.pc, p.hold = pcIdle, 0
	return nil
}

// abandon: Abandon(p, r), r the line's run.
func (c *Checker) abandon(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	r := int64(ev.Run)
	inRange := r >= 1 && r <= int64(len(t.runs))
	c.guard(p.pc == pcClaimed, `pc[p] = "claimed"`)
	c.guard(inRange, `r \in RunIds`)
	c.guard(inRange && t.runs[r-1].state == runActive, `runs[r].state = "active"`)
	c.guard(inRange && t.runs[r-1].holder != p.hold, `runs[r].holder # hold[p]`)
	c.guard(!c.fences.Abandon || t.hasLease(p), `FenceAbandon => HasLease(p)`)
	if v := c.guardFailed(t, func() string { return fmt.Sprintf("run %d; %s", r, t.leaseDetail(p)) }); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, t.names[t.lease], t.taken); v != nil {
		return v
	}
	run := &t.runs[r-1]
	run.state = runAbandoned
	t.active--
	t.steered = slices.DeleteFunc(t.steered, func(x steerPair) bool { return x.run == r })
	if t.lease == run.holder {
		t.liveAband = true
	}
	return nil
}

// abandonFenced: AbandonFenced(p). Its run is the one the caller asked to
// abandon, which the spec's action does not name: not checked.
func (c *Checker) abandonFenced(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	c.guard(p.pc == pcClaimed, `pc[p] = "claimed"`)
	c.guard(c.fences.Abandon, `FenceAbandon`)
	c.guard(!t.hasLease(p), `~HasLease(p)`)
	if v := c.guardFailed(t, func() string { return t.leaseDetail(p) }); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, t.names[t.lease], t.taken); v != nil {
		return v
	}
	p.pc, p.hold = pcIdle, 0
	return nil
}

// plan: Plan(p): the reply to the oldest open request, else a run, for
// message taken + 1.
func (c *Checker) plan(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	c.guard(p.pc == pcClaimed, `pc[p] = "claimed"`)
	c.guard(t.active == 0, `ActiveRuns = {}`)
	c.guard(t.taken < t.msgs, `taken < msgs`)
	if v := c.guardFailed(t, func() string {
		return fmt.Sprintf("%s; %d active run(s); taken %d, msgs %d", p.describe(t), t.active, t.taken, t.msgs)
	}); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, "", t.taken); v != nil {
		return v
	}
	kind, req := planRun, int64(0)
	if q := t.oldestOpen(); q != 0 {
		kind, req = planReply, q
	}
	switch {
	case ev.Kind != planNames[kind]:
		return valueViolation(t, "line.kind", strconv.Quote(ev.Kind), strconv.Quote(planNames[kind]))
	case int64(ev.Msg) != t.taken+1:
		return valueViolation(t, "line.msg", ev.Msg, t.taken+1)
	case int64(ev.Req) != req:
		return valueViolation(t, "line.req", ev.Req, req)
	}
	p.pc, p.planKind, p.planMsg, p.planReq = pcPlanned, kind, t.taken+1, req
	return nil
}

var planConjuncts = [...]string{planRun: `plan[p].kind = "run"`, planReply: `plan[p].kind = "reply"`}

// planned checks the guard RunStart, StartFenced, Reply and ReplyFenced
// share: pc[p] = "planned" /\ plan[p].kind = kind.
func (c *Checker) planned(p *specProc, kind uint8) {
	c.guard(p.pc == pcPlanned, `pc[p] = "planned"`)
	c.guard(p.planKind == kind, planConjuncts[kind])
}

// checkPlan checks the plan's message, and for a reply its request, on
// the line of the write (or refusal) that carries the plan out.
func (t *threadState) checkPlan(ev *core.TraceEvent, p *specProc) *Violation {
	switch {
	case int64(ev.Msg) != p.planMsg:
		return valueViolation(t, "line.msg", ev.Msg, fmt.Sprintf("%d (plan[p].msg)", p.planMsg))
	case int64(ev.Req) != p.planReq:
		return valueViolation(t, "line.req", ev.Req, fmt.Sprintf("%d (plan[p].req)", p.planReq))
	}
	return nil
}

// runStart: RunStart(p): the planned message is the new run's prompt,
// consumed.
func (c *Checker) runStart(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	c.planned(p, planRun)
	c.guard(!c.fences.Start || t.hasLease(p), `Fenced => HasLease(p)`)
	if v := c.guardFailed(t, func() string { return t.leaseDetail(p) }); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, t.names[t.lease], p.planMsg); v != nil {
		return v
	}
	if v := t.checkPlan(ev, p); v != nil {
		return v
	}
	if id := int64(len(t.runs)) + 1; int64(ev.Run) != id {
		return valueViolation(t, "line.run", ev.Run, fmt.Sprintf("%d (Len(runs'))", id))
	}
	t.runs = append(t.runs, specRun{holder: p.hold, prompt: p.planMsg, state: runActive})
	t.active++
	t.taken = p.planMsg
	t.consume(p.planMsg)
	t.give(p.planMsg)
	p.run = int64(len(t.runs))
	p.pc, p.planKind, p.planMsg, p.planReq = pcRunning, planNone, 0, 0
	return nil
}

// startFenced: StartFenced(p): the fence refuses the planned start.
func (c *Checker) startFenced(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	return c.planFenced(t, p, ev, planRun)
}

// planFenced is StartFenced(p) and ReplyFenced(p): the fence refuses the
// planned write of the kind, and p's round is over.
func (c *Checker) planFenced(t *threadState, p *specProc, ev *core.TraceEvent, kind uint8) *Violation {
	c.planned(p, kind)
	on := c.fences.Reply
	if kind == planRun {
		on = c.fences.Start
	}
	c.guard(on, `Fenced`)
	c.guard(!t.hasLease(p), `~HasLease(p)`)
	if v := c.guardFailed(t, func() string { return t.leaseDetail(p) }); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, t.names[t.lease], t.taken); v != nil {
		return v
	}
	if v := t.checkPlan(ev, p); v != nil {
		return v
	}
	p.pc, p.hold, p.planKind, p.planMsg, p.planReq = pcIdle, 0, planNone, 0, 0
	return nil
}

// reply: Reply(p): the planned message answers the planned request, and
// is consumed.
func (c *Checker) reply(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	q := p.planReq
	c.planned(p, planReply)
	c.guard(!c.fences.Reply || t.hasLease(p), `Fenced => HasLease(p)`)
	c.guard(q >= 1 && q <= int64(len(t.reqs)) && !t.reqs[q-1].answered, `reqs[plan[p].req].state = "open"`)
	if v := c.guardFailed(t, func() string { return fmt.Sprintf("request %d; %s", q, t.leaseDetail(p)) }); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, t.names[t.lease], p.planMsg); v != nil {
		return v
	}
	if v := t.checkPlan(ev, p); v != nil {
		return v
	}
	t.reqs[q-1].answered, t.reqs[q-1].answer = true, p.planMsg
	t.taken = p.planMsg
	t.consume(p.planMsg)
	t.give(p.planMsg)
	p.pc, p.planKind, p.planMsg, p.planReq = pcClaimed, planNone, 0, 0
	return nil
}

// replyFenced: ReplyFenced(p): the fence refuses the planned answer.
func (c *Checker) replyFenced(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	return c.planFenced(t, p, ev, planReply)
}

var runConjuncts = [...]string{runActive: `runs[run[p]].state = "active"`, runAbandoned: `runs[run[p]].state = "abandoned"`}

// running checks the guard Ask, RunEnd and EndRefused share, pc[p] =
// "running" /\ runs[run[p]].state = state, and then the line's run.
func (c *Checker) running(t *threadState, p *specProc, ev *core.TraceEvent, state uint8) *Violation {
	c.guard(p.pc == pcRunning, `pc[p] = "running"`)
	c.guard(t.runState(p.run) == state, runConjuncts[state])
	if v := c.guardFailed(t, func() string { return p.describe(t) }); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, "", t.taken); v != nil {
		return v
	}
	if int64(ev.Run) != p.run {
		return valueViolation(t, "line.run", ev.Run, fmt.Sprintf("%d (run[p])", p.run))
	}
	return nil
}

// ask: Ask(p): p's run opens a request.
func (c *Checker) ask(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	if v := c.running(t, p, ev, runActive); v != nil {
		return v
	}
	if id := int64(len(t.reqs)) + 1; int64(ev.Req) != id {
		return valueViolation(t, "line.req", ev.Req, fmt.Sprintf("%d (Len(reqs'))", id))
	}
	t.reqs = append(t.reqs, specReq{run: p.run})
	return nil
}

// runEnd: RunEnd(p).
func (c *Checker) runEnd(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	if v := c.running(t, p, ev, runActive); v != nil {
		return v
	}
	t.runs[p.run-1].state = runEnded
	t.active--
	p.pc, p.run = pcClaimed, 0
	return nil
}

// endRefused: EndRefused(p): the run was abandoned.
func (c *Checker) endRefused(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	if v := c.running(t, p, ev, runAbandoned); v != nil {
		return v
	}
	p.pc, p.hold, p.run = pcIdle, 0, 0
	return nil
}

// steer: Steer(p): p's active run is given message taken + 1 as
// steering, while no request is open. A read.
func (c *Checker) steer(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	c.guard(p.pc == pcRunning, `pc[p] = "running"`)
	c.guard(t.runState(p.run) == runActive, `runs[run[p]].state = "active"`)
	c.guard(t.oldestOpen() == 0, `OpenReqs = {}`)
	c.guard(t.taken < t.msgs, `taken < msgs`)
	if v := c.guardFailed(t, func() string {
		return fmt.Sprintf("%s; oldest open request %d; taken %d, msgs %d", p.describe(t), t.oldestOpen(), t.taken, t.msgs)
	}); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, "", t.taken); v != nil {
		return v
	}
	m := t.taken + 1
	if int64(ev.Msg) != m {
		return valueViolation(t, "line.msg", ev.Msg, fmt.Sprintf("%d (taken + 1)", m))
	}
	if int64(ev.Run) != p.run {
		return valueViolation(t, "line.run", ev.Run, fmt.Sprintf("%d (run[p])", p.run))
	}
	t.give(m)
	t.addSteered(p.run, m)
	p.pc, p.planKind, p.planMsg, p.planReq = pcSteered, planSteer, m, 0
	return nil
}

// steered checks the guard SteerRecord and SteerRefused share, pc[p] =
// "steered", with the record's run state (RefuseSteerAbandoned is TRUE and
// FenceSteer FALSE, as in the Go code: the record is refused exactly when
// the run is not active), then the line's values: its msg is plan[p].msg,
// its run run[p], its taken the cursor after the action.
func (c *Checker) steered(t *threadState, p *specProc, ev *core.TraceEvent, record bool, taken int64) *Violation {
	c.guard(p.pc == pcSteered, `pc[p] = "steered"`)
	if record {
		c.guard(t.runState(p.run) == runActive, `RefuseSteerAbandoned => runs[run[p]].state = "active"`)
	} else {
		c.guard(t.runState(p.run) != runActive, `RefuseSteerAbandoned /\ runs[run[p]].state # "active"`)
	}
	if v := c.guardFailed(t, func() string { return p.describe(t) }); v != nil {
		return v
	}
	if v := t.checkProc(ev, p, "", taken); v != nil {
		return v
	}
	if int64(ev.Msg) != p.planMsg {
		return valueViolation(t, "line.msg", ev.Msg, fmt.Sprintf("%d (plan[p].msg)", p.planMsg))
	}
	if int64(ev.Run) != p.run {
		return valueViolation(t, "line.run", ev.Run, fmt.Sprintf("%d (run[p])", p.run))
	}
	return nil
}

// steerRecord: SteerRecord(p): the steering p's run was given is
// recorded, and consumed; not fenced by the claim.
func (c *Checker) steerRecord(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	if v := c.steered(t, p, ev, true, p.planMsg); v != nil {
		return v
	}
	m := p.planMsg
	t.taken = m
	t.consume(m)
	t.removeSteered(p.run, m)
	p.pc, p.planKind, p.planMsg, p.planReq = pcRunning, planNone, 0, 0
	return nil
}

// steerRefused: SteerRefused(p): storage refuses the record, since p's run
// was abandoned; p's round is over, and the message stays unconsumed.
func (c *Checker) steerRefused(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	if v := c.steered(t, p, ev, false, t.taken); v != nil {
		return v
	}
	p.pc, p.hold, p.run, p.planKind, p.planMsg, p.planReq = pcIdle, 0, 0, planNone, 0, 0
	return nil
}

// crash: Crash(p). Its holder is hold[p], or "" from a process that died
// before it knew it.
func (c *Checker) crash(t *threadState, p *specProc, ev *core.TraceEvent) *Violation {
	c.guard(p.pc != pcIdle, `pc[p] # "idle"`)
	if v := c.guardFailed(t, func() string { return p.describe(t) }); v != nil {
		return v
	}
	if ev.Holder != "" && ev.Holder != t.hold(p) {
		return valueViolation(t, "line.holder", strconv.Quote(string(ev.Holder)), strconv.Quote(string(t.hold(p)))+` (hold[p]) or ""`)
	}
	if v := t.checkTaken(ev, t.taken); v != nil {
		return v
	}
	p.pc, p.hold, p.run, p.planKind, p.planMsg, p.planReq = pcIdle, 0, 0, planNone, 0, 0
	return nil
}

// invariants evaluates I1_ConsumedAtMostOnce, I3_OneActiveRun,
// NoLiveAbandon and SteeringException after a line was taken.
func (c *Checker) invariants(t *threadState, lapse bool) *Violation {
	c.stats.InvariantChecks += 4
	steering := t.steeringException()
	if t.overConsumed == 0 && t.active <= 1 && !t.liveAband && steering {
		return nil
	}
	var failed []string
	if t.overConsumed > 0 {
		failed = append(failed, core.InvConsumedAtMostOnce)
	}
	if t.active > 1 {
		failed = append(failed, core.InvOneActiveRun)
	}
	if t.liveAband {
		failed = append(failed, core.InvNoLiveAbandon)
	}
	if !steering {
		failed = append(failed, core.InvSteeringException)
	}
	return &Violation{Kind: ErrInvariant, Rule: failed[0], Failed: failed, Lapse: lapse,
		Detail: t.invariantDetail(), State: t.dump()}
}

// checkTaken checks taken', the cursor after the action.
func (t *threadState) checkTaken(ev *core.TraceEvent, taken int64) *Violation {
	if int64(ev.Taken) != taken {
		return valueViolation(t, "line.taken", ev.Taken, fmt.Sprintf("%d (taken')", taken))
	}
	return nil
}

// checkProc checks a process's line: its holder is hold[p], its lease
// (when the action carries one; "" otherwise) is lease, and its taken is
// taken.
func (t *threadState) checkProc(ev *core.TraceEvent, p *specProc, lease core.Holder, taken int64) *Violation {
	if h := t.hold(p); ev.Holder != h {
		return valueViolation(t, "line.holder", strconv.Quote(string(ev.Holder)), strconv.Quote(string(h))+" (hold[p])")
	}
	if ev.Lease != lease {
		return valueViolation(t, "line.lease", strconv.Quote(string(ev.Lease)), strconv.Quote(string(lease)))
	}
	return t.checkTaken(ev, taken)
}

func (t *threadState) hold(p *specProc) core.Holder { return t.names[p.hold] }

func (t *threadState) runState(r int64) uint8 {
	if r < 1 || r > int64(len(t.runs)) {
		return 255
	}
	return t.runs[r-1].state
}

func (t *threadState) consume(m int64) {
	ok := t.givenOK(m)
	t.consumed[m]++
	if t.consumed[m] == 2 {
		t.overConsumed++
	}
	t.regive(m, ok)
}

// give is given'[m] = given[m] + 1.
func (t *threadState) give(m int64) {
	ok := t.givenOK(m)
	t.given[m]++
	t.regive(m, ok)
}

// addSteered is steered' = steered \cup {<<r, m>>}.
func (t *threadState) addSteered(r, m int64) {
	x := steerPair{r, m}
	if slices.Contains(t.steered, x) || t.runState(r) == runAbandoned {
		return // already in the set (an abandoned run's pairs stay in it)
	}
	ok := t.givenOK(m)
	t.steered = append(t.steered, x)
	t.steeredOf[m]++
	t.regive(m, ok)
}

// removeSteered is steered' = steered \ {<<r, m>>}.
func (t *threadState) removeSteered(r, m int64) {
	k := slices.Index(t.steered, steerPair{r, m})
	if k < 0 {
		return
	}
	ok := t.givenOK(m)
	t.steered = slices.Delete(t.steered, k, k+1)
	t.steeredOf[m]--
	t.regive(m, ok)
}

// givenOK is SteeringException's first conjunct for message m:
// given[m] = consumed[m] + Cardinality({x \in steered : x[2] = m}).
func (t *threadState) givenOK(m int64) bool {
	return t.given[m] == t.consumed[m]+t.steeredOf[m]
}

// regive counts m in misgiven by whether givenOK(m) holds now and held
// (was) before a change.
func (t *threadState) regive(m int64, was bool) {
	switch now := t.givenOK(m); {
	case was && !now:
		t.misgiven++
	case !was && now:
		t.misgiven--
	}
}

// steeringException is the spec's SteeringException: every give of a
// message is its consumption or a steered pair, and every pair's run is
// not ended, and when active waits for the record of message taken + 1.
// (Pairs of abandoned runs are not in t.steered: they hold the second
// conjunct for good.)
func (t *threadState) steeringException() bool {
	if t.misgiven != 0 {
		return false
	}
	for _, x := range t.steered {
		switch t.runState(x.run) {
		case runEnded, 255:
			return false
		case runActive:
			if x.msg != t.taken+1 {
				return false
			}
		}
	}
	return true
}

func (t *threadState) holderName(h int) string {
	if h == 0 {
		return "none"
	}
	return "h" + strconv.Itoa(h)
}

func (t *threadState) leaseDetail(p *specProc) string {
	return fmt.Sprintf("lease.holder is %s, hold[%s] is %s, pc[%s] is %s",
		t.holderName(t.lease), p.name, t.holderName(p.hold), p.name, pcNames[p.pc])
}

func (p *specProc) describe(t *threadState) string {
	return fmt.Sprintf("pc[%s] is %s, hold %s, plan %s, run %d", p.name, pcNames[p.pc], t.holderName(p.hold), p.planString(), p.run)
}

func (p *specProc) planString() string {
	switch p.planKind {
	case planRun:
		return fmt.Sprintf("run/m%d", p.planMsg)
	case planReply:
		return fmt.Sprintf("reply/m%d->q%d", p.planMsg, p.planReq)
	case planSteer:
		return fmt.Sprintf("steer/m%d", p.planMsg)
	}
	return "none"
}

func (t *threadState) invariantDetail() string {
	var parts []string
	if t.overConsumed > 0 {
		var ms []string
		for m, n := range t.consumed {
			if n > 1 {
				ms = append(ms, fmt.Sprintf("m%d consumed %d times", m, n))
			}
		}
		parts = append(parts, strings.Join(ms, ", "))
	}
	if t.active > 1 {
		var rs []string
		for i, r := range t.runs {
			if r.state == runActive {
				rs = append(rs, fmt.Sprintf("%d", i+1))
			}
		}
		parts = append(parts, fmt.Sprintf("runs %s active", strings.Join(rs, ", ")))
	}
	if t.liveAband {
		parts = append(parts, "a run was abandoned while its own holder had the lease")
	}
	if !t.steeringException() {
		var ms []string
		for m := 1; m < len(t.given); m++ {
			if !t.givenOK(int64(m)) {
				ms = append(ms, fmt.Sprintf("m%d given %d times, consumed %d, steered unrecorded %d", m, t.given[m], t.consumed[m], t.steeredOf[m]))
			}
		}
		for _, x := range t.steered {
			if st := t.runState(x.run); st != runAbandoned && (st != runActive || x.msg != t.taken+1) {
				ms = append(ms, fmt.Sprintf("run %d given m%d as steering, not recorded, with taken %d", x.run, x.msg, t.taken))
			}
		}
		parts = append(parts, strings.Join(ms, ", "))
	}
	return strings.Join(parts, "; ")
}

// dumpTail is how many of the latest runs and requests a dump shows.
const dumpTail = 6

// dump writes the spec's state of the thread compactly. Holders are
// abstract (h1, h2, ... in order of their Claims), with their strings.
func (t *threadState) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "thread %q version %d: msgs=%d taken=%d lease=%s", t.id, t.version, t.msgs, t.taken, t.holderName(t.lease))
	if t.lease != 0 {
		b.WriteString(" (may have lapsed)")
	}
	if t.lapses > 0 {
		fmt.Fprintf(&b, " lapses-inferred=%d (last before line %d)", t.lapses, t.lastLapse)
	}
	used := map[int]bool{t.lease: true}
	b.WriteString(" runs=[")
	from := max(0, len(t.runs)-dumpTail)
	if from > 0 {
		fmt.Fprintf(&b, "...%d earlier ", from)
	}
	for i := from; i < len(t.runs); i++ {
		r := t.runs[i]
		used[r.holder] = true
		if i > from {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%s/m%d/%s", i+1, t.holderName(r.holder), r.prompt, runStateNames[r.state])
	}
	b.WriteString("] reqs=[")
	from = max(0, len(t.reqs)-dumpTail)
	if from > 0 {
		fmt.Fprintf(&b, "...%d earlier ", from)
	}
	for i := from; i < len(t.reqs); i++ {
		q := t.reqs[i]
		if i > from {
			b.WriteByte(' ')
		}
		if q.answered {
			fmt.Fprintf(&b, "%d:run%d/answered/m%d", i+1, q.run, q.answer)
		} else {
			fmt.Fprintf(&b, "%d:run%d/open", i+1, q.run)
		}
	}
	b.WriteString("]")
	if t.overConsumed > 0 {
		fmt.Fprintf(&b, " consumed>1=%d", t.overConsumed)
	}
	if t.liveAband {
		b.WriteString(" liveAbandoned=TRUE")
	}
	if len(t.steered) > 0 {
		b.WriteString(" steered=[")
		for i, x := range t.steered {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "run%d/m%d", x.run, x.msg)
		}
		b.WriteString("]")
	}
	b.WriteString(" procs={")
	for i, p := range t.order {
		used[p.hold] = true
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s %s plan=%s run=%d", p.name, pcNames[p.pc], t.holderName(p.hold), p.planString(), p.run)
	}
	fmt.Fprintf(&b, "} nextHolder=h%d holders={", len(t.names))
	first := true
	for h := 1; h < len(t.names); h++ {
		if !used[h] {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "h%d=%q", h, t.names[h])
	}
	b.WriteString("}")
	return b.String()
}
