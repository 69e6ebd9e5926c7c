package core_test

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// Every set of fences reads back as String writes it; the names the
// flags, fixtures and TRACE_FENCES use parse to the fences they name.
func TestFencesText(t *testing.T) {
	for _, tc := range []struct {
		text string
		want core.Fences
		out  string // String of want
	}{
		{"all", core.AllFences(), "start,reply,abandon"},
		{"none", core.Fences{}, "none"},
		{"", core.Fences{}, "none"},
		{"start", core.Fences{Start: true}, "start"},
		{"reply,abandon", core.Fences{Reply: true, Abandon: true}, "reply,abandon"},
		{"reply abandon\n", core.Fences{Reply: true, Abandon: true}, "reply,abandon"},
		{"abandon, start", core.Fences{Start: true, Abandon: true}, "start,abandon"},
		{"start,reply,abandon", core.AllFences(), "start,reply,abandon"},
	} {
		got, err := core.ParseFences(tc.text)
		require.NoError(t, err, tc.text)
		require.Equal(t, tc.want, got, tc.text)
		require.Equal(t, tc.out, got.String(), tc.text)
		back, err := core.ParseFences(got.String())
		require.NoError(t, err)
		require.Equal(t, got, back, "%s does not read back", got)
	}
	for _, bad := range []string{"strat", "start,claim", "all,start", "none start", "true"} {
		_, err := core.ParseFences(bad)
		require.ErrorIs(t, err, core.ErrInvalidArgument, bad)
	}
}

func TestFencesWithout(t *testing.T) {
	require.Equal(t, core.Fences{Reply: true}, core.AllFences().Without(core.Fences{Start: true, Abandon: true}))
	require.Equal(t, core.Fences{}, core.AllFences().Without(core.AllFences()))
	require.Equal(t, core.AllFences(), core.AllFences().Without(core.Fences{}))
	require.Equal(t, core.Fences{}, core.Fences{}.Without(core.Fences{Start: true}))
}

// A *Fences is a flag: -fences start,reply.
func TestFencesFlag(t *testing.T) {
	f := core.AllFences()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Var(&f, "fences", "the fences on")
	require.NoError(t, fs.Parse([]string{"-fences", "start,reply"}))
	require.Equal(t, core.Fences{Start: true, Reply: true}, f)
	require.Error(t, fs.Parse([]string{"-fences", "strat"}))
	require.Equal(t, core.Fences{Start: true, Reply: true}, f, "a refused value changed the flag")
}
