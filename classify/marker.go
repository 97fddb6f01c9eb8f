package classify

import (
	"net/http"
	"net/textproto"
	"slices"
)

// A Marker recognises a bot-management challenge or block page. Markers are
// data: the built-in table is DefaultMarkers, and Config.Markers adds to it.
//
// Every condition that is set must hold for the marker to match:
//
//   - Header names a response header field; the marker needs that field with
//     a value containing Value (any value when Value is empty).
//   - Body must occur in the first Config.PeekSize bytes of the body, and
//     AlsoBody too when it is set. Body conditions are tested only on HTML
//     (a text/html or application/xhtml+xml Content-Type, or none and a head
//     that looks like HTML), and on JSON when JSON is set; never on
//     text/plain, source code, or any other type, so a file that quotes a
//     vendor's page is not taken for the page.
//   - Statuses, when not empty, restricts the marker to those status codes.
//
// Matching is ASCII case-insensitive. A marker with neither Header nor Body
// would match every response; New ignores it. Result.Markers names each
// matching marker once: those without a body condition first, then the
// others, each group in table order.
type Marker struct {
	// Name identifies the marker in Result.Markers, e.g. "cloudflare".
	// Several entries may share a name; it is reported once. Empty means
	// "custom".
	Name string
	// Header is the name of a response header field to inspect.
	Header string
	// Value is a substring of the Header field's value; empty matches any
	// value, i.e. the field's presence.
	Value string
	// Body is a substring of the body head.
	Body string
	// AlsoBody is a second substring of the body head that must also be
	// present; empty means no second condition.
	AlsoBody string
	// JSON lets the body condition match a JSON body (application/json or
	// a +json type) as well as HTML, for products that answer API clients
	// in JSON.
	JSON bool
	// Statuses restricts the marker to these status codes; empty means any.
	Statuses []int
}

// challengeStatuses and refusalStatuses return the status sets shared by
// several markers (fresh slices: DefaultMarkers hands out copies). A
// challenge or refusal is sent with one of these, never with the 200 of a
// normal page.
func challengeStatuses() []int { return []int{403, 429, 503} }
func refusalStatuses() []int   { return []int{401, 403, 405, 429} }

