package main

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
)

// The site's one account. The password stands for a credential the
// crawler's operator was given; it never appears in the output.
const (
	siteUser     = "alice"
	sitePassword = "correct-horse-battery-staple"
)

// site is a small web site on 127.0.0.1: a login form guarded by a CSRF
// token, and a paginated item list for logged-in users only.
//
//	GET  /robots.txt      disallows /admin/
//	GET  /login           the form, with a CSRF token in a hidden field
//	                      and the same token in a cookie
//	POST /login           user, password and the token: a session cookie
//	GET  /items?page=N    needs the session cookie; links to its items,
//	                      the next page and (page 2) an /admin/ export
//	GET  /items/N-K       needs the session cookie
type site struct {
	*httptest.Server
	pages, perPage int

	mu        sync.Mutex // guards the fields below
	csrf      map[string]bool
	sessions  map[string]bool
	forms     int // GET /login served
	logins    int // successful POST /login
	badLogins int // POST /login refused
	served    int // /items pages served with a valid session
	anonymous int // /items requests without a valid session
	admin     int // requests under /admin/
}

func newSite(pages, perPage int) *site {
	s := &site{pages: pages, perPage: perPage, csrf: map[string]bool{}, sessions: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow: /admin/\n")
	})
	mux.HandleFunc("GET /login", s.loginForm)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("GET /items", s.page)
	mux.HandleFunc("GET /items/{item}", s.item)
	mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.admin++
		s.mu.Unlock()
		fmt.Fprint(w, "export of every account")
	})
	s.Server = httptest.NewServer(mux)
	return s
}

func randomToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *site) loginForm(w http.ResponseWriter, r *http.Request) {
	tok := randomToken()
	s.mu.Lock()
	s.csrf[tok] = true
	s.forms++
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "csrf", Value: tok, Path: "/login", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<html><body><form method="post" action="/login">
<input type="hidden" name="csrf" value="%s">
<input name="user"> <input type="password" name="password"> <button>Log in</button>
</form></body></html>`, html.EscapeString(tok))
}

// login accepts the form when its token matches the csrf cookie, was
// issued by this site and not used before, and the credentials are right.
func (s *site) login(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie("csrf")
	form := r.PostFormValue("csrf")
	s.mu.Lock()
	ok := err == nil && form != "" && s.csrf[form] &&
		subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) == 1 &&
		r.PostFormValue("user") == siteUser &&
		subtle.ConstantTimeCompare([]byte(r.PostFormValue("password")), []byte(sitePassword)) == 1
	if !ok {
		s.badLogins++
		s.mu.Unlock()
		http.Error(w, "bad login or stale form", http.StatusBadRequest)
		return
	}
	delete(s.csrf, form) // one use
	sid := randomToken()
	s.sessions[sid] = true
	s.logins++
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "csrf", Path: "/login", MaxAge: -1})
	http.SetCookie(w, &http.Cookie{Name: "sid", Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, `<html><body>Welcome, alice. <a href="/items?page=1">Your items</a></body></html>`)
}

// authorised counts and reports whether r carries a session cookie this
// site issued.
func (s *site) authorised(r *http.Request) bool {
	c, err := r.Cookie("sid")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || !s.sessions[c.Value] {
		s.anonymous++
		return false
	}
	s.served++
	return true
}

func (s *site) page(w http.ResponseWriter, r *http.Request) {
	if !s.authorised(r) {
		http.Error(w, "log in first", http.StatusUnauthorized)
		return
	}
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 1 || n > s.pages {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<html><body><h1>Items, page %d of %d</h1>\n<ul>\n", n, s.pages)
	for k := 1; k <= s.perPage; k++ {
		fmt.Fprintf(w, "<li><a href=\"/items/%d-%d\">item %d-%d</a></li>\n", n, k, n, k)
	}
	fmt.Fprint(w, "</ul>\n")
	if n == 2 {
		fmt.Fprint(w, "<a href=\"/admin/export\">export everything</a>\n")
	}
	if n < s.pages {
		fmt.Fprintf(w, "<a rel=\"next\" href=\"/items?page=%d\">next</a>\n", n+1)
	}
	fmt.Fprint(w, "</body></html>")
}

func (s *site) item(w http.ResponseWriter, r *http.Request) {
	if !s.authorised(r) {
		http.Error(w, "log in first", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<html><body>item %s</body></html>", html.EscapeString(r.PathValue("item")))
}

// siteStats is what the site saw.
type siteStats struct {
	Forms, Logins, BadLogins, Served, Anonymous, Admin int
}

func (s *site) stats() siteStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return siteStats{s.forms, s.logins, s.badLogins, s.served, s.anonymous, s.admin}
}
