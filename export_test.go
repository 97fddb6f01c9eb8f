package egresskit

// InFlightPeak returns the highest in-flight cap the chain computed for
// the host key from its pacing rate and latency, and the cap in force now;
// 0, 0 without a cap.
func InFlightPeak(t *Transport, key string) (peak, now int) {
	if t.inflight == nil {
		return 0, 0
	}
	st := t.inflight.Of(key)
	return st.Peak, st.Limit
}