// DefaultMarkers returns a fresh copy of the built-in marker table: the
// vendor signatures, one entry per page family, each with a comment naming
// the family it catches. Headers that only reveal a product's presence
// (Server: cloudflare, CF-Ray, X-Sucuri-ID, X-DataDome, X-Iinfo) are
// deliberately absent: they are on every normal response too, and on the
// origin's own error pages that a CDN passes through. Signatures that
// normal pages also carry (Cloudflare's and Imperva's injected scripts) are
// paired with a second condition or restricted to challenge statuses.
//
// testdata/corpus holds captured pages of each family; TestCorpus checks
// the table against them and against benign pages. How many bytes of its
// body each family's captured pages need before a marker decides (the
// longest, over the family's pages, as of this table): served with 200,
// Akamai 178, Imperva 105, F5 105, Sucuri 242, which is why a 2xx answer
// is read no further than Config.OKPeekSize (1 KiB); served with a
// refusal status, Cloudflare 1975, Distil 2850, Anubis 1342, DataDome 391,
// PerimeterX 273, Akamai 290, Kasada 0 (its header decides), all within
// Config.PeekSize (4 KiB). TestPeekNeeds checks these bounds.
func DefaultMarkers() []Marker {
	return []Marker{
		// Cloudflare: the header every challenge response has carried
		// since 2023.
		{Name: "cloudflare", Header: "Cf-Mitigated", Value: "challenge"},
		// Cloudflare challenge platform (2020 on): the options object of
		// every JS, managed and interactive challenge page.
		{Name: "cloudflare", Body: "_cf_chl_opt"},
		// Cloudflare "Just a moment..." interstitials (IUAM, managed).
		{Name: "cloudflare", Body: "Just a moment...", AlsoBody: "/cdn-cgi/"},
		{Name: "cloudflare", Body: "Just a moment...", Statuses: challengeStatuses()},
		// Cloudflare challenge orchestration script. Normal pages embed
		// /cdn-cgi/challenge-platform/scripts/jsd/ for bot detection, so
		// the path alone needs a challenge status.
		{Name: "cloudflare", Body: "/cdn-cgi/challenge-platform/", AlsoBody: "orchestrate"},
		{Name: "cloudflare", Body: "/cdn-cgi/challenge-platform/", Statuses: challengeStatuses()},
		// Cloudflare IUAM pages of 2015-2020, whatever their title or
		// language: the verification box, the answer form and its fields.
		{Name: "cloudflare", Body: "cf-browser-verification", Statuses: challengeStatuses()},
		{Name: "cloudflare", Body: "/cdn-cgi/l/chk_", Statuses: challengeStatuses()},
		{Name: "cloudflare", Body: "jschl_vc", Statuses: challengeStatuses()},
		// Sites could restyle the IUAM page (own title, own language,
		// the verification box at the end of a long page); the challenge
		// script that fills the answer field still comes first in the head.
		{Name: "cloudflare", Body: "getElementById('jschl-answer')", Statuses: challengeStatuses()},
		// Cloudflare challenge tokens in form actions (__cf_chl_jschl_tk__,
		// __cf_chl_captcha_tk__, __cf_chl_managed_tk__, __cf_chl_f_tk).
		{Name: "cloudflare", Body: "__cf_chl_", Statuses: challengeStatuses()},
		// Cloudflare "Attention Required! | Cloudflare" CAPTCHA pages
		// (2015-2021) and the older 1020 block page that shares the title.
		{Name: "cloudflare", Body: "Attention Required! | Cloudflare", AlsoBody: "/cdn-cgi/"},
		// Cloudflare's own 1xxx refusal pages, served with 403: 1006-1009
		// "Access denied ... banned your IP address", 1010 browser
		// signature ban, 1012, 1020 "Sorry, you have been blocked". Its 5xx
		// pages (520-527, origin trouble) and the 429 of 1015 (rate
		// limited) use the same stylesheet and are not matched.
		{Name: "cloudflare", Body: "/cdn-cgi/styles/cf.errors.css", Statuses: []int{403}},
		{Name: "cloudflare", Body: "Sorry, you have been blocked", AlsoBody: "Cloudflare Ray ID"},
		{Name: "cloudflare", Body: "used Cloudflare to restrict access", AlsoBody: "cf-error"},
		// Cloudflare Bot Fight Mode interstitial (2020-2021): a near-empty
		// page loading /cdn-cgi/bm/cv/. Normal pages loaded it too, so a
		// challenge status is required.
		{Name: "cloudflare", Body: "/cdn-cgi/bm/cv/", Statuses: challengeStatuses()},

		// AWS WAF: challenge (202) and CAPTCHA (405) actions set the header;
		// their pages carry the token script's gokuProps.
		{Name: "aws-waf", Header: "X-Amzn-Waf-Action", Value: "challenge"},
		{Name: "aws-waf", Header: "X-Amzn-Waf-Action", Value: "captcha"},
		{Name: "aws-waf", Body: "gokuProps", Statuses: []int{202, 405}},
		// Amazon CloudFront "403 ERROR ... Request blocked." (a WAF rule or
		// a geographic restriction); its 502/504 pages say "could not be
		// satisfied" without "Request blocked".
		{Name: "cloudfront", Body: "Request blocked.", AlsoBody: "cloudfront", Statuses: []int{403}},

		// PerimeterX / HUMAN block and CAPTCHA pages, and the JSON an
		// enforcer sends API clients (advanced blocking response).
		{Name: "perimeterx", Body: "px-captcha"},
		{Name: "perimeterx", Body: "Access to this page has been denied"},
		{Name: "perimeterx", Body: `"blockScript"`, AlsoBody: `"appId"`, JSON: true, Statuses: refusalStatuses()},

		// Imperva (Incapsula): the incident page and its iframe shell.
		// Normal pages load /_Incapsula_Resource scripts too, so the
		// resource alone needs the incident reference or the block iframe.
		{Name: "imperva", Body: "Incapsula incident ID"},
		{Name: "imperva", Body: "_Incapsula_Resource", AlsoBody: "incident"},
		{Name: "imperva", Body: "main-iframe", AlsoBody: "_Incapsula_Resource"},
		// Imperva JS challenge shell served with 200: a head of only a
		// noindex,nofollow robots meta and a bare script tag loading
		// _Incapsula_Resource?SWJIYLWA, and an empty body. Normal pages
		// get the same resource injected with type, async and &ns= added.
		{Name: "imperva", Body: `<script src="/_Incapsula_Resource?SWJIYLWA=`, AlsoBody: "noindex,nofollow"},
		// Distil Networks (Imperva Advanced Bot Protection) "Pardon Our
		// Interruption" block and CAPTCHA pages. The phrase alone is also a
		// maintenance-page greeting, so a Distil name must be present.
		{Name: "distil", Body: "Pardon Our Interruption", AlsoBody: "distilnetworks"},
		{Name: "distil", Body: "distil_r_captcha"},

		// DataDome CAPTCHA and block pages, and their JSON form for XHR
		// ({"url":"https://geo.captcha-delivery.com/captcha/..."}); newer
		// pages load the CAPTCHA from ct.datado.me or c.datado.me.
		{Name: "datadome", Body: "captcha-delivery.com"},
		{Name: "datadome", Body: "captcha-delivery.com", JSON: true, Statuses: refusalStatuses()},
		{Name: "datadome", Body: "datado.me/", Statuses: refusalStatuses()},

		// Kasada: its 429 interstitial carries x-kpsdk-ct and loads
		// ips.js through window.KPSDK; without them a 429 is throttling.
		{Name: "kasada", Header: "X-Kpsdk-Ct", Statuses: []int{403, 429}},
		{Name: "kasada", Body: "KPSDK", Statuses: []int{403, 429}},

		// Vercel Security Checkpoint (attack challenge mode, bot rules).
		{Name: "vercel", Header: "X-Vercel-Mitigated", Value: "challenge"},
		{Name: "vercel", Header: "X-Vercel-Mitigated", Value: "deny"},
		{Name: "vercel", Body: "Vercel Security Checkpoint", Statuses: refusalStatuses()},

		// Sucuri WebSite Firewall: block page and header, and the
		// "You are being redirected..." JS cookie challenge (served 200).
		{Name: "sucuri", Header: "X-Sucuri-Block"},
		{Name: "sucuri", Body: "Sucuri WebSite Firewall", AlsoBody: "Access Denied"},
		{Name: "sucuri", Body: "sucuri_cloudproxy_js"},

		// F5 BIG-IP ASM rejection page (often served with status 200).
		{Name: "f5-asm", Body: "The requested URL was rejected"},

		// Akamai edge denial; its page spells the reference with entities.
		{Name: "akamai", Body: "Access Denied", AlsoBody: "Reference #"},
		{Name: "akamai", Body: "Access Denied", AlsoBody: "Reference&#32;&#35;"},
		{Name: "akamai", Body: "Access Denied", AlsoBody: "errors.edgesuite.net"},
		// Akamai Bot Manager behavioural challenge ("Powered and protected
		// by Akamai"), served with 200; its JSON form (sec-cp-challenge)
		// answers API clients with 428.
		{Name: "akamai", Body: "sec-if-cpt-container"},
		{Name: "akamai", Body: `"sec-cp-challenge"`, JSON: true, Statuses: []int{428}},

		// Anubis proof-of-work challenge ("Making sure you're not a bot!"),
		// served with 200 by early versions and 401 since: the JSON script
		// element that carries the challenge. Pages that document Anubis
		// show the markup escaped, never as an element.
		{Name: "anubis", Body: `id="anubis_challenge"`},

		// DDoS-Guard browser check.
		{Name: "ddos-guard", Body: "<title>DDoS-Guard</title>", Statuses: challengeStatuses()},
	}
}

