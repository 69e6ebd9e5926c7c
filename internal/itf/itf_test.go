package itf

import (
	"encoding/json"
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
	require.NoError(t, Validate([]byte(`{"vars":["x"],"states":[{"x":{"#map":[[1,-9007199254740991]]}}]}`)))
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
		// pass 13's mutants 20 (a #map pair's key and value not checked),
		// 21 (a #map entry of three accepted) and 22 (integers below
		// -(2^53-1) accepted):
		"map value null":  `{"vars":["x"],"states":[{"x":{"#map":[[1,null]]}}]}`,
		"map of triples":  `{"vars":["x"],"states":[{"x":{"#map":[[1,2,3]]}}]}`,
		"too small":       `{"vars":["x"],"states":[{"x":-9007199254740992}]}`,
		"map key a float": `{"vars":["x"],"states":[{"x":{"#map":[[1.5,2]]}}]}`,
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

// TestReadRefusesMalformedValues: Read refuses an integer that is not one
// and a #map entry that is not a [key, value] pair (catches pass 13's
// mutants 15: a fraction read as Int(0), and 16: a #map entry of three).
func TestReadRefusesMalformedValues(t *testing.T) {
	for _, bad := range []string{
		`{"vars": ["v"], "states": [{"v": 1.5}]}`,
		`{"vars": ["v"], "states": [{"v": {"#map": [[1, 2, 3]]}}]}`,
	} {
		_, err := Read([]byte(bad))
		require.ErrorIs(t, err, ErrFormat, bad)
	}
}

// TestEqualCountsElements: values with more elements are not equal to
// values that hold only some of them (catches pass 13's mutant 19: Equal
// compares only the first value's elements).
func TestEqualCountsElements(t *testing.T) {
	for _, c := range [][2]Value{
		{Set(Int(1)), Set(Int(1), Int(2))},
		{Seq(Int(1)), Seq(Int(1), Int(2))},
		{Rec([]string{"a"}, []Value{Int(1)}), Rec([]string{"a", "b"}, []Value{Int(1), Int(2)})},
		{Map([]Value{Str("p1")}, []Value{Int(0)}), Map([]Value{Str("p1"), Str("p2")}, []Value{Int(0), Int(1)})},
	} {
		require.False(t, Equal(c[0], c[1]), "%s and %s", c[0].TLA(), c[1].TLA())
	}
}

// TestReadLosesNoField: a record read without error keeps every field the
// file gave it, a "#map" after another field included (catches pass 13's
// mutant 18: a "#map" key anywhere makes the value a function, and the
// fields before it are lost).
func TestReadLosesNoField(t *testing.T) {
	tr, err := Read([]byte(`{"vars": ["v"], "states": [{"v": {"a": {"#bigint": "1"}, "#map": []}}]}`))
	if err != nil {
		require.ErrorIs(t, err, ErrFormat)
		return
	}
	v := tr.States[0].Values["v"]
	a, ok := v.Field("a")
	require.True(t, ok, "field a lost: read %s", v.TLA())
	require.True(t, Equal(Int(1), a), "field a read as %s", a.TLA())
}

// TestTraceStatesCarryTheirIndex: each state's #meta holds its index, what
// the explorer's own metadata joins (catches pass 13's mutant 23: the index
// dropped).
func TestTraceStatesCarryTheirIndex(t *testing.T) {
	tr := Trace{Vars: []string{"x"}, States: []State{
		{Values: map[string]Value{"x": Int(0)}},
		{Meta: map[string]any{"action": "Inc"}, Values: map[string]Value{"x": Int(1)}},
	}}
	b, err := tr.MarshalJSON()
	require.NoError(t, err)
	var doc struct {
		States []struct {
			Meta map[string]any `json:"#meta"`
		} `json:"states"`
	}
	require.NoError(t, json.Unmarshal(b, &doc), string(b))
	require.Len(t, doc.States, 2)
	for i, s := range doc.States {
		require.EqualValues(t, i, s.Meta["index"], "state %d's #meta: %v", i, s.Meta)
	}
	require.Equal(t, "Inc", doc.States[1].Meta["action"])
}

// TestTLAEmptyFunction: the empty function is rendered as TLC prints it,
// <<>> (catches pass 13's mutant 26: rendered as "()").
func TestTLAEmptyFunction(t *testing.T) {
	require.Equal(t, "<<>>", Map(nil, nil).TLA())
	require.Equal(t, `[f |-> <<>>]`, Rec([]string{"f"}, []Value{Map(nil, nil)}).TLA())
}
