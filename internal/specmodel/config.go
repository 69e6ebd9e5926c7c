package specmodel

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/threadclaim/threadclaim/core"
)

// ErrConfig: a cfg file is malformed or names something the model does not
// know. The error names the file and line.
var ErrConfig = errors.New("bad cfg")

// Config holds a cfg file's constants and what it asks TLC to check.
type Config struct {
	Procs     []string // the processes, sorted (TLC's order for a set of strings)
	MaxMsgs   int
	MaxClaims int
	MaxAsks   int
	// Fences are the constants FenceStart, FenceReply and FenceAbandon:
	// the writes that require HasLease(p). A cfg that sets the older
	// single constant Fenced sets Start and Reply.
	Fences core.Fences
	// OneFenced is true when the cfg sets the older single constant Fenced
	// (for RunStart and Reply) rather than FenceStart and FenceReply; the
	// failing conjuncts are then named with it.
	OneFenced bool
	// FenceSteer and RefuseSteerAbandoned are the constants that choose
	// SteerRecord's guard: it requires HasLease(p) (FenceSteer), and its
	// run active (RefuseSteerAbandoned). A cfg that gives neither has the
	// Go code's: FALSE and TRUE.
	FenceSteer, RefuseSteerAbandoned bool
	// ClaimTakesLive is the constant that drops Claim's guard: a Claim
	// may take a live lease. It is a defect, TRUE only in the cfg whose
	// model must break NoLiveTakeover; a cfg that does not give it has
	// the Go code's FALSE.
	ClaimTakesLive bool

	Specification string   // SPECIFICATION: Spec or LiveSpec
	Invariants    []string // INVARIANTS, in the cfg's order
	Properties    []string // PROPERTIES: NoLiveTakeover is checked, liveness ones are not (Unchecked)
	CheckDeadlock bool     // CHECK_DEADLOCK (TLC's default TRUE)
	// Expect is the cfg's declared outcome, from its `\* expect:` comment:
	// "ok", or "violation" followed by the invariants any of which may be
	// reported. Empty when the cfg declares none.
	Expect []string
	// Fires lists the actions the cfg's `\* fires:` comment says must each
	// take at least one step in the reachable graph ("all": every action
	// of core.ActionTable).
	Fires []string
}

// The model evaluates the invariants core.InvTypeOK,
// core.InvConsumedAtMostOnce, core.InvOneActiveRun,
// core.InvNoLiveAbandon, core.InvSteeringException and
// InvGivenAtMostOnce, and checks the action property
// core.PropNoLiveTakeover on every transition when the cfg lists it.
const (
	maxSmall               = 200 // values are stored in bytes
	livenessPropertyOfSpec = "EveryPostConsumed"
)

// The two specifications a cfg may name: Spec, Init /\ [][Next]_vars,
// and LiveSpec, Spec with fairness. Their reachable states and
// transitions are the same.
const (
	SafetySpec = "Spec"
	LiveSpec   = "LiveSpec"
)

// Module is the spec module the model is a model of (spec/Module.tla): the
// one whose TLC runs package tlc compares with the model's graph.
const Module = "ThreadClaimLapse"

var sections = map[string]string{
	"CONSTANT": "CONSTANT", "CONSTANTS": "CONSTANT",
	"INVARIANT": "INVARIANT", "INVARIANTS": "INVARIANT",
	"PROPERTY": "PROPERTY", "PROPERTIES": "PROPERTY",
}

var knownInvariants = []string{core.InvTypeOK, core.InvConsumedAtMostOnce, core.InvOneActiveRun, core.InvNoLiveAbandon,
	core.InvSteeringException, InvGivenAtMostOnce}

// ReadConfig reads and parses a cfg file.
func ReadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(path, string(b))
}

