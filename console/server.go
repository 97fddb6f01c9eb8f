package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/audittrail"
	"github.com/egresskit/egresskit/internal/haltrec"
)

// Cookie names.
const (
	sessionCookie = "egresskit_console"
	csrfCookie    = "egresskit_csrf"
)

// queueLimit is how many halted hosts the queue shows.
const queueLimit = 100

// server is the console's handler.
type server struct {
	cfg      Config
	hosts    map[string]bool // Config.Hosts, lower-cased
	sessions *sessions
	guesses  guesses
	now      func() time.Time
}

func newServer(cfg Config) *server {
	s := &server{cfg: cfg, hosts: make(map[string]bool), now: time.Now, guesses: newGuesses()}
	for _, h := range cfg.Hosts {
		s.hosts[strings.ToLower(strings.TrimSpace(h))] = true
	}
	s.sessions = newSessions(cfg.SessionTTL, func() time.Time { return s.now() })
	return s
}

// page is the last element of the request's path, so that the console
// works mounted with or without http.StripPrefix.
func page(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// cookiePath is the path the console is mounted at, from the request as
// the client sent it: the cookies go to the console's pages only.
func cookiePath(r *http.Request) string {
	p := r.URL.Path
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && u.Path != "" {
		p = u.Path
	}
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i+1]
	}
	return "/"
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make a form's Origin "null"
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	if !s.hostOK(r.Host) {
		s.fail(w, http.StatusMisdirectedRequest, "This console is not served under that name. Its operator can add the name to the names it accepts.")
		return
	}
	if r.Method == http.MethodPost && !s.originOK(r) {
		s.fail(w, http.StatusForbidden, "Refused: the form was sent from another site.")
		return
	}
	csrf := s.csrf(w, r)
	p := page(r.URL.Path)
	if p == "login" {
		s.login(w, r, csrf)
		return
	}
	signedIn, code := s.authorised(r)
	if code != 0 {
		if code == http.StatusTooManyRequests {
			h.Set("Retry-After", "1")
		}
		s.render(w, code, "login", loginData{CSRF: csrf, Limited: code == http.StatusTooManyRequests})
		return
	}
	if r.Method == http.MethodPost {
		if p == "logout" {
			s.logout(w, r)
			return
		}
		if s.cfg.ReadOnly {
			s.fail(w, http.StatusForbidden, "The console is read-only.")
			return
		}
		if !s.csrfOK(r) {
			s.fail(w, http.StatusForbidden, "Refused: the form's CSRF token is missing or wrong. Reload the page and try again.")
			return
		}
	} else if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD, POST")
		s.fail(w, http.StatusMethodNotAllowed, "Method not allowed.")
		return
	}
	top := topData{CSRF: csrf, SignedIn: signedIn}
	switch {
	case p == "" && r.Method != http.MethodPost:
		s.queue(w, r, top)
	case p == "host" && r.Method != http.MethodPost:
		s.host(w, r, top)
	case (p == "resume" || p == "keep") && r.Method == http.MethodPost:
		s.act(w, r, p == "resume")
	default:
		s.fail(w, http.StatusNotFound, "No such page.")
	}
}

// hostOK reports whether the request's Host is one the console answers
// to: an IP address, localhost, or one of Config.Hosts (with or without
// its port). An IP address is safe to accept: DNS rebinding needs a name
// of the attacker's that resolves to the console, and a page served from
// the console's own address is the console's.
func (s *server) hostOK(host string) bool {
	host = strings.ToLower(host)
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if name == "" {
		return false
	}
	if net.ParseIP(name) != nil || name == "localhost" {
		return true
	}
	return s.hosts[host] || s.hosts[name]
}

