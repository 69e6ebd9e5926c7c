package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestMeterRateAndETA(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	var b bytes.Buffer
	m := NewOn(&b, "run", 1000, "executions", c.now)
	c.t = c.t.Add(2 * time.Second)
	m.Add(100)
	require.Equal(t, "run: 100/1000 executions (10.0%), 50/s, ETA 18s", m.Line(c.t))
	require.Contains(t, b.String(), "\rrun: 100/1000 executions (10.0%), 50/s, ETA 18s")

	// Within Every nothing is redrawn; after it, the new count is.
	n := b.Len()
	c.t = c.t.Add(Every / 2)
	m.Add(1)
	require.Equal(t, n, b.Len(), "redrawn within %v", Every)
	c.t = c.t.Add(Every)
	m.Add(1)
	require.Contains(t, b.String()[n:], "102/1000")

	m.Done()
	require.True(t, strings.HasSuffix(b.String(), "\r"), "Done leaves the cursor at the start of a cleared line")
}

func TestMeterOffWhenNotATerminal(t *testing.T) {
	var b bytes.Buffer
	m := New(&b, "run", 10, "executions", time.Now)
	require.Nil(t, m, "a buffer is not a terminal")
	m.Add(5) // a nil Meter is a no-op
	m.Done()
	require.Empty(t, b.String())

	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	require.False(t, IsTerminal(f), "a regular file is not a terminal")
	require.Nil(t, New(f, "run", 10, "executions", time.Now))
}

// A single long unit shows progress: its steps advance the line while no
// unit has finished, redrawn at most every Every of the injected clock.
func TestMeterCountsSteps(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	var b bytes.Buffer
	m := NewOn(&b, "run", 1, "executions", c.now)
	for _, d := range []time.Duration{Every, Every / 2, Every / 2, Every} {
		c.t = c.t.Add(d)
		m.Step(100)
	}
	m.Add(1)
	var drawn []string
	for _, l := range strings.Split(b.String(), "\r")[1:] {
		drawn = append(drawn, strings.TrimSpace(l))
	}
	require.Equal(t, []string{
		"run: 0/1 executions (0.0%); 100 steps, 500/s",
		"run: 0/1 executions (0.0%); 300 steps, 750/s", // the step within Every of the last draw was not drawn
		"run: 0/1 executions (0.0%); 400 steps, 667/s",
	}, drawn, "the steps advance the line within the one execution")
	require.Equal(t, "run: 1/1 executions (100.0%), 2/s; 400 steps, 667/s", m.Line(c.t))
}

// With no total (0: not known), the line is the count and its rate, with
// neither a fraction nor an ETA (mutant of pass 16: a total of 0 shown as
// "/0 ... (NaN%)").
func TestMeterWithoutTotal(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	m := NewOn(&bytes.Buffer{}, "fleet", 0, "messages", c.now)
	c.t = c.t.Add(2 * time.Second)
	m.Add(10)
	require.Equal(t, "fleet: 10 messages, 5/s", m.Line(c.t))
}

// A redrawn line that is shorter than one drawn before it is padded over
// the rest of the widest, and Done blanks the widest line and leaves the
// cursor at its start (mutants of pass 16: no padding, so the old line's
// tail stays on screen; Done clearing nothing).
func TestMeterClearsWhatItDrew(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	var b bytes.Buffer
	m := NewOn(&b, "run", 10, "executions", c.now)
	c.t = c.t.Add(Every)
	m.Add(9)
	c.t = c.t.Add(100 * time.Second)
	m.Add(1)
	drawn := strings.Split(b.String(), "\r")[1:]
	require.Len(t, drawn, 2)
	require.Equal(t, "run: 9/10 executions (90.0%), 45/s, ETA 0s", drawn[0])
	require.Equal(t, "run: 10/10 executions (100.0%), 0/s", strings.TrimRight(drawn[1], " "))
	require.Len(t, drawn[1], len(drawn[0]), "the shorter line covers the longer one")

	b.Reset()
	m.Done()
	require.Equal(t, "\r"+strings.Repeat(" ", len(drawn[0]))+"\r", b.String())
}
