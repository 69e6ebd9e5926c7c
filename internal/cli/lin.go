package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// linTally counts porcupine's verdicts on the concurrent executions'
// histories.
type linTally struct {
	histories, ops       int
	ok, illegal, unknown int
	elapsed              time.Duration
	first                string
	last                 string // the last illegal history's error
}

// check runs porcupine on one concurrent execution's history: its lease
// and fenced-consume operations, with their call and return times.
//
// With visOut it also draws the history, whatever the verdict, to visOut:
// the trace explorer links a concurrent execution's page to it.
func (l *linTally) check(res sim.ConcurrentResult, timeout time.Duration, htmlOut, visOut string) error {
	ops := tracecheck.OperationsFromTrace(res.Lines)
	if visOut != "" {
		model := tracecheck.LeaseModel()
		_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
		if err := porcupine.VisualizePath(model, info, visOut); err != nil {
			return err
		}
	}
	l.histories++
	l.ops += len(ops)
	html := ""
	if l.first == "" {
		html = htmlOut // made, with its directory, only for a history that is not linearizable
	}
	start := time.Now()
	_, err := tracecheck.CheckLinearizable(ops, timeout, html)
	l.elapsed += time.Since(start)
	switch {
	case err == nil:
		l.ok++
	case errors.Is(err, tracecheck.ErrNotLinearizable):
		l.illegal++
		l.last = err.Error()
		if l.first == "" {
			l.first = err.Error()
		}
	case errors.Is(err, tracecheck.ErrLinearizabilityUnknown):
		l.unknown++
	default:
		return err
	}
	return nil
}

func (l *linTally) summary() string {
	if l.histories == 0 {
		return "not run (no concurrent executions)"
	}
	verdict := "linearizable"
	switch {
	case l.illegal > 0:
		verdict = fmt.Sprintf("NOT LINEARIZABLE: %d of %d histories", l.illegal, l.histories)
	case l.unknown > 0:
		verdict = fmt.Sprintf("INCONCLUSIVE: %d of %d histories timed out", l.unknown, l.histories)
	}
	return fmt.Sprintf("%s (%d histories, %d operations, %v)", verdict, l.histories, l.ops, l.elapsed.Round(time.Millisecond))
}
