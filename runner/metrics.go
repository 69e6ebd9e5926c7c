package runner

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Metric names. Attribute "outcome" on turns, "write" on fenced refusals,
// "action" on steering: Steer (given to the agent), SteerRecord (its
// record consumed the message) or SteerRefused (its record was refused: a
// later claim abandoned the run, and the message stays unconsumed).
const (
	MetricTurns              = "threadclaim.runner.turns"
	MetricFencedRefusals     = "threadclaim.runner.fenced_refusals"
	MetricRunsStarted        = "threadclaim.runner.runs.started"
	MetricRunsEnded          = "threadclaim.runner.runs.ended"
	MetricRunsAbandoned      = "threadclaim.runner.runs.abandoned"
	MetricConsumptionLatency = "threadclaim.runner.consumption.latency"
	MetricSteering           = "threadclaim.runner.steering"
)

type metrics struct {
	turns, refusals, started, ended, abandoned metric.Int64Counter
	steering                                   metric.Int64Counter
	latency                                    metric.Float64Histogram
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := mp.Meter("github.com/threadclaim/threadclaim/runner")
	var ms metrics
	var err error
	counter := func(name, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithDescription(desc))
		return c
	}
	ms.turns = counter(MetricTurns, "Turns by outcome: done, busy, fenced, lost, error.")
	ms.refusals = counter(MetricFencedRefusals, "Fenced writes refused because the claim no longer held the lease, by write.")
	ms.started = counter(MetricRunsStarted, "Runs whose start was recorded.")
	ms.ended = counter(MetricRunsEnded, "Runs whose end was recorded.")
	ms.abandoned = counter(MetricRunsAbandoned, "Runs of earlier claims this runner abandoned.")
	ms.steering = counter(MetricSteering, "Messages given to running agents as steering (Session.Steer), and their records, by action: Steer, SteerRecord, SteerRefused.")
	if err != nil {
		return nil, fmt.Errorf("runner metrics: %w", err)
	}
	ms.latency, err = m.Float64Histogram(MetricConsumptionLatency,
		metric.WithDescription("Time from a message's post to its consumption, as a prompt, an answer or steering, by the runner's clock."),
		metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("runner metrics: %w", err)
	}
	return &ms, nil
}
