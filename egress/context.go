package egress

import "context"

// The reasons of a choice, the values of Choice.Reason.
const (
	reasonAffinity          = "affinity"
	reasonAffinityUnhealthy = "affinity_unhealthy"
	reasonCapacity          = "capacity"
	reasonForced            = "forced"
	reasonSticky            = "sticky"
	reasonProbe             = "probe"
)

// Choice is the endpoint chosen for a request and why, for a crawler
// author or an operator who wants to see where a request left from (the
// chain puts it in its events). It never contains a proxy URL. Its Reason
// is one of:
//
//   - "affinity": the healthiest endpoint with a free slot in the
//     host's subset.
//   - "affinity_unhealthy": every endpoint of the host's subset is
//     quarantined; the endpoint is outside the subset.
//   - "capacity": the host's subset has a usable endpoint, but all
//     usable ones are full; the endpoint is outside the subset.
//   - "forced": an operator named the endpoint (WithForced).
//   - "sticky": the request's session is bound to the endpoint
//     (WithBinding).
//   - "probe": the endpoint's quarantine is over and this request is
//     the single probe that decides whether it is readmitted.
type Choice struct {
	// EndpointID is the chosen endpoint.
	EndpointID string
	// Reason is why it was chosen: "affinity", "affinity_unhealthy",
	// "capacity", "forced", "sticky" or "probe" (listed in the type's
	// documentation).
	Reason string
	// Rule is the name of the rule that decided which endpoints were
	// eligible (see Rule), or "" when no rule governs the host and every
	// endpoint was.
	Rule string
}

// String returns "id (reason)", or "id (reason, rule name)".
func (c Choice) String() string {
	if c.Rule != "" {
		return c.EndpointID + " (" + c.Reason + ", rule " + c.Rule + ")"
	}
	return c.EndpointID + " (" + c.Reason + ")"
}

type ctxKey uint8

const (
	forcedKey ctxKey = iota
	bindingKey
	recorderKey
)

// WithForced returns a context that makes the Pool send the request
// through endpointID, whatever the host's subset and the endpoint's health
// (Reason "forced"); it still waits for a free slot. It is meant for an
// operator's deliberate action; a forced choice anywhere else is a bug.
// Forcing takes precedence over a binding. An empty endpointID removes
// the override.
func WithForced(ctx context.Context, endpointID string) context.Context {
	return context.WithValue(ctx, forcedKey, endpointID)
}

// WithBinding returns a context that binds the request to endpointID, as
// a session does for its life so that it keeps one address: the Pool uses
// exactly that endpoint (Reason "sticky") while it is present, not draining
// and not quarantined, waiting for a free slot if need be; otherwise the
// request fails with ErrBindingUnavailable and is never moved elsewhere.
// An empty endpointID removes the binding.
func WithBinding(ctx context.Context, endpointID string) context.Context {
	return context.WithValue(ctx, bindingKey, endpointID)
}

// WithRecorder returns a context in which RoundTrip writes the Choice it
// made to c, for a crawler author who uses a Pool directly and outer
// layers such as the chain's telemetry. The write happens before
// the request is sent; read c after RoundTrip returns.
func WithRecorder(ctx context.Context, c *Choice) context.Context {
	return context.WithValue(ctx, recorderKey, c)
}

func forcedFrom(ctx context.Context) string {
	s, _ := ctx.Value(forcedKey).(string)
	return s
}

func bindingFrom(ctx context.Context) string {
	s, _ := ctx.Value(bindingKey).(string)
	return s
}

func recorderFrom(ctx context.Context) *Choice {
	c, _ := ctx.Value(recorderKey).(*Choice)
	return c
}
