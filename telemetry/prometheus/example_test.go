package prometheus_test

import (
	"context"
	"fmt"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
	egressprom "github.com/egresskit/egresskit/telemetry/prometheus"
	prom "github.com/prometheus/client_golang/prometheus"
)

func ExampleNew() {
	c := egressprom.New(egressprom.Config{
		BreakerCounts: func() map[string]int { return map[string]int{"closed": 41, "open": 1} },
		Watch:         []string{"news.example"},
		BreakerState:  func(host string) string { return "open" },
	})
	reg := prom.NewRegistry()
	reg.MustRegister(c)

	// The chain reports each attempt; here, a request retried once.
	obs := telemetry.Fanout(c)
	ctx := context.Background()
	obs.Observe(ctx, &telemetry.Event{Host: "news.example", Attempt: 1, Outcome: classify.Transient,
		Status: 503, EgressReason: "affinity", Duration: 80 * time.Millisecond})
	obs.Observe(ctx, &telemetry.Event{Host: "news.example", Attempt: 2, Retries: 1, Final: true,
		Outcome: classify.OK, Status: 200, EgressReason: "affinity", Duration: 60 * time.Millisecond})

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "egresskit_attempts_total", "egresskit_requests_total", "egresskit_retries_total", "egresskit_breaker_hosts":
			for _, m := range mf.GetMetric() {
				labels := ""
				for _, l := range m.GetLabel() {
					labels += fmt.Sprintf(" %s=%s", l.GetName(), l.GetValue())
				}
				fmt.Printf("%s%s %v\n", mf.GetName(), labels, m.GetCounter().GetValue()+m.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// egresskit_attempts_total egress_reason=affinity outcome=ok 1
	// egresskit_attempts_total egress_reason=affinity outcome=transient 1
	// egresskit_breaker_hosts state=closed 41
	// egresskit_breaker_hosts state=half-open 0
	// egresskit_breaker_hosts state=halted 0
	// egresskit_breaker_hosts state=open 1
	// egresskit_requests_total egress_reason=affinity outcome=ok 1
	// egresskit_retries_total 1
}
