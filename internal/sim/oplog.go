package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// Log is a seeded execution written down: its configuration and the
// operations it applied, in order. Replaying it (Config, which sets Ops)
// makes the same execution: the same trace lines and the same verdict.
// Shrinking a failure works on Logs.
type Log struct {
	Seed     uint64 // names the holders; the operations come from Ops
	Procs    int
	Threads  int
	Messages int
	ClaimTTL time.Duration
	Unfenced core.Fences // the fences switched off
	// Interleave, Faults and Mutants are the execution's Config's: a step
	// may pause between its transactions, storage faults are drawn from the
	// seed, code defects are switched on.
	Interleave bool
	Faults     float64
	Mutants    Mutants
	// NoQuiesce: the operations are the whole execution; Run adds no
	// quiescence after them (a log taken after Run holds its quiescence
	// as operations).
	NoQuiesce bool
	Ops       []Op
}

// Log returns the execution so far as a Log. Once quiescence has begun,
// the log holds it as operations and sets NoQuiesce; but a log whose
// quiescence broke liveness keeps the scheduled operations only, so that
// its replay quiesces and checks liveness again.
func (s *Seeded) Log() Log {
	c := s.cfg
	l := Log{Seed: c.Seed, Procs: c.Procs, Threads: c.Threads, Messages: c.Messages, ClaimTTL: c.ClaimTTL,
		Unfenced: c.Unfenced, Interleave: c.Interleave, Faults: c.Faults, Mutants: c.Mutants,
		NoQuiesce: c.NoQuiesce, Ops: s.Ops()}
	switch {
	case s.liveness:
		l.Ops, l.NoQuiesce = l.Ops[:s.quiesceAt], false
	case s.quiesceAt >= 0:
		l.NoQuiesce = true
	}
	return l
}

// Config returns the configuration that replays the log. Ops is never nil
// in it, so Run applies exactly the log's operations (none for an empty
// log).
func (l Log) Config() Config {
	ops := append([]Op{}, l.Ops...)
	return Config{Seed: l.Seed, Procs: l.Procs, Threads: l.Threads, Messages: l.Messages, ClaimTTL: l.ClaimTTL,
		Unfenced: l.Unfenced, Interleave: l.Interleave, Faults: l.Faults, Mutants: l.Mutants,
		NoQuiesce: l.NoQuiesce, Ops: ops}
}

// ErrBadLog: a log file is malformed. The error names the file and line.
var ErrBadLog = errors.New("bad operation log")

// The log's file format is ndjson: a header line with the configuration,
// then one operation a line, with processes and threads named as in
// traces (p1, t1):
//
//	{"seed":7,"procs":3,"threads":2,"messages":4,"ttl":"10s","unfenced":true,"quiesce":false}
//	{"op":"post","thread":"t1"}
//	{"op":"step","proc":"p1","thread":"t1","asks":1}
//	{"op":"time","by":"4s"}
type logHeader struct {
	Seed       uint64    `json:"seed"`
	Procs      int       `json:"procs"`
	Threads    int       `json:"threads"`
	Messages   int       `json:"messages"`
	TTL        string    `json:"ttl"`
	Unfenced   logFences `json:"unfenced"`
	Interleave bool      `json:"interleave,omitempty"`
	Faults     float64   `json:"faults,omitempty"`
	Mutants    []string  `json:"mutants,omitempty"` // the code mutants' names (MutantNames)
	Quiesce    *bool     `json:"quiesce,omitempty"` // false: no quiescence after the operations
}

// logFences is a header's "unfenced": true for every fence off, false for
// none, and otherwise the names of the fences off ("start,reply").
type logFences core.Fences

// MarshalJSON writes the fences off.
func (f logFences) MarshalJSON() ([]byte, error) {
	switch core.Fences(f) {
	case core.Fences{}:
		return []byte("false"), nil
	case core.AllFences():
		return []byte("true"), nil
	}
	return json.Marshal(core.Fences(f).String())
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *logFences) UnmarshalJSON(b []byte) error {
	var all bool
	if err := json.Unmarshal(b, &all); err == nil {
		*f = logFences{}
		if all {
			*f = logFences(core.AllFences())
		}
		return nil
	}
	var names string
	if err := json.Unmarshal(b, &names); err != nil {
		return fmt.Errorf("unfenced %s: want true, false or the names of fences", b)
	}
	off, err := core.ParseFences(names)
	*f = logFences(off)
	return err
}

type logOp struct {
	Op     string `json:"op"`
	Proc   string `json:"proc,omitempty"`
	Thread string `json:"thread,omitempty"`
	Asks   int    `json:"asks,omitempty"`
	Steers int    `json:"steers,omitempty"`
	By     string `json:"by,omitempty"`
}