// originOK refuses a POST a browser says came from another origin than
// the Host it was sent to.
func (s *server) originOK(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true // not a browser, or one that says nothing: the CSRF token decides
	}
	if o == "null" && r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return true // a browser that hides the origin but says it is the same
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// authorised reports whether r may see the console: signed in with a
// live session, or carrying the token as a bearer header, when a token is
// required. code is the refusal's status, 0 when authorised.
func (s *server) authorised(r *http.Request) (signedIn bool, code int) {
	if s.cfg.Token == "" {
		return false, 0
	}
	if c, err := r.Cookie(sessionCookie); err == nil && s.sessions.valid(c.Value) {
		return true, 0
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false, http.StatusUnauthorized // none, or another scheme's (a proxy's Basic)
	}
	return false, s.checkToken(strings.TrimSpace(tok))
}

// checkToken compares tok with the token, when the guess limit allows,
// and counts a wrong one. It returns 0 for the token, 401 for a wrong
// one, 429 when the limit is spent (nothing compared).
func (s *server) checkToken(tok string) int {
	now := s.now()
	if !s.guesses.open(now) {
		return http.StatusTooManyRequests
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1 {
		return 0
	}
	s.guesses.wrong(now)
	return http.StatusUnauthorized
}

// secure reports whether the console's cookies are Secure.
func (s *server) secure(r *http.Request) bool { return s.cfg.SecureCookies || r.TLS != nil }

// csrf returns the request's CSRF token, setting a new cookie when it has
// none.
func (s *server) csrf(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
		return c.Value
	}
	b := make([]byte, 32)
	rand.Read(b)
	v := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: cookiePath(r), HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteStrictMode})
	return v
}

// csrfOK checks a POST's CSRF token against its cookie.
func (s *server) csrfOK(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) != 64 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(c.Value)) == 1
}

func (s *server) login(w http.ResponseWriter, r *http.Request, csrf string) {
	if s.cfg.Token == "" {
		seeOther(w, "./")
		return
	}
	if r.Method != http.MethodPost {
		s.render(w, http.StatusOK, "login", loginData{CSRF: csrf})
		return
	}
	if !s.csrfOK(r) {
		s.fail(w, http.StatusForbidden, "Refused: the form's CSRF token is missing or wrong. Reload the page and try again.")
		return
	}
	if code := s.checkToken(r.PostFormValue("token")); code != 0 {
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		s.render(w, code, "login", loginData{CSRF: csrf, Wrong: code == http.StatusUnauthorized, Limited: code == http.StatusTooManyRequests})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.sessions.create(), Path: cookiePath(r), HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteStrictMode, MaxAge: int(s.cfg.SessionTTL / time.Second)})
	seeOther(w, "./")
}

// logout ends the session and expires its cookie.
func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if !s.csrfOK(r) {
		s.fail(w, http.StatusForbidden, "Refused: the form's CSRF token is missing or wrong. Reload the page and try again.")
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.sessions.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: cookiePath(r), HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteStrictMode, MaxAge: -1})
	seeOther(w, "login")
}

// row is one host of the queue.
type row struct {
	Halt   hoststate.Halt
	Status *hoststate.Status
	Err    string
}

func (s *server) status(ctx context.Context, host string) (*hoststate.Status, string) {
	st, err := s.cfg.Store.Status(ctx, host)
	if err != nil {
		return nil, "status unavailable: " + errText(err)
	}
	return &st, ""
}

func (s *server) queue(w http.ResponseWriter, r *http.Request, top topData) {
	ctx := r.Context()
	halts, err := s.cfg.Store.Halts(ctx, queueLimit+1)
	d := queueData{topData: top, ReadOnly: s.cfg.ReadOnly, Now: time.Now()}
	if err != nil {
		d.Err = "The queue cannot be read: " + errText(err)
	}
	if len(halts) > queueLimit {
		halts, d.More = halts[:queueLimit], true
	}
	for _, h := range halts {
		h = queueHalt(h)
		st, e := s.status(ctx, h.Host)
		d.Rows = append(d.Rows, row{Halt: h, Status: st, Err: e})
	}
	s.render(w, http.StatusOK, "queue", d)
}

