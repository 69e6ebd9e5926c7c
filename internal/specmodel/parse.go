package specmodel

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ParseState reads a state written as TLC prints one, and as State.TLA
// writes it: a conjunction of `/\ var = value`, a value possibly over
// several lines, for the cfg's processes. Every variable of the module
// must be there, with a value the model's types can hold; the error says
// which is not.
func ParseState(text string, cfg Config) (State, error) {
	vars := map[string]value{}
	for _, part := range strings.Split("\n"+strings.TrimSpace(text), "\n/\\ ") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rhs, ok := strings.Cut(part, " = ")
		if !ok {
			return State{}, fmt.Errorf("%q is not `var = value`", part)
		}
		p := &tlaParser{s: rhs}
		v, err := p.value()
		if err == nil {
			p.ws()
			if p.i != len(p.s) {
				err = fmt.Errorf("trailing %q", p.s[p.i:])
			}
		}
		if err != nil {
			return State{}, fmt.Errorf("variable %s: %v", name, err)
		}
		vars[strings.TrimSpace(name)] = v
	}
	return fromValues(vars, cfg)
}

// value is a parsed TLA+ value: an int, a bool, a string, a sequence
// (<<...>>), a set ({...}, its elements in seq), or a record/function
// (field or key to value).
type value struct {
	kind byte // 'i', 'b', 's', 'q' (sequence), 'S' (set), 'r' (record or function)
	i    int
	b    bool
	s    string
	seq  []value
	rec  map[string]value
}

type tlaParser struct {
	s string
	i int
}

func (p *tlaParser) ws() {
	for p.i < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.i])) {
		p.i++
	}
}

func (p *tlaParser) eat(tok string) bool {
	p.ws()
	if strings.HasPrefix(p.s[p.i:], tok) {
		p.i += len(tok)
		return true
	}
	return false
}

func (p *tlaParser) ident() string {
	p.ws()
	j := p.i
	for j < len(p.s) && (p.s[j] == '_' || p.s[j] >= 'a' && p.s[j] <= 'z' || p.s[j] >= 'A' && p.s[j] <= 'Z' || p.s[j] >= '0' && p.s[j] <= '9') {
		j++
	}
	id := p.s[p.i:j]
	p.i = j
	return id
}

