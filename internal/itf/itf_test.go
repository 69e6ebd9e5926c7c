package itf

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValueEncodings(t *testing.T) {
	v := Rec([]string{"n", "s", "b", "seq", "set", "tup", "fn"}, []Value{
		Int(-42), Str("a\"b"), Bool(true), Seq(Int(1)), Set(Str("x")), Tup(Int(1), Str("y")),
		Map([]Value{Str("p1")}, []Value{Int(0)}),
	})
	b, err := v.MarshalJSON()
	require.NoError(t, err)
	require.JSONEq(t, `{"n":{"#bigint":"-42"},"s":"a\"b","b":true,"seq":[{"#bigint":"1"}],"set":{"#set":["x"]},
		"tup":{"#tup":[{"#bigint":"1"},"y"]},"fn":{"#map":[["p1",{"#bigint":"0"}]]}}`, string(b))
	require.Equal(t, `[n |-> -42, s |-> "a\"b", b |-> TRUE, seq |-> <<1>>, set |-> {"x"}, tup |-> <<1, "y">>, fn |-> ("p1" :> 0)]`, v.TLA())
	_, err = Rec([]string{"#x"}, []Value{Int(1)}).MarshalJSON()
	require.Error(t, err, "a record field may not start with #")
}

func TestTraceIsValid(t *testing.T) {
	tr := Trace{Meta: map[string]any{"source": "x"}, Vars: []string{"x", "f"}, States: []State{
		{Values: map[string]Value{"x": Int(0), "f": Map(nil, nil)}},
		{Meta: map[string]any{"action": "Inc"}, Values: map[string]Value{"x": Int(1), "f": Map([]Value{Int(1)}, []Value{Bool(false)})}},
	}}
	b, err := tr.MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, Validate(b), string(b))
	tr.States[1].Values = map[string]Value{"x": Int(1)}
	_, err = tr.MarshalJSON()
	require.Error(t, err, "a state without every variable")
}

// Validate enforces each of the format's rules: each of these breaks one.
func TestValidateRejects(t *testing.T) {
	ok := `{"#meta":{},"vars":["x"],"states":[{"#meta":{"index":0},"x":1}]}`
	require.NoError(t, Validate([]byte(ok)))
	require.NoError(t, Validate([]byte(`{"vars":["x"],"params":["N"],"states":[{"x":{"#bigint":"-7"},"N":3},{"x":2}],"loop":1}`)))
	for name, doc := range map[string]string{
		"not an object":         `[]`,
		"no vars":               `{"states":[]}`,
		"vars not strings":      `{"vars":[1],"states":[]}`,
		"duplicate var":         `{"vars":["x","x"],"states":[]}`,
		"unknown field":         `{"vars":[],"states":[],"extra":1}`,
		"meta not object":       `{"#meta":1,"vars":[],"states":[]}`,
		"states not array":      `{"vars":[],"states":{}}`,
		"state not object":      `{"vars":[],"states":[1]}`,
		"missing var":           `{"vars":["x"],"states":[{}]}`,
		"undeclared var":        `{"vars":[],"states":[{"y":1}]}`,
		"param past state 0":    `{"vars":["x"],"params":["N"],"states":[{"x":1,"N":1},{"x":1,"N":1}]}`,
		"null":                  `{"vars":["x"],"states":[{"x":null}]}`,
		"fraction":              `{"vars":["x"],"states":[{"x":1.5}]}`,
		"too big":               `{"vars":["x"],"states":[{"x":9007199254740992}]}`,
		"bigint not digits":     `{"vars":["x"],"states":[{"x":{"#bigint":"12a"}}]}`,
		"bigint a number":       `{"vars":["x"],"states":[{"x":{"#bigint":12}}]}`,
		"tag with other fields": `{"vars":["x"],"states":[{"x":{"#set":[],"y":1}}]}`,
		"set not array":         `{"vars":["x"],"states":[{"x":{"#set":1}}]}`,
		"map not pairs":         `{"vars":["x"],"states":[{"x":{"#map":[[1]]}}]}`,
		"record field #":        `{"vars":["x"],"states":[{"x":{"#x":1}}]}`,
		"bad nested":            `{"vars":["x"],"states":[{"x":[{"a":[null]}]}]}`,
		"loop out of range":     `{"vars":[],"states":[{}],"loop":1}`,
		"two documents":         ok + ok,
		"state meta not object": `{"vars":[],"states":[{"#meta":[]}]}`,
	} {
		require.ErrorIs(t, Validate([]byte(doc)), ErrFormat, name)
	}
}

// Read gives back what MarshalJSON wrote, value for value, and Equal
// tells values apart by kind and content, records and sets whatever their
// order.
func TestReadRoundTrip(t *testing.T) {
	v := Rec([]string{"n", "s", "b", "seq", "set", "tup", "fn", "empty"}, []Value{
		Int(-42), Str("a\"b"), Bool(true), Seq(Int(1), Seq()), Set(Str("x"), Str("y")), Tup(Int(1), Str("y")),
		Map([]Value{Str("p1"), Str("p2")}, []Value{Int(0), Rec([]string{"k"}, []Value{Int(3)})}), Seq(),
	})
	tr := Trace{Meta: map[string]any{"source": "x"}, Vars: []string{"v", "w"}, States: []State{
		{Values: map[string]Value{"v": v, "w": Set()}},
		{Meta: map[string]any{"action": "Next"}, Values: map[string]Value{"v": Int(1 << 60), "w": Map(nil, nil)}},
	}}
	b, err := tr.MarshalJSON()
	require.NoError(t, err)
	back, err := Read(b)
	require.NoError(t, err)
	require.Equal(t, tr.Vars, back.Vars)
	require.Len(t, back.States, 2)
	for i, s := range tr.States {
		for name, want := range s.Values {
			require.True(t, Equal(want, back.States[i].Values[name]), "state %d %s: %s, read back %s", i, name, want.TLA(), back.States[i].Values[name].TLA())
		}
	}
	require.Equal(t, "Next", back.States[1].Meta["action"])

	require.True(t, Equal(Set(Int(1), Int(2)), Set(Int(2), Int(1))))
	require.True(t, Equal(Rec([]string{"a", "b"}, []Value{Int(1), Int(2)}), Rec([]string{"b", "a"}, []Value{Int(2), Int(1)})))
	for _, c := range [][2]Value{
		{Int(1), Int(2)}, {Int(1), Str("1")}, {Seq(Int(1), Int(2)), Seq(Int(2), Int(1))}, {Tup(Int(1)), Seq(Int(1))},
		{Map([]Value{Str("p1")}, []Value{Int(0)}), Map([]Value{Str("p2")}, []Value{Int(0)})},
		{Rec([]string{"a"}, []Value{Int(1)}), Rec([]string{"b"}, []Value{Int(1)})},
	} {
		require.False(t, Equal(c[0], c[1]), "%s and %s", c[0].TLA(), c[1].TLA())
	}
	for _, bad := range []string{``, `[]`, `{"states": [{"v": {"#bigint": "x"}}]}`, `{"states": [{"v": {"#map": [[1]]}}]}`, `{"states": [{"v": {"#set": [], "a": 1}}]}`} {
		_, err := Read([]byte(bad))
		require.ErrorIs(t, err, ErrFormat, bad)
	}
}