// WriteLog writes l in the log's file format.
func WriteLog(w io.Writer, l Log) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(logHeader{Seed: l.Seed, Procs: l.Procs, Threads: l.Threads, Messages: l.Messages,
		TTL: l.ClaimTTL.String(), Unfenced: logFences(l.Unfenced), Interleave: l.Interleave, Faults: l.Faults,
		Mutants: l.Mutants.names(), Quiesce: quiesce(l.NoQuiesce)}); err != nil {
		return err
	}
	for _, op := range l.Ops {
		lo := logOp{Op: op.Kind.String()}
		switch op.Kind {
		case OpPost:
			lo.Thread = fmt.Sprintf("t%d", op.Thread+1)
		case OpStep:
			lo.Proc, lo.Thread, lo.Asks, lo.Steers = fmt.Sprintf("p%d", op.Proc+1), fmt.Sprintf("t%d", op.Thread+1), op.Asks, op.Steers
		case OpTime:
			lo.By = op.By.String()
		case OpSkew:
			lo.Proc, lo.By = fmt.Sprintf("p%d", op.Proc+1), op.By.String()
		default:
			lo.Proc = fmt.Sprintf("p%d", op.Proc+1)
		}
		if err := enc.Encode(lo); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadLog reads a log in the file format WriteLog writes, naming name in
// errors (ErrBadLog, as name:line: reason).
func ReadLog(r io.Reader, name string) (Log, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	bad := func(n int, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s", ErrBadLog, name, n, fmt.Sprintf(format, args...))
	}
	var l Log
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if n == 1 {
			var h logHeader
			if err := dec.Decode(&h); err != nil {
				return Log{}, bad(n, "header: %v", err)
			}
			ttl, err := time.ParseDuration(h.TTL)
			if err != nil || ttl <= 0 {
				return Log{}, bad(n, "header: ttl %q is not a positive duration", h.TTL)
			}
			if h.Procs < 1 || h.Threads < 1 || h.Messages < 0 {
				return Log{}, bad(n, "header: procs %d, threads %d, messages %d: procs and threads must be positive", h.Procs, h.Threads, h.Messages)
			}
			if h.Faults < 0 || h.Faults > 1 {
				return Log{}, bad(n, "header: faults %v is not a probability", h.Faults)
			}
			l = Log{Seed: h.Seed, Procs: h.Procs, Threads: h.Threads, Messages: h.Messages, ClaimTTL: ttl, Unfenced: core.Fences(h.Unfenced),
				Interleave: h.Interleave, Faults: h.Faults, NoQuiesce: h.Quiesce != nil && !*h.Quiesce, Ops: []Op{}}
			for _, m := range h.Mutants {
				if !l.Mutants.set(m) {
					return Log{}, bad(n, "header: unknown mutant %q", m)
				}
			}
			continue
		}
		var lo logOp
		if err := dec.Decode(&lo); err != nil {
			return Log{}, bad(n, "%v", err)
		}
		op, err := parseOp(lo, l.Procs, l.Threads)
		if err != nil {
			return Log{}, bad(n, "%v", err)
		}
		l.Ops = append(l.Ops, op)
	}
	if err := sc.Err(); err != nil {
		return Log{}, fmt.Errorf("%w: %s:%d: %v", ErrBadLog, name, n+1, err)
	}
	if n == 0 {
		return Log{}, bad(1, "empty: no header")
	}
	return l, nil
}

func quiesce(no bool) *bool {
	if !no {
		return nil
	}
	f := false
	return &f
}

func parseOp(lo logOp, procs, threads int) (Op, error) {
	kind := OpKind(-1)
	for k := range numOps {
		if k.String() == lo.Op {
			kind = k
		}
	}
	if kind < 0 {
		return Op{}, fmt.Errorf("unknown op %q", lo.Op)
	}
	op := Op{Kind: kind, Asks: lo.Asks, Steers: lo.Steers}
	index := func(field, v, prefix string, count int) (int, error) {
		i, err := strconv.Atoi(strings.TrimPrefix(v, prefix))
		if !strings.HasPrefix(v, prefix) || err != nil || i < 1 || i > count {
			return 0, fmt.Errorf("%s op: %s %q is not one of %s1..%s%d", lo.Op, field, v, prefix, prefix, count)
		}
		return i - 1, nil
	}
	var err error
	needProc := kind != OpPost && kind != OpTime
	needThread := kind == OpPost || kind == OpStep
	needBy := kind == OpTime || kind == OpSkew
	switch {
	case needProc != (lo.Proc != ""):
		return Op{}, fmt.Errorf("%s op: proc %q given or missing wrongly", lo.Op, lo.Proc)
	case needThread != (lo.Thread != ""):
		return Op{}, fmt.Errorf("%s op: thread %q given or missing wrongly", lo.Op, lo.Thread)
	case needBy != (lo.By != ""):
		return Op{}, fmt.Errorf("%s op: by %q given or missing wrongly", lo.Op, lo.By)
	case lo.Asks < 0 || lo.Asks > 0 && kind != OpStep:
		return Op{}, fmt.Errorf("%s op: asks %d", lo.Op, lo.Asks)
	case lo.Steers < 0 || lo.Steers > 0 && kind != OpStep:
		return Op{}, fmt.Errorf("%s op: steers %d", lo.Op, lo.Steers)
	}
	if needProc {
		if op.Proc, err = index("proc", lo.Proc, "p", procs); err != nil {
			return Op{}, err
		}
	}
	if needThread {
		if op.Thread, err = index("thread", lo.Thread, "t", threads); err != nil {
			return Op{}, err
		}
	}
	if needBy {
		if op.By, err = time.ParseDuration(lo.By); err != nil || op.By <= 0 {
			return Op{}, fmt.Errorf("%s op: by %q is not a positive duration", lo.Op, lo.By)
		}
	}
	return op, nil
}

// Ops returns the operations Run has applied so far, in order (the
// quiescence's included).
func (s *Seeded) Ops() []Op { return append([]Op(nil), s.log...) }

// normal clears what the operation does not read, so that a log names
// only what matters: a post's process, a time jump's process and thread,
// the thread of a renewal, a skew or a crash.
func (o Op) normal() Op {
	switch o.Kind {
	case OpPost:
		o.Proc = 0
	case OpTime:
		o.Proc, o.Thread = 0, 0
	case OpRenew, OpSkew, OpCrash, OpYield:
		o.Thread = 0
	}
	if o.Kind != OpStep {
		o.Asks, o.Steers = 0, 0
	}
	return o
}
