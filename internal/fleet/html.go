package fleet

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

// The timeline's geometry, in SVG units.
const (
	plotLeft   = 110
	plotWidth  = 1000
	barsHeight = 120
	laneHeight = 22
)

type svgRect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type svgText struct {
	X, Y  float64
	Text  string
	Class string
}

type timeline struct {
	Width, Height float64
	Rects         []svgRect
	Texts         []svgText
	Lines         []svgRect // grid lines: X, Y, W (x2), H (y2)
}

// buildTimeline lays out throughput bars, a lane per nemesis kind and a
// lane of handovers on one time axis.
func (rep *Report) buildTimeline() timeline {
	length := time.Duration(rep.ElapsedS * float64(time.Second))
	for _, b := range rep.Throughput {
		length = max(length, b.Start)
	}
	if length <= 0 {
		length = time.Second
	}
	x := func(d time.Duration) float64 { return plotLeft + float64(plotWidth)*float64(d)/float64(length) }
	kinds := Kinds()
	lanesTop := float64(barsHeight + 30)
	t := timeline{Width: plotLeft + plotWidth + 20}
	t.Height = lanesTop + float64((len(kinds)+1)*laneHeight) + 40

	peak := 1
	for _, b := range rep.Throughput {
		peak = max(peak, b.Consumed)
	}
	width := 0.0
	if len(rep.Throughput) > 1 {
		width = x(rep.Throughput[1].Start) - x(rep.Throughput[0].Start)
	}
	for _, b := range rep.Throughput {
		h := float64(barsHeight) * float64(b.Consumed) / float64(peak)
		t.Rects = append(t.Rects, svgRect{x(b.Start), 10 + barsHeight - h, max(width-1, 1), h, "tput",
			fmt.Sprintf("%.1fs: %d consumed", b.Start.Seconds(), b.Consumed)})
	}
	t.Texts = append(t.Texts, svgText{4, 20, fmt.Sprintf("consumed (peak %d)", peak), "label"})
	for i, k := range kinds {
		y := lanesTop + float64(i*laneHeight)
		t.Texts = append(t.Texts, svgText{4, y + 15, string(k), "label"})
		t.Lines = append(t.Lines, svgRect{plotLeft, y + laneHeight, plotLeft + plotWidth, y + laneHeight, "", ""})
		for _, e := range rep.Events {
			if e.Kind != k {
				continue
			}
			w := max(x(e.End)-x(e.Start), 3)
			class := "ev ev-" + string(k)
			title := fmt.Sprintf("%.2fs %s %s: %s", e.Start.Seconds(), k, e.Target, e.Detail)
			if e.Err != "" {
				class += " failed"
				title += " (failed: " + e.Err + ")"
			}
			t.Rects = append(t.Rects, svgRect{x(e.Start), y + 3, w, laneHeight - 6, class, title})
		}
	}
	y := lanesTop + float64(len(kinds)*laneHeight)
	t.Texts = append(t.Texts, svgText{4, y + 15, "handover", "label"})
	for _, h := range rep.Handovers {
		title := fmt.Sprintf("%.2fs %s from %s to %s: %.0f ms after expiry", h.At.Seconds(), h.Thread, h.From, h.To, ms(h.AfterExpiry))
		if len(h.Faults) > 0 {
			title += ", behind " + strings.Join(h.Faults, ", ")
		}
		t.Rects = append(t.Rects, svgRect{x(h.At) - 2, y + 5, 4, laneHeight - 10, "handover", title})
	}
	axisY := y + laneHeight + 14
	step := axisStep(length)
	for d := time.Duration(0); d <= length; d += step {
		t.Texts = append(t.Texts, svgText{x(d), axisY, fmt.Sprintf("%gs", d.Seconds()), "tick"})
		t.Lines = append(t.Lines, svgRect{x(d), 10, x(d), y + laneHeight, "grid", ""})
	}
	return t
}

// axisStep picks a tick spacing giving about ten ticks.
func axisStep(length time.Duration) time.Duration {
	for _, s := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute} {
		if length/s <= 12 {
			return s
		}
	}
	return 10 * time.Minute
}

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"secs": func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) },
	"join": strings.Join,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tracecheck fleet {{.R.Schema}}</title>
