package core

import (
	"fmt"
	"strings"
)

// Fences says which writes check, inside their own transaction, that the
// claim's holder has the lease: the specification's constants FenceStart,
// FenceReply and FenceAbandon. Every fence is on in a Workspace unless a
// test switches some off with WithFencesForTesting: a deliberate mutant,
// which the checks must catch. No deployment setting reaches it.
//
// As text (String, ParseFences, Set) a set of fences is the names of the
// fences in it, "start", "reply" and "abandon", separated by commas, or
// "none"; the tools' flags, the trace fixtures' fences files and TLC's
// TRACE_FENCES use these names.
type Fences struct {
	Start   bool // RunStart: consumes the run's prompt (FenceStart)
	Reply   bool // Reply: consumes the answer (FenceReply)
	Abandon bool // Abandon: ends an earlier holder's run (FenceAbandon)
}

// AllFences returns every fence on: the only setting a deployment uses.
func AllFences() Fences { return Fences{Start: true, Reply: true, Abandon: true} }

// fenceNames are the fences' names, in the order String writes them.
var fenceNames = [...]string{"start", "reply", "abandon"}

// fields returns the fences' switches, in fenceNames' order.
func (f *Fences) fields() [len(fenceNames)]*bool { return [...]*bool{&f.Start, &f.Reply, &f.Abandon} }

// Without returns f with the fences of g off.
func (f Fences) Without(g Fences) Fences {
	return Fences{Start: f.Start && !g.Start, Reply: f.Reply && !g.Reply, Abandon: f.Abandon && !g.Abandon}
}

// String names the fences in f, as ParseFences reads them: "start",
// "reply" and "abandon", in that order, separated by commas, or "none".
func (f Fences) String() string {
	var on []string
	for i, b := range f.fields() {
		if *b {
			on = append(on, fenceNames[i])
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

// ParseFences reads a set of fences: names among "start", "reply" and
// "abandon", separated by commas or white space; or "all" or "none"
// alone; "" is none. An unknown name is an error wrapping
// ErrInvalidArgument.
func ParseFences(s string) (Fences, error) {
	names := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	var f Fences
	if len(names) == 1 {
		switch names[0] {
		case "none":
			return f, nil
		case "all":
			return AllFences(), nil
		}
	}
	fields := f.fields()
next:
	for _, name := range names {
		for i, known := range fenceNames {
			if name == known {
				*fields[i] = true
				continue next
			}
		}
		return Fences{}, fmt.Errorf("%w: unknown fence %q (want %s, or all or none alone)", ErrInvalidArgument, name, strings.Join(fenceNames[:], ", "))
	}
	return f, nil
}

// Set reads s as ParseFences does, so that a *Fences is a flag.Value.
func (f *Fences) Set(s string) error {
	g, err := ParseFences(s)
	if err != nil {
		return err
	}
	*f = g
	return nil
}
