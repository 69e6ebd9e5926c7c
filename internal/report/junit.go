package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// node is one element of an XML document, for CheckJUnit.
type node struct {
	name     string
	attrs    map[string]string
	children []*node
	text     string
}

func parseXML(b []byte) (*node, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	var stack []*node
	var root *node
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n := &node{name: t.Name.Local, attrs: map[string]string{}}
			for _, a := range t.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			if len(stack) == 0 {
				if root != nil {
					return nil, errors.New("more than one root element")
				}
				root = n
			} else {
				p := stack[len(stack)-1]
				p.children = append(p.children, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(t)
			}
		}
	}
	if root == nil {
		return nil, errors.New("no root element")
	}
	return root, nil
}

// CheckJUnit checks b against the JUnit schema the CI reporters accept
// (the rules of the widely used junit-10.xsd and what GitHub's
// test-reporter and GitLab's junit report read): a testsuites root of
// testsuite elements, each with a name and its counts; testcase elements
// with name and classname; at most one failure, error or skipped per
// case, and only system-out and system-err besides; non-negative decimal
// times; and counts that add up, per suite and in all.
func CheckJUnit(b []byte) error {
	root, err := parseXML(b)
	if err != nil {
		return fmt.Errorf("not XML: %w", err)
	}
	if root.name != "testsuites" {
		return fmt.Errorf("root is <%s>, not <testsuites>", root.name)
	}
	var total counts
	for _, s := range root.children {
		if s.name != "testsuite" {
			return fmt.Errorf("<testsuites> holds <%s>: only <testsuite>", s.name)
		}
		c, err := checkSuite(s)
		if err != nil {
			return err
		}
		total.tests, total.failures, total.errors, total.skipped = total.tests+c.tests, total.failures+c.failures, total.errors+c.errors, total.skipped+c.skipped
	}
	return checkCounts("<testsuites>", root, total, false)
}

func checkSuite(s *node) (counts, error) {
	name, ok := s.attrs["name"]
	if !ok || name == "" {
		return counts{}, errors.New("a <testsuite> has no name")
	}
	where := fmt.Sprintf("<testsuite name=%q>", name)
	var c counts
	for _, tc := range s.children {
		switch tc.name {
		case "properties", "system-out", "system-err":
			continue
		case "testcase":
		default:
			return c, fmt.Errorf("%s holds <%s>", where, tc.name)
		}
		c.tests++
		if err := checkCase(where, tc, &c); err != nil {
			return c, err
		}
	}
	return c, checkCounts(where, s, c, true)
}

func checkCase(where string, tc *node, c *counts) error {
	for _, a := range []string{"name", "classname"} {
		if tc.attrs[a] == "" {
			return fmt.Errorf("%s: a <testcase> has no %s", where, a)
		}
	}
	where = fmt.Sprintf("%s <testcase name=%q>", where, tc.attrs["name"])
	if err := checkTime(where, tc, false); err != nil {
		return err
	}
	outcomes := 0
	for _, ch := range tc.children {
		switch ch.name {
		case "failure":
			c.failures++
		case "error":
			c.errors++
		case "skipped":
			c.skipped++
		case "system-out", "system-err":
			continue
		default:
			return fmt.Errorf("%s holds <%s>", where, ch.name)
		}
		if outcomes++; outcomes > 1 {
			return fmt.Errorf("%s has more than one of failure, error and skipped", where)
		}
		if ch.name != "skipped" && ch.attrs["message"] == "" && strings.TrimSpace(ch.text) == "" {
			return fmt.Errorf("%s: its <%s> says nothing (no message, no text)", where, ch.name)
		}
	}
	return nil
}

// checkCounts checks n's tests, failures, errors and skipped attributes
// against c (tests is required of a testsuite) and its time.
func checkCounts(where string, n *node, c counts, required bool) error {
	for _, a := range []struct {
		name string
		want int
	}{{"tests", c.tests}, {"failures", c.failures}, {"errors", c.errors}, {"skipped", c.skipped}} {
		v, ok := n.attrs[a.name]
		if !ok {
			if required && (a.name == "tests") {
				return fmt.Errorf("%s has no %s attribute", where, a.name)
			}
			continue
		}
		got, err := strconv.Atoi(v)
		if err != nil || got < 0 {
			return fmt.Errorf("%s: %s=%q is not a count", where, a.name, v)
		}
		if got != a.want {
			return fmt.Errorf("%s: %s=%d, but it holds %d", where, a.name, got, a.want)
		}
	}
	return checkTime(where, n, false)
}

func checkTime(where string, n *node, required bool) error {
	v, ok := n.attrs["time"]
	if !ok {
		if required {
			return fmt.Errorf("%s has no time", where)
		}
		return nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || strings.ContainsAny(v, "eE") {
		return fmt.Errorf("%s: time=%q is not a non-negative decimal of seconds", where, v)
	}
	return nil
}