<style>
body { font: 14px/1.4 sans-serif; margin: 20px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 24px; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; border-bottom: 1px solid #ddd; text-align: left; vertical-align: top; }
.pass { color: #17702d; font-weight: bold; } .fail { color: #b00020; font-weight: bold; }
svg .tput { fill: #4a78c2; } svg .label { font-size: 12px; fill: #333; } svg .tick { font-size: 11px; fill: #666; text-anchor: middle; }
svg .grid { stroke: #eee; } svg line { stroke: #ddd; }
svg .ev { opacity: 0.8; } svg .failed { opacity: 0.3; }
svg .ev-stop { fill: #e69f00; } svg .ev-kill { fill: #d55e00; } svg .ev-clock { fill: #56b4e9; } svg .ev-terminate { fill: #cc79a7; }
svg .ev-restart { fill: #000; } svg .ev-partition { fill: #999; } svg .ev-latency { fill: #009e73; } svg .ev-commit { fill: #f0e442; stroke: #aa9; }
svg .handover { fill: #b00020; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: 8px; }
</style></head><body>
<h1>tracecheck fleet: <span id="verdict" class="{{if .R.Passed}}pass{{else}}fail{{end}}">{{if .R.Passed}}PASS{{else}}FAIL{{end}}</span></h1>
<p>{{.R.Procs}} runner processes, {{.R.Threads}} threads, {{.R.Posters}} posters, TTL {{.R.TTLMs}} ms, poll {{.R.PollMs}} ms, fences {{.R.Fences}}, seed {{.R.Seed}}, {{printf "%.1f" .R.ElapsedS}} s, schema {{.R.Schema}}.</p>
<h2>Timeline: nemesis against throughput and handovers</h2>
<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{{.T.Width}}" height="{{.T.Height}}" viewBox="0 0 {{.T.Width}} {{.T.Height}}">
{{range .T.Lines}}<line class="{{.Class}}" x1="{{.X}}" y1="{{.Y}}" x2="{{.W}}" y2="{{.H}}"/>
{{end}}{{range .T.Rects}}<rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"><title>{{.Title}}</title></rect>
{{end}}{{range .T.Texts}}<text class="{{.Class}}" x="{{.X}}" y="{{.Y}}">{{.Text}}</text>
{{end}}</svg>
<h2>Checks</h2>
<table id="checks">
<tr><th>messages posted</th><td>{{.R.Posted}}</td></tr>
<tr><th>consumed exactly once</th><td>{{.R.ConsumedOnce}}</td></tr>
<tr><th>consumed twice (must be 0)</th><td>{{.R.ConsumedTwice}}</td></tr>
<tr><th>lost (must be 0)</th><td>{{.R.Lost}}</td></tr>
<tr><th>most runs active at once in a thread (must be ≤ 1)</th><td>{{.R.MaxActiveRuns}}</td></tr>
<tr><th>live runs abandoned (must be 0)</th><td>{{.R.LiveAbandoned}}</td></tr>
<tr><th>turns crashed (Crash lines)</th><td>{{.R.Crashes}}{{if .R.CrashesAfterLoss}}; {{.R.CrashesAfterLoss}} more rounds ended by the merge, their writes lost by storage{{end}}</td></tr>
<tr><th>runs started with the end of the run before</th><td>{{.R.FusedStarts}}</td></tr>
<tr><th>transactions that wrote events of 2 threads or more (their threads' writes)</th><td>{{.R.SharedCommits}} ({{.R.SharedCommitWrites}})</td></tr>
<tr><th>commit unknown (writes, and how each was resolved)</th><td id="commit-unknown">{{.R.CommitUnknown.Line}}</td></tr>
<tr><th>handover after SIGKILL</th><td>{{if not .R.Handovers}}none measured (no SIGKILL of a process holding a lease){{else}}{{len .R.Handovers}} threads: p50 {{printf "%.0f" .R.HandoverP50Ms}} ms, p99 {{printf "%.0f" .R.HandoverP99Ms}} ms, max {{printf "%.0f" .R.HandoverMaxMs}} ms; {{.R.HandoverWithin}} within TTL + one poll ({{printf "%.0f" .R.HandoverBoundMs}} ms), counted from the lease's expiry or, for the {{.R.HandoverIdle}} threads left with nothing to do, their next post; from the expiry alone p50 {{printf "%.0f" .R.HandoverRawP50Ms}} ms, p99 {{printf "%.0f" .R.HandoverRawP99Ms}} ms; slow: {{.R.SlowLine}}{{end}}</td></tr>
<tr><th>Go trace checker</th><td>{{if .R.TraceAccepted}}accepted{{else}}REJECTED{{end}} ({{.R.TraceLines}} lines, {{.R.InvariantChecks}} invariant checks)</td></tr>
<tr><th>porcupine</th><td>{{.R.LinResult}} ({{.R.Operations}} operations)</td></tr>
<tr><th>TLC trace validation</th><td>{{.R.TLC}}{{if .R.TLCThreads}}: {{join .R.TLCThreads ", "}}{{end}}</td></tr>
</table>
{{if .R.Problems}}<h2>Problems</h2><pre id="problems">{{join .R.Problems "\n\n"}}</pre>{{end}}
<h2>Nemesis events</h2>
<table id="events"><tr><th>start s</th><th>end s</th><th>kind</th><th>target</th><th>what</th></tr>
{{range .R.Events}}<tr><td>{{secs .Start}}</td><td>{{secs .End}}</td><td>{{.Kind}}</td><td>{{.Target}}</td><td>{{.Detail}}{{if .Err}} (failed: {{.Err}}){{end}}</td></tr>
{{end}}</table>
<h2>Processes</h2>
<table><tr><th>name</th><th>pid</th><th>lease clock</th><th>fate</th></tr>
{{range .R.Processes}}<tr><td>{{.Name}}</td><td>{{.Pid}}</td><td>{{.Skew}}</td><td>{{join .Fate "; "}}</td></tr>
{{end}}</table>
</body></html>
`))

// WriteHTML writes the report as a self-contained HTML page: the timeline
// (throughput, nemesis events by kind, handovers) and the checks.
func (rep *Report) WriteHTML(w io.Writer) error {
	return htmlTemplate.Execute(w, struct {
		R *Report
		T timeline
	}{rep, rep.buildTimeline()})
}
