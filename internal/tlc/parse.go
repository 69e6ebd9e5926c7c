package tlc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Outcome is what a TLC run concluded, read from the code of the message
// that ended the check.
type Outcome int

// The outcomes. OutcomeUnknown means TLC ended (or was stopped) before it
// reported a result; Run returns ErrIncomplete with it.
const (
	OutcomeUnknown    Outcome = iota
	NoError                   // "Model checking completed. No error has been found." (2193)
	InvariantViolated         // an invariant, named by Result.Name (2107, 2110)
	PropertyViolated          // a temporal or action property, named by Result.Name (2108, 2112, 2116)
	Deadlock                  // a state without successors with deadlock checking on (2114)
	AssumptionFalse           // an ASSUME that evaluated to FALSE (2104); Result.Text locates it
	ParseError                // SANY could not parse or resolve the spec (3002, 2171); Result.Text has its report
	Failed                    // any other error TLC reported (evaluation, configuration...); Result.Text has it
)

var outcomeNames = [...]string{"unknown", "ok", "invariant violated", "property violated", "deadlock", "assumption false", "parse error", "error"}

func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return outcomeNames[o]
}

// TLC's message codes (tlc2.output.EC) that the parser acts on. Every
// other code is kept in Result.Messages and otherwise ignored, except that
// an error-severity message of a code not listed here makes the outcome
// Failed.
const (
	codeAssumptionFalse        = 2104
	codeAssumptionEvalError    = 2105
	codeInvariantInitial       = 2107
	codePropertyInitial        = 2108
	codeInvariantBehavior      = 2110
	codeActionPropertyBehavior = 2112
	codeDeadlock               = 2114
	codeTemporalProperty       = 2116
	codeBehaviorUpToHere       = 2121
	codeBackToState            = 2122
	codeParsingFailed2         = 2171
	codeStarting               = 2185
	codeFinished               = 2186
	codeSuccess                = 2193
	codeSearchDepth            = 2194
	codeStats                  = 2199
	codeStatePrint2            = 2217
	codeStatePrint3            = 2218
	codeSANYStart              = 2220
	codeSANYEnd                = 2219
	codeVersion                = 2262
	codeCounterExample         = 2264
	codeParsingFailed          = 3002
)

// TLC's message severities (tlc2.output.MP).
const (
	severityInfo    = 0
	severityError   = 1
	severityBug     = 2
	severityWarning = 3
	severityState   = 4
)

// Message is one framed message of TLC's -tool output:
// "@!@!@STARTMSG code:severity @!@!@", its body, "@!@!@ENDMSG code @!@!@".
type Message struct {
	Code     int
	Severity int
	Body     string // the lines between the frames, without the final newline
}

// Var is one variable of a state as TLC prints it: its name and its value
// in TLA+ syntax, as printed (a value may span several lines).
type Var struct {
	Name  string
	Value string
}

// State is one state of a counterexample.
type State struct {
	N int // its number in the behaviour, from 1
	// Action is what TLC prints between < and > before the state: the
	// action's name with its location ("StepLine line 215, col 5 to ...")
	// or "Initial predicate". Empty for Stuttering and BackTo states.
	Action string
	Vars   []Var
	// Stuttering is set on the last state of a liveness counterexample
	// that ends by stuttering; BackTo, when not 0, is the number of the
	// state a lasso-shaped counterexample loops back to (by Action), and
	// the entry has no variables of its own.
	Stuttering bool
	BackTo     int
}

// ActionName is the action's name without its location: "StepLine" for
// "StepLine line 215, col 5 to line 222, col 17 of module M", and
// "RunStart(\"p1\")" with its arguments for an action TLC names with them.
func (s State) ActionName() string {
	if i := strings.Index(s.Action, " line "); i >= 0 {
		return s.Action[:i]
	}
	return s.Action
}

