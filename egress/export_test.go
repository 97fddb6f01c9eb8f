package egress

// OnWait makes p call f each time a request starts waiting for a slot, so
// that a test can act on a waiting request instead of hoping it waits. Set
// it before p serves any request.
func OnWait(p *Pool, f func()) { p.onWait = f }

// The values of ProxyError.Kind and Choice.Reason, for the external tests.
const (
	KindDial        = failDial
	KindTLS         = failTLS
	KindAuth        = failAuth
	KindHandshake   = failHandshake
	KindProxy       = failProxy
	KindDestination = failDestination

	ReasonAffinity          = reasonAffinity
	ReasonAffinityUnhealthy = reasonAffinityUnhealthy
	ReasonCapacity          = reasonCapacity
	ReasonForced            = reasonForced
	ReasonSticky            = reasonSticky
	ReasonProbe             = reasonProbe
)

// ConfigError is the error of an invalid configuration, whose fields the
// external tests check.
type ConfigError = configError

// List returns the rules of the set, in the order given, for the external
// tests.
func (rs *RuleSet) List() []Rule {
	if rs == nil {
		return nil
	}
	out := make([]Rule, len(rs.list))
	for i, r := range rs.list {
		out[i] = *r
	}
	return out
}