func (p *tlaParser) str() (string, error) {
	p.ws()
	j := p.i + 1
	for j < len(p.s) && p.s[j] != '"' {
		if p.s[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(p.s) {
		return "", errors.New("unterminated string")
	}
	s, err := strconv.Unquote(p.s[p.i : j+1])
	p.i = j + 1
	return s, err
}

func (p *tlaParser) value() (value, error) {
	p.ws()
	if p.i >= len(p.s) {
		return value{}, errors.New("value expected")
	}
	switch c := p.s[p.i]; {
	case c == '"':
		s, err := p.str()
		return value{kind: 's', s: s}, err
	case c >= '0' && c <= '9' || c == '-':
		j := p.i + 1
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(p.s[p.i:j])
		p.i = j
		return value{kind: 'i', i: n}, err
	case p.eat("<<"):
		return p.list('q', ">>")
	case p.eat("{"):
		return p.list('S', "}")
	case p.eat("["):
		v := value{kind: 'r', rec: map[string]value{}}
		for {
			p.ws()
			var key string
			if p.i < len(p.s) && p.s[p.i] == '"' {
				k, err := p.str()
				if err != nil {
					return v, err
				}
				key = k
			} else {
				key = p.ident()
			}
			if key == "" || !p.eat("|->") {
				return v, errors.New("`field |-> value` expected")
			}
			e, err := p.value()
			if err != nil {
				return v, err
			}
			v.rec[key] = e
			if p.eat("]") {
				return v, nil
			}
			if !p.eat(",") {
				return v, errors.New("`,` or `]` expected")
			}
		}
	case p.eat("("):
		// a function over strings printed as (k1 :> v1 @@ k2 :> v2)
		v := value{kind: 'r', rec: map[string]value{}}
		for {
			k, err := p.value()
			if err != nil {
				return v, err
			}
			if k.kind != 's' || !p.eat(":>") {
				return v, errors.New("`\"key\" :> value` expected")
			}
			e, err := p.value()
			if err != nil {
				return v, err
			}
			v.rec[k.s] = e
			if p.eat(")") {
				return v, nil
			}
			if !p.eat("@@") {
				return v, errors.New("`@@` or `)` expected")
			}
		}
	default:
		switch id := p.ident(); id {
		case "TRUE", "FALSE":
			return value{kind: 'b', b: id == "TRUE"}, nil
		}
		return value{}, fmt.Errorf("unexpected %q", p.s[p.i:min(len(p.s), p.i+10)])
	}
}

// list reads the elements of a sequence (kind 'q', closed by ">>") or a
// set (kind 'S', closed by "}") whose opening was just read.
func (p *tlaParser) list(kind byte, closing string) (value, error) {
	v := value{kind: kind}
	if p.eat(closing) {
		return v, nil
	}
	for {
		e, err := p.value()
		if err != nil {
			return v, err
		}
		v.seq = append(v.seq, e)
		if p.eat(closing) {
			return v, nil
		}
		if !p.eat(",") {
			return v, fmt.Errorf("`,` or `%s` expected", closing)
		}
	}
}

// fromValues maps TLC's variables onto the model's State.
func fromValues(vars map[string]value, cfg Config) (State, error) {
	want := []string{"msgs", "taken", "lease", "runs", "reqs", "consumed", "liveAbandoned", "given", "steered", "pc", "hold", "plan", "run", "nextHolder"}
	for _, k := range want {
		if _, ok := vars[k]; !ok {
			return State{}, fmt.Errorf("variable %s missing", k)
		}
	}
	if len(vars) != len(want) {
		return State{}, fmt.Errorf("%d variables, the model has %d", len(vars), len(want))
	}
	var err error
	small := func(v value) uint8 {
		if v.kind != 'i' || v.i < 0 || v.i > 255 {
			if err == nil {
				err = fmt.Errorf("%v is not a small natural", v)
			}
			return 0
		}
		return uint8(v.i)
	}
	boolean := func(v value) bool {
		if v.kind != 'b' && err == nil {
			err = fmt.Errorf("%v is not a boolean", v)
		}
		return v.b
	}
	field := func(v value, k string) value {
		if v.kind != 'r' {
			if err == nil {
				err = fmt.Errorf("%v is not a record", v)
			}
			return value{}
		}
		f, ok := v.rec[k]
		if !ok && err == nil {
			err = fmt.Errorf("record has no field %s", k)
		}
		return f
	}
	enum := func(v value, names []string) uint8 {
		i := slices.Index(names, v.s)
		if v.kind != 's' || i < 0 {
			if err == nil {
				err = fmt.Errorf("%v is not one of %v", v, names)
			}
			return 0
		}
		return uint8(i)
	}
	seq := func(v value) []value {
		if v.kind != 'q' && !(v.kind == 'r' && len(v.rec) == 0) && err == nil {
			err = fmt.Errorf("%v is not a sequence", v)
		}
		return v.seq
	}
	s := State{
		Msgs: small(vars["msgs"]), Taken: small(vars["taken"]),
		Lease:         Lease{Holder: small(field(vars["lease"], "holder")), Expired: boolean(field(vars["lease"], "expired"))},
		LiveAbandoned: boolean(vars["liveAbandoned"]),
		NextHolder:    small(vars["nextHolder"]),
	}
	for _, r := range seq(vars["runs"]) {
		s.Runs = append(s.Runs, Run{Holder: small(field(r, "holder")), Prompt: small(field(r, "prompt")), State: RunState(enum(field(r, "state"), runStateNames[:]))})
	}
	for _, q := range seq(vars["reqs"]) {
		s.Reqs = append(s.Reqs, Req{Run: small(field(q, "run")), State: ReqState(enum(field(q, "state"), reqStateNames[:])), Answer: small(field(q, "answer"))})
	}
	for _, c := range seq(vars["consumed"]) {
		s.Consumed = append(s.Consumed, small(c))
	}
	if len(s.Consumed) != cfg.MaxMsgs && err == nil {
		err = fmt.Errorf("consumed has %d elements, MaxMsgs is %d", len(s.Consumed), cfg.MaxMsgs)
	}
	for _, g := range seq(vars["given"]) {
		s.Given = append(s.Given, small(g))
	}
	if len(s.Given) != cfg.MaxMsgs && err == nil {
		err = fmt.Errorf("given has %d elements, MaxMsgs is %d", len(s.Given), cfg.MaxMsgs)
	}
	if v := vars["steered"]; v.kind != 'S' && err == nil {
		err = fmt.Errorf("steered: %v is not a set", v)
	}
	for _, x := range vars["steered"].seq {
		if x.kind != 'q' || len(x.seq) != 2 {
			if err == nil {
				err = fmt.Errorf("steered: %v is not a pair <<run, msg>>", x)
			}
			continue
		}
		s.Steered = append(s.Steered, Pair{Run: small(x.seq[0]), Msg: small(x.seq[1])})
	}
	sortPairs(s.Steered)
	for _, name := range cfg.Procs {
		s.Procs = append(s.Procs, Proc{
			PC:   PC(enum(field(vars["pc"], name), pcNames[:])),
			Hold: small(field(vars["hold"], name)),
			Plan: Plan{
				Kind: PlanKind(enum(field(field(vars["plan"], name), "kind"), planKindNames[:])),
				Msg:  small(field(field(vars["plan"], name), "msg")),
				Req:  small(field(field(vars["plan"], name), "req")),
			},
			Run: small(field(vars["run"], name)),
		})
	}
	for _, k := range []string{"pc", "hold", "plan", "run"} {
		if v := vars[k]; v.kind == 'r' && len(v.rec) != len(cfg.Procs) && err == nil {
			err = fmt.Errorf("%s has %d processes, the cfg %d", k, len(v.rec), len(cfg.Procs))
		}
	}
	return s, err
}