// ParseConfig parses a TLC cfg: SPECIFICATION, CONSTANT(S) (integers,
// booleans, sets of strings or model values), INVARIANT(S), PROPERTY
// (PROPERTIES) and CHECK_DEADLOCK, with `\*` and `(* *)` comments. Anything
// else (INIT/NEXT, SYMMETRY, VIEW, CONSTRAINT, an unknown constant or
// invariant) is an error wrapping ErrConfig, since it would change what
// the model has to enumerate. name is used in errors.
func ParseConfig(name, text string) (Config, error) {
	c := Config{CheckDeadlock: true, RefuseSteerAbandoned: true}
	seen := map[string]bool{}
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s", ErrConfig, name, line, fmt.Sprintf(format, args...))
	}
	text, err := stripBlockComments(text)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %s: %v", ErrConfig, name, err)
	}
	section := ""
	for i, raw := range strings.Split(text, "\n") {
		n := i + 1
		line := raw
		if j := strings.Index(line, `\*`); j >= 0 {
			comment := strings.TrimSpace(line[j+2:])
			if rest, ok := strings.CutPrefix(comment, "expect:"); ok && c.Expect == nil {
				c.Expect = strings.Fields(rest)
			}
			if rest, ok := strings.CutPrefix(comment, "fires:"); ok && c.Fires == nil {
				c.Fires = strings.Fields(rest)
				if len(c.Fires) == 1 && c.Fires[0] == "all" {
					c.Fires = nil
					for _, a := range core.Actions() {
						c.Fires = append(c.Fires, string(a))
					}
				}
			}
			line = line[:j]
		}
		fields := strings.Fields(line)
		for len(fields) > 0 {
			switch kw := fields[0]; kw {
			case "SPECIFICATION", "CHECK_DEADLOCK":
				if len(fields) < 2 {
					return Config{}, bad(n, "%s needs a value on its line", kw)
				}
				if kw == "SPECIFICATION" {
					c.Specification = fields[1]
				} else {
					switch fields[1] {
					case "TRUE":
						c.CheckDeadlock = true
					case "FALSE":
						c.CheckDeadlock = false
					default:
						return Config{}, bad(n, "CHECK_DEADLOCK %q is not TRUE or FALSE", fields[1])
					}
				}
				fields = fields[2:]
				section = ""
				continue
			case "CONSTANT", "CONSTANTS", "INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES":
				section = sections[kw]
				fields = fields[1:]
				continue
			case "INIT", "NEXT", "SYMMETRY", "VIEW", "CONSTRAINT", "CONSTRAINTS", "ACTION_CONSTRAINT", "ACTION_CONSTRAINTS", "ALIAS", "POSTCONDITION":
				return Config{}, bad(n, "%s is not supported by the Go model", kw)
			}
			switch section {
			case "INVARIANT":
				if !slices.Contains(knownInvariants, fields[0]) {
					return Config{}, bad(n, "unknown invariant %q (the model knows %s)", fields[0], strings.Join(knownInvariants, ", "))
				}
				c.Invariants = append(c.Invariants, fields[0])
				fields = fields[1:]
			case "PROPERTY":
				c.Properties = append(c.Properties, fields[0])
				fields = fields[1:]
			case "CONSTANT":
				rest := strings.Join(fields, " ")
				k, v, ok := strings.Cut(rest, "=")
				if !ok {
					return Config{}, bad(n, "constant %q has no value (want Name = value)", rest)
				}
				k, v = strings.TrimSpace(k), strings.TrimSpace(v)
				if seen[k] {
					return Config{}, bad(n, "constant %s given twice", k)
				}
				seen[k] = true
				if err := c.setConstant(k, v); err != nil {
					return Config{}, bad(n, "%v", err)
				}
				fields = nil
			default:
				return Config{}, bad(n, "unexpected %q outside a section", fields[0])
			}
		}
	}
	for _, k := range []string{"Procs", "MaxMsgs", "MaxClaims", "MaxAsks", "FenceAbandon"} {
		if !seen[k] {
			return Config{}, fmt.Errorf("%w: %s: constant %s not given", ErrConfig, name, k)
		}
	}
	if !seen["Fenced"] && !(seen["FenceStart"] && seen["FenceReply"]) {
		return Config{}, fmt.Errorf("%w: %s: constant Fenced (or FenceStart and FenceReply) not given", ErrConfig, name)
	}
	switch c.Specification {
	case "":
		return Config{}, fmt.Errorf("%w: %s: no SPECIFICATION", ErrConfig, name)
	case SafetySpec, LiveSpec:
	default:
		return Config{}, fmt.Errorf("%w: %s: SPECIFICATION %s is not Spec or LiveSpec", ErrConfig, name, c.Specification)
	}
	return c, nil
}