// matcher is a compiled Marker: canonical header name, lower-cased value,
// and the body conditions as needles of the classifier's automaton.
type matcher struct {
	name     string
	header   string // canonical MIME header key; "" when no header condition
	value    string // lower-cased
	body     int    // needle id of Body; noNeedle when no body condition
	also     int    // needle id of AlsoBody; noNeedle when no second condition
	json     bool   // the body condition applies to JSON bodies too
	statuses []int
}

// noNeedle is the needle id of an absent body condition.
const noNeedle = -1

// needles assigns ids to the distinct lower-cased strings searched in body
// heads, so that each is looked for once however many markers use it.
type needles struct {
	ids  map[string]int
	list []string
}

// id returns the id of s (lower-cased), or noNeedle when s is empty.
func (n *needles) id(s string) int {
	if s == "" {
		return noNeedle
	}
	s = lowerASCII(s)
	if id, ok := n.ids[s]; ok {
		return id
	}
	if n.ids == nil {
		n.ids = map[string]int{}
	}
	n.ids[s] = len(n.list)
	n.list = append(n.list, s)
	return len(n.list) - 1
}

func compile(ms []Marker, ns *needles) []matcher {
	out := make([]matcher, 0, len(ms))
	for _, m := range ms {
		if m.Header == "" && m.Body == "" {
			continue
		}
		name := m.Name
		if name == "" {
			name = "custom"
		}
		mt := matcher{
			name:     name,
			value:    lowerASCII(m.Value),
			body:     ns.id(m.Body),
			also:     noNeedle,
			json:     m.JSON,
			statuses: slices.Clone(m.Statuses),
		}
		if m.Header != "" {
			mt.header = textproto.CanonicalMIMEHeaderKey(m.Header)
		}
		if mt.body != noNeedle {
			mt.also = ns.id(m.AlsoBody)
		}
		out = append(out, mt)
	}
	return out
}

