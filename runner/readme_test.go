package runner_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeShowsExample: the runner example in the README, under "Using
// the runner", is ExampleRunner_Run's body as go test compiles and runs
// it, so the README cannot drift from code that works.
func TestReadmeShowsExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	shown := regexp.MustCompile("(?s)## Using the runner\n.*?```go\n(.*?)```\n").FindSubmatch(readme)
	if shown == nil {
		t.Fatal("README.md: no ```go block under \"## Using the runner\"")
	}
	body := regexp.MustCompile("(?s)\nfunc ExampleRunner_Run\\(\\) \\{\n(.*?)\n\\}\n").FindSubmatch(src)
	if body == nil {
		t.Fatal("example_test.go: no func ExampleRunner_Run")
	}
	var want strings.Builder
	for _, line := range strings.Split(string(body[1]), "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
		want.WriteString("\n")
	}
	if got := string(shown[1]); got != want.String() {
		t.Errorf("README.md's runner example is not ExampleRunner_Run's body:\n--- README.md\n%s--- example_test.go\n%s", got, want.String())
	}
}
