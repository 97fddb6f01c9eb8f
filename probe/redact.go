package probe

import (
	"errors"
	"net/url"
	"strings"

	"github.com/egresskit/egresskit/telemetry"
)

// redactURL returns u without userinfo and with secret-looking parameter
// values replaced, by the module's one redactor (package telemetry).
func redactURL(u *url.URL) string { return telemetry.Redactor{}.RedactURL(u) }

// scrubber removes secrets from error text: the generic rules of package
// telemetry, then every credential of this Run's target and proxy URLs,
// verbatim, wherever it appears (a proxy library may quote a user name in a
// message of its own).
type scrubber struct {
	secrets []string // longest first, so a secret is never half-replaced by its prefix
}

// add registers the credentials carried by u: user name, password and
// their escaped forms.
func (s *scrubber) add(u *url.URL) {
	if u == nil || u.User == nil {
		return
	}
	s.addString(u.User.String())
	s.addString(u.User.Username())
	if p, ok := u.User.Password(); ok {
		s.addString(p)
		s.addString(url.QueryEscape(p))
	}
}

func (s *scrubber) addString(v string) {
	// Very short values would scrub ordinary words; URL-shaped occurrences
	// are removed by the generic rules anyway.
	if len(v) < 4 {
		return
	}
	for _, have := range s.secrets {
		if have == v {
			return
		}
	}
	s.secrets = append(s.secrets, v)
	for i := len(s.secrets) - 1; i > 0 && len(s.secrets[i]) > len(s.secrets[i-1]); i-- {
		s.secrets[i], s.secrets[i-1] = s.secrets[i-1], s.secrets[i]
	}
}

// scrub returns the text of err without credentials.
// The request URL that http.Client's *url.Error prepends is dropped: the
// result shows the URL already.
func (s *scrubber) scrub(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok && ue.Err != nil {
		err = ue.Err
	}
	msg := telemetry.Redactor{}.RedactError(err)
	for _, v := range s.secrets {
		msg = strings.ReplaceAll(msg, v, telemetry.Redacted)
	}
	return msg
}

// showURL returns the redacted form of a URL for an error message, or ""
// when s is too long or does not parse.
func showURL(s string) string {
	if len(s) > 256 {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return redactURL(u)
}