func (m *matcher) appliesTo(status int) bool {
	return len(m.statuses) == 0 || slices.Contains(m.statuses, status)
}

// matchHeader reports whether the header condition holds (true when there
// is none).
func (m *matcher) matchHeader(h http.Header) bool {
	return m.header == "" || m.matchValues(h[m.header])
}

// matchValues reports whether one of the header field's values satisfies
// the marker (any value when the marker names none).
func (m *matcher) matchValues(vs []string) bool {
	if len(vs) == 0 {
		return false
	}
	if m.value == "" {
		return true
	}
	for _, v := range vs {
		if containsFold(v, m.value) {
			return true
		}
	}
	return false
}

// matchBody reports whether the body conditions hold, given found, the
// needles the automaton found in the body head (true when there is no body
// condition).
func (m *matcher) matchBody(found []int32) bool {
	if m.body == noNeedle {
		return true
	}
	return found[m.body] > 0 && (m.also == noNeedle || found[m.also] > 0)
}

// lowerASCII lower-cases the ASCII letters of s.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = foldByte(b[j])
			}
			return string(b)
		}
	}
	return s
}

func foldByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// containsFold reports whether s contains needle (already lower-case),
// ignoring ASCII case. It does not allocate.
func containsFold(s, needle string) bool {
	n := len(needle)
	if n == 0 {
		return true
	}
	for i := 0; i+n <= len(s); i++ {
		if foldByte(s[i]) != needle[0] {
			continue
		}
		j := 1
		for j < n && foldByte(s[i+j]) == needle[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}