func (s *server) host(w http.ResponseWriter, r *http.Request, top topData) {
	ctx := r.Context()
	key, err := hostkey.Parse(r.URL.Query().Get("h"), s.cfg.HostKey)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "Not a host, host:port or URL.")
		return
	}
	d := hostData{topData: top, ReadOnly: s.cfg.ReadOnly, Host: key, Done: r.URL.Query().Get("done")}
	d.Status, d.StatusErr = s.status(ctx, key)
	var halts []hoststate.Halt
	var notes []hoststate.Note
	if halts, notes, err = s.cfg.Store.History(ctx, key); err != nil {
		d.Err = "The halt records cannot be read: " + errText(err)
	}
	for _, h := range halts[:min(len(halts), haltrec.MaxHistory)] {
		d.Halts = append(d.Halts, cleanHalt(h))
	}
	for _, n := range notes[:min(len(notes), haltrec.MaxHistory)] {
		d.Notes = append(d.Notes, cleanNote(n))
	}
	if len(s.cfg.AuditFiles) > 0 {
		var err error
		if d.Trail, err = audittrail.Read(s.cfg.AuditFiles, key, 100); err != nil {
			d.TrailErr = "The audit log cannot be read."
		}
	}
	s.render(w, http.StatusOK, "host", d)
}

// act resumes a host or keeps it halted, with the operator's name and
// reason, recorded in the Store's notes and the audit log.
func (s *server) act(w http.ResponseWriter, r *http.Request, resume bool) {
	ctx := r.Context()
	key, err := hostkey.Parse(r.PostFormValue("h"), s.cfg.HostKey)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "Not a host, host:port or URL.")
		return
	}
	by, err := haltrec.Reason(r.PostFormValue("by"), haltrec.MaxBy)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "Your name: "+err.Error()+". Give it as one line of printable text.")
		return
	}
	reason, err := haltrec.Reason(r.PostFormValue("reason"), haltrec.MaxText)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "The reason: "+err.Error()+". Give it as one line of printable text, at most 512 bytes.")
		return
	}
	kind, done := "keep_halted", "kept"
	if resume {
		kind, done = "resume", "resumed"
		if err := s.cfg.Store.Resume(ctx, key); err != nil {
			if errors.Is(err, hoststate.ErrNotHalted) {
				s.fail(w, http.StatusConflict, "That host is not halted: nothing was changed.")
				return
			}
			s.fail(w, http.StatusServiceUnavailable, "The host could not be resumed: "+errText(err))
			return
		}
	} else {
		st, err := s.cfg.Store.Status(ctx, key)
		if err != nil {
			s.fail(w, http.StatusServiceUnavailable, "The host's state cannot be read: "+errText(err))
			return
		}
		if !st.Halted {
			s.fail(w, http.StatusConflict, "That host is not halted: there is nothing to keep, and no note was recorded.")
			return
		}
	}
	note := hoststate.Note{Host: key, Time: time.Now(), By: by, Resumed: resume, Text: reason}
	if err := s.cfg.Store.AddNote(ctx, note); err != nil && !resume {
		s.fail(w, http.StatusServiceUnavailable, "The note could not be recorded: "+errText(err))
		return
	}
	if s.cfg.Audit != nil {
		if err := s.cfg.Audit.Record(kind, slog.String("host", key), slog.String("by", by), slog.String("reason", reason)); err != nil {
			s.fail(w, http.StatusInternalServerError, "Done, but the audit log could not record it: "+errText(err))
			return
		}
	}
	seeOther(w, "host?"+url.Values{"h": {key}, "done": {done}}.Encode())
}

// seeOther redirects to loc, relative to the page: http.Redirect would
// resolve it against the path the handler sees, which lacks the mount's
// prefix under http.StripPrefix.
func seeOther(w http.ResponseWriter, loc string) {
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}

func (s *server) fail(w http.ResponseWriter, code int, msg string) {
	s.render(w, code, "error", errorData{Code: code, Msg: msg})
}

// errText is an error for a page: its first line, bounded. Store errors
// carry hosts and addresses, never a credential.
func errText(err error) string {
	t, _, _ := strings.Cut(err.Error(), "\n")
	return haltrec.Line(t, 300)
}