// Var returns the printed value of the variable name, if the state has it.
func (s State) Var(name string) (string, bool) {
	for _, v := range s.Vars {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// Result is what one TLC run reported, read from its message codes.
type Result struct {
	Outcome Outcome
	// Name is the invariant or property violated (InvariantViolated,
	// PropertyViolated).
	Name string
	// Text is TLC's report for AssumptionFalse, ParseError and Failed: the
	// message's body, and for ParseError SANY's own report before it.
	Text string
	// Version is TLC's version line ("TLC2 Version 2.19 of ..."), "" if
	// TLC did not print one.
	Version string
	// Generated and Distinct count states; Left is the queue when TLC
	// stopped; Depth is the depth of the state graph search. Each is -1 if
	// TLC did not report it.
	Generated, Distinct, Left int64
	Depth                     int
	// Trace is the counterexample, when TLC printed one.
	Trace []State
	// Finished is set when TLC printed its final "Finished in" message.
	Finished bool
	// Messages are all of TLC's framed messages, in order.
	Messages []Message
	// CPU is the JVM's user and system time, set by Env.Run (Parse
	// leaves it 0): on a shared machine it, not the wall time, says how
	// fast TLC was.
	CPU time.Duration
}

// ErrNotToolOutput means the input to Parse holds no -tool message at all:
// TLC was not run with -tool, or something else answered.
var ErrNotToolOutput = errors.New("tlc: no -tool messages in the output (was TLC run with -tool?)")

var (
	startRe = regexp.MustCompile(`^@!@!@STARTMSG (\d+):(\d+) @!@!@$`)
	endRe   = regexp.MustCompile(`^@!@!@ENDMSG (\d+) @!@!@$`)
	// The bodies read for a name or a number; each is matched only inside
	// a message of its own code.
	nameRe    = regexp.MustCompile(`(?:Invariant|[Pp]roperty) (\S+) (?:is|was) violated`)
	statsRe   = regexp.MustCompile(`^([\d,]+) states? generated, ([\d,]+) distinct states? found, ([\d,]+) states? left on queue`)
	depthRe   = regexp.MustCompile(`(\d+)\.?\s*$`)
	stateHead = regexp.MustCompile(`^(\d+): (?:<(.*)>|(Stuttering)|(Back to state)(?:: <(.*)>)?)\s*$`)
	varLine   = regexp.MustCompile(`^(?:/\\ )?([A-Za-z_][A-Za-z0-9_]*) = (.*)$`)
)

// Parse reads TLC's -tool output and returns what it reported. Lines
// outside the message frames (SANY's report, Java's own errors) are kept
// only as the text of a parse error. It returns ErrNotToolOutput when the
// input has no message, and an error for a frame that is cut off or
// malformed; a run that stopped early parses to OutcomeUnknown with
// Finished false.
func Parse(r io.Reader) (*Result, error) {
	p := newParser()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if err := p.line(sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return p.finish()
}

// parser is Parse's state; Run feeds it TLC's output as it comes.
type parser struct {
	res     Result
	n       int // line number, for errors
	in      *Message
	body    []string
	sany    []string // unframed lines between SANY's start and end
	inSANY  bool
	outcome bool // an outcome message has been seen; later ones do not override it
}

func newParser() *parser {
	return &parser{res: Result{Generated: -1, Distinct: -1, Left: -1, Depth: -1}}
}

func (p *parser) line(s string) error {
	p.n++
	s = strings.TrimSuffix(s, "\r")
	if p.in == nil {
		if m := startRe.FindStringSubmatch(s); m != nil {
			code, _ := strconv.Atoi(m[1])
			sev, _ := strconv.Atoi(m[2])
			p.in = &Message{Code: code, Severity: sev}
			p.body = p.body[:0]
			return nil
		}
		if endRe.MatchString(s) {
			return fmt.Errorf("tlc output line %d: ENDMSG without STARTMSG", p.n)
		}
		if p.inSANY {
			p.sany = append(p.sany, s)
		}
		return nil
	}
	if m := endRe.FindStringSubmatch(s); m != nil {
		code, _ := strconv.Atoi(m[1])
		if code != p.in.Code {
			return fmt.Errorf("tlc output line %d: ENDMSG %d closes STARTMSG %d", p.n, code, p.in.Code)
		}
		p.in.Body = strings.TrimRight(strings.Join(p.body, "\n"), "\n")
		msg := *p.in
		p.in = nil
		return p.message(msg)
	}
	if startRe.MatchString(s) {
		return fmt.Errorf("tlc output line %d: STARTMSG inside message %d", p.n, p.in.Code)
	}
	p.body = append(p.body, s)
	return nil
}

func (p *parser) finish() (*Result, error) {
	if p.in != nil {
		// Cut off mid-message: keep what came, the run did not finish.
		p.in.Body = strings.Join(p.body, "\n")
		if err := p.message(*p.in); err != nil {
			return nil, err
		}
		p.in = nil
	}
	if len(p.res.Messages) == 0 {
		return nil, ErrNotToolOutput
	}
	res := p.res
	return &res, nil
}

// setOutcome records the first outcome; TLC reports one error per run, but
// a Failed message may follow a violation (for instance while TLC prints
// the trace), and it must not hide the violation.
func (p *parser) setOutcome(o Outcome, name, text string) {
	if p.outcome {
		return
	}
	p.outcome = true
	p.res.Outcome, p.res.Name, p.res.Text = o, name, text
}

func (p *parser) message(m Message) error {
	p.res.Messages = append(p.res.Messages, m)
	switch m.Code {
	case codeVersion:
		p.res.Version = firstLine(m.Body)
	case codeSANYStart:
		p.inSANY = true
	case codeSANYEnd:
		p.inSANY = false
	case codeFinished:
		p.res.Finished = true
	case codeSuccess:
		p.setOutcome(NoError, "", "")
	case codeInvariantInitial, codeInvariantBehavior:
		// (Not 2146: an invariant that is not a state predicate, an
		// error of the cfg, whose text the default case keeps.)
		p.setOutcome(InvariantViolated, violatedName(m.Body), "")
	case codePropertyInitial, codeActionPropertyBehavior, codeTemporalProperty:
		p.setOutcome(PropertyViolated, violatedName(m.Body), "")
	case codeDeadlock:
		p.setOutcome(Deadlock, "", "")
	case codeAssumptionFalse:
		p.setOutcome(AssumptionFalse, "", m.Body)
	case codeParsingFailed, codeParsingFailed2:
		p.setOutcome(ParseError, "", p.sanyReport(m.Body))
	case codeStats:
		if s := statsRe.FindStringSubmatch(m.Body); s != nil {
			p.res.Generated, p.res.Distinct, p.res.Left = number(s[1]), number(s[2]), number(s[3])
		}
	case codeSearchDepth:
		if s := depthRe.FindStringSubmatch(m.Body); s != nil {
			p.res.Depth = int(number(s[1]))
		}
	case codeBehaviorUpToHere, codeCounterExample:
		p.res.Trace = p.res.Trace[:0]
	case codeStatePrint2, codeStatePrint3, codeBackToState:
		st, err := parseState(m.Body)
		if err != nil {
			return fmt.Errorf("tlc output line %d: %w", p.n, err)
		}
		if st.BackTo > 0 {
			st.N = len(p.res.Trace) + 1
		}
		p.res.Trace = append(p.res.Trace, st)
	default:
		if m.Severity != severityError && m.Severity != severityBug {
			break
		}
		if p.outcome && p.res.Outcome == Failed {
			// The messages that follow an error locate it (2103, the
			// nested expressions TLC was evaluating).
			p.res.Text += "\n" + m.Body
			break
		}
		p.setOutcome(Failed, "", m.Body)
	}
	return nil
}

// sanyReport is SANY's report of a parse or semantic error (the unframed
// lines it printed, less its progress lines), followed by body.
func (p *parser) sanyReport(body string) string {
	var keep []string
	for _, l := range p.sany {
		if strings.HasPrefix(l, "Parsing file ") || strings.HasPrefix(l, "Semantic processing of module ") || strings.HasPrefix(l, "Linting of module ") {
			continue
		}
		keep = append(keep, l)
	}
	text := strings.TrimSpace(strings.Join(keep, "\n"))
	if text == "" {
		return body
	}
	return text + "\n" + body
}

// parseState reads one state: "N: <Action>" (or "N: Stuttering", "N: Back
// to state M") and its variables, "/\ name = value" or, for a spec of one
// variable, "name = value"; a value continues on the lines that follow
// until the next variable.
func parseState(body string) (State, error) {
	lines := strings.Split(body, "\n")
	h := stateHead.FindStringSubmatch(strings.TrimSpace(lines[0]))
	if h == nil {
		return State{}, fmt.Errorf("unrecognised state header %q", lines[0])
	}
	st := State{Action: h[2], Stuttering: h[3] != ""}
	st.N, _ = strconv.Atoi(h[1])
	if h[4] != "" {
		// "N: Back to state: <action>": N is the state the lasso returns
		// to, by the action; the caller numbers this entry.
		st.BackTo, st.N, st.Action = st.N, 0, h[5]
	}
	for _, l := range lines[1:] {
		if m := varLine.FindStringSubmatch(l); m != nil && (strings.HasPrefix(l, "/\\ ") || len(st.Vars) == 0) {
			st.Vars = append(st.Vars, Var{Name: m[1], Value: m[2]})
			continue
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		if len(st.Vars) == 0 {
			return State{}, fmt.Errorf("state %d: unrecognised line %q", st.N, l)
		}
		v := &st.Vars[len(st.Vars)-1]
		v.Value += "\n" + l
	}
	return st, nil
}

func violatedName(body string) string {
	if m := nameRe.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

func number(s string) int64 {
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}
