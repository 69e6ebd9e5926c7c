package fleet

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportSaysWhatIsGone: the text report does not name a trace file
// as if it were there when the run's directory was removed, and the HTML
// says "none measured" for handovers, as the text does, rather than
// "0 threads: p50 0 ms".
func TestReportSaysWhatIsGone(t *testing.T) {
	rep := &Report{TraceFile: "/tmp/tracecheck-fleet-1/trace.ndjson", TraceRemoved: true, Nemesis: map[Kind]int{}}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "trace.ndjson, removed with the run's temporary directory (-keep or -dir keeps it)") {
		t.Errorf("the text names the removed trace without saying so:\n%s", text.String())
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "0 threads: p50") || !strings.Contains(page.String(), "none measured") {
		t.Errorf("the page's handover row with no handover is not \"none measured\"")
	}
}