func (c *Config) setConstant(k, v string) error {
	num := func() (int, error) {
		x, err := strconv.Atoi(v)
		if err != nil || x < 0 || x > maxSmall {
			return 0, fmt.Errorf("constant %s = %s: want an integer in 0..%d", k, v, maxSmall)
		}
		return x, nil
	}
	boolean := func() (bool, error) {
		switch v {
		case "TRUE":
			return true, nil
		case "FALSE":
			return false, nil
		}
		return false, fmt.Errorf("constant %s = %s: want TRUE or FALSE", k, v)
	}
	var err error
	switch k {
	case "Procs":
		c.Procs, err = parseSet(v)
		if err == nil && len(c.Procs) == 0 {
			err = errors.New("Procs is empty (the spec assumes Procs # {})")
		}
		if len(c.Procs) > maxSmall {
			err = fmt.Errorf("Procs has more than %d elements", maxSmall)
		}
	case "MaxMsgs":
		c.MaxMsgs, err = num()
	case "MaxClaims":
		c.MaxClaims, err = num()
	case "MaxAsks":
		c.MaxAsks, err = num()
	case "Fenced":
		c.Fences.Start, err = boolean()
		c.Fences.Reply, c.OneFenced = c.Fences.Start, true
	case "FenceStart":
		c.Fences.Start, err = boolean()
	case "FenceReply":
		c.Fences.Reply, err = boolean()
	case "FenceAbandon":
		c.Fences.Abandon, err = boolean()
	case "FenceSteer":
		c.FenceSteer, err = boolean()
	case "RefuseSteerAbandoned":
		c.RefuseSteerAbandoned, err = boolean()
	case "ClaimTakesLive":
		c.ClaimTakesLive, err = boolean()
	default:
		return fmt.Errorf("unknown constant %s", k)
	}
	return err
}

// parseSet parses {"p1", "p2"} or {p1, p2} into sorted, distinct names.
func parseSet(v string) ([]string, error) {
	inner, ok := strings.CutPrefix(v, "{")
	if ok {
		inner, ok = strings.CutSuffix(inner, "}")
	}
	if !ok {
		return nil, fmt.Errorf("Procs = %s: want a set {\"p1\", \"p2\"}", v)
	}
	var out []string
	for _, e := range strings.Split(inner, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			if strings.TrimSpace(inner) == "" {
				break
			}
			return nil, fmt.Errorf("Procs = %s: empty element", v)
		}
		if strings.HasPrefix(e, `"`) {
			s, err := strconv.Unquote(e)
			if err != nil {
				return nil, fmt.Errorf("Procs = %s: bad string %s", v, e)
			}
			e = s
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out, nil
}

func stripBlockComments(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "(*")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		j := strings.Index(s[i+2:], "*)")
		if j < 0 {
			return "", errors.New("unterminated (* comment")
		}
		// keep the line count
		b.WriteString(strings.Repeat("\n", strings.Count(s[i:i+2+j+2], "\n")))
		s = s[i+2+j+2:]
	}
}

// MaxRuns is the bound of Abandon's run parameter: MaxClaims * MaxMsgs.
func (c Config) MaxRuns() int { return c.MaxClaims * c.MaxMsgs }

// Unchecked returns the cfg's properties the model does not check: the
// liveness ones (such as EveryPostConsumed). The reachable states are still
// those of the safety part, which is what the model enumerates.
func (c Config) Unchecked() []string {
	var out []string
	for _, p := range c.Properties {
		if p != core.PropNoLiveTakeover {
			out = append(out, p)
		}
	}
	return out
}

// ExpectsUnchecked reports whether the cfg declares the violation of a
// property the model does not check (Unchecked), such as a liveness
// property with no fairness to make it hold: TLC alone can find that
// violation, and the model's part of the expectation is that no invariant
// of the cfg is violated on the way.
func (c Config) ExpectsUnchecked() bool {
	if len(c.Expect) < 2 || c.Expect[0] != "violation" {
		return false
	}
	un := c.Unchecked()
	for _, name := range c.Expect[1:] {
		if !slices.Contains(un, name) {
			return false
		}
	}
	return true
}

// checks reports whether the cfg lists the property.
func (c Config) checks(prop string) bool { return slices.Contains(c.Properties, prop) }
