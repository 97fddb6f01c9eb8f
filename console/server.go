package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/haltrec"
)

// Cookie names.
const (
	sessionCookie = "egresskit_console"
	csrfCookie    = "egresskit_csrf"
)

// queueLimit is how many halted hosts the queue shows.
const queueLimit = 200

// server is the console's handler.
type server struct {
	cfg     Config
	session string // the session cookie's value: a keyed hash of the token
}

func newServer(cfg Config) *server {
	s := &server{cfg: cfg}
	if cfg.Token != "" {
		m := hmac.New(sha256.New, []byte(cfg.Token))
		m.Write([]byte("egresskit console session v1"))
		s.session = hex.EncodeToString(m.Sum(nil))
	}
	return s
}

// page is the last element of the request's path, so that the console
// works mounted with or without http.StripPrefix.
func page(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	csrf := s.csrf(w, r)
	p := page(r.URL.Path)
	if p == "login" {
		s.login(w, r, csrf)
		return
	}
	if !s.authorised(r) {
		s.render(w, http.StatusUnauthorized, "login", loginData{CSRF: csrf})
		return
	}
	if r.Method == http.MethodPost {
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
	switch {
	case p == "" && r.Method != http.MethodPost:
		s.queue(w, r, csrf)
	case p == "host" && r.Method != http.MethodPost:
		s.host(w, r, csrf)
	case (p == "resume" || p == "keep") && r.Method == http.MethodPost:
		s.act(w, r, p == "resume")
	default:
		s.fail(w, http.StatusNotFound, "No such page.")
	}
}

// authorised reports whether r carries the token, when one is required.
func (s *server) authorised(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, tok, ok := strings.Cut(a, " ")
		return ok && strings.EqualFold(scheme, "Bearer") &&
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.cfg.Token)) == 1
	}
	c, err := r.Cookie(sessionCookie)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.session)) == 1
}

// csrf returns the request's CSRF token, setting a new cookie when it has
// none.
func (s *server) csrf(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
		return c.Value
	}
	b := make([]byte, 32)
	rand.Read(b)
	v := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return v
}

// csrfOK checks a POST's CSRF token against its cookie, and refuses a
// request a browser says came from another site.
func (s *server) csrfOK(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
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
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(s.cfg.Token)) != 1 {
		s.render(w, http.StatusUnauthorized, "login", loginData{CSRF: csrf, Wrong: true})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.session, Path: "/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: 12 * 3600})
	seeOther(w, "./")
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

func (s *server) queue(w http.ResponseWriter, r *http.Request, csrf string) {
	ctx := r.Context()
	halts, err := s.cfg.Store.Halts(ctx, queueLimit)
	d := queueData{CSRF: csrf, ReadOnly: s.cfg.ReadOnly, Now: time.Now()}
	if err != nil {
		d.Err = "The queue cannot be read: " + errText(err)
	}
	for _, h := range halts {
		st, e := s.status(ctx, h.Host)
		d.Rows = append(d.Rows, row{Halt: h, Status: st, Err: e})
	}
	s.render(w, http.StatusOK, "queue", d)
}

func (s *server) host(w http.ResponseWriter, r *http.Request, csrf string) {
	ctx := r.Context()
	key, err := hostkey.Parse(r.URL.Query().Get("h"), s.cfg.HostKey)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "Not a host, host:port or URL.")
		return
	}
	d := hostData{CSRF: csrf, ReadOnly: s.cfg.ReadOnly, Host: key, Done: r.URL.Query().Get("done")}
	d.Status, d.StatusErr = s.status(ctx, key)
	if d.Halts, d.Notes, err = s.cfg.Store.History(ctx, key); err != nil {
		d.Err = "The halt records cannot be read: " + errText(err)
	}
	d.Trail, d.TrailErr = trail(s.cfg.AuditFiles, key, 100)
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
	by := strings.TrimSpace(r.PostFormValue("by"))
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if by == "" || reason == "" {
		s.fail(w, http.StatusBadRequest, "Your name and a reason are both required.")
		return
	}
	by, reason = haltrec.Clip(by, haltrec.MaxBy), haltrec.Clip(reason, haltrec.MaxText)
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
	return haltrec.Clip(t, 300)
}
