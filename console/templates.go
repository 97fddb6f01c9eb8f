package console

import (
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/audittrail"
)

// topData is what every page's header needs.
type topData struct {
	CSRF     string
	SignedIn bool // with a session: the header offers sign-out
}

type loginData struct {
	CSRF    string
	Wrong   bool
	Limited bool
}

type queueData struct {
	topData
	ReadOnly bool
	Now      time.Time
	Rows     []row
	More     bool // more halted hosts than shown
	Err      string
}

type hostData struct {
	topData
	ReadOnly  bool
	Host      string
	Done      string
	Status    *hoststate.Status
	StatusErr string
	Halts     []hoststate.Halt
	Notes     []hoststate.Note
	Err       string
	Trail     []audittrail.Line
	TrailErr  string
}

// topArgs are the arguments of the "top" template.
type topArgs struct {
	Title, CSRF string
	SignedIn    bool
}

type errorData struct {
	Code int
	Msg  string
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return time.Since(t).Round(time.Second).String() + " ago"
	},
	"join": func(s []string) string { return strings.Join(s, ", ") },
	"rate": func(pm float64) string {
		return strings.TrimRight(strings.TrimRight(strconvF(pm), "0"), ".") + "/min"
	},
	"future": func(t time.Time) bool { return t.After(time.Now()) },
	"top": func(title, csrf string, signedIn bool) topArgs {
		return topArgs{Title: title, CSRF: csrf, SignedIn: signedIn}
	},
}

const layout = `{{define "top"}}{{template "head" .Title}}
<header><a href="./">egresskit · halted hosts</a>{{if .SignedIn}}<form method="post" action="logout" class="out"><input type="hidden" name="csrf" value="{{.CSRF}}"><button type="submit" class="secondary">Sign out</button></form>{{end}}</header>
{{end}}
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.}} · egresskit</title>
<style>
body{font:16px/1.45 system-ui,sans-serif;margin:0;padding:0 1rem 2rem;max-width:60rem;color:#1b1b1b;background:#fafafa}
header{padding:.8rem 0;border-bottom:1px solid #ddd;margin-bottom:1rem}
header a{color:inherit;text-decoration:none;font-weight:600}
h1{font-size:1.3rem;margin:.6rem 0}
h2{font-size:1.1rem;margin:1.2rem 0 .4rem}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.8rem;margin:.8rem 0}
.card h2{margin:0 0 .4rem;word-break:break-all}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;margin:.4rem 0}
dt{color:#555}dd{margin:0;word-break:break-all}
pre{white-space:pre-wrap;word-break:break-all;background:#f3f3f3;padding:.5rem;border-radius:4px;font-size:.85rem;max-height:12rem;overflow:auto}
.badge{display:inline-block;padding:.05rem .45rem;border-radius:4px;background:#b3261e;color:#fff;font-size:.85rem}
.ok{background:#2e7d32}.muted{color:#666;font-size:.9rem}
.err{background:#fdecea;border:1px solid #f5c2c0;padding:.6rem;border-radius:4px}
.done{background:#e8f5e9;border:1px solid #b7dfb9;padding:.6rem;border-radius:4px}
form{display:grid;gap:.5rem;margin:.6rem 0}
label{display:grid;gap:.2rem;font-weight:600}
input,textarea,button{font:inherit;padding:.55rem;border:1px solid #bbb;border-radius:4px;width:100%;box-sizing:border-box}
button{background:#1a5fb4;color:#fff;border:0;font-weight:600;cursor:pointer}
button.secondary{background:#555}
header{display:flex;justify-content:space-between;align-items:center}
form.out{margin:0}form.out button{width:auto;padding:.3rem .7rem}
table{border-collapse:collapse;width:100%;font-size:.85rem}td,th{border-bottom:1px solid #e3e3e3;padding:.3rem;text-align:left;vertical-align:top;word-break:break-all}
@media(min-width:40rem){.forms{display:grid;grid-template-columns:1fr 1fr;gap:1rem}}
</style></head><body>
{{end}}
{{define "bottom"}}</body></html>{{end}}

{{define "login"}}{{template "top" (top "Sign in" .CSRF false)}}
<h1>Sign in</h1>
{{if .Wrong}}<p class="err">That token is not the console's.</p>{{end}}
{{if .Limited}}<p class="err">Too many wrong tokens: wait a few seconds and try again.</p>{{end}}
<form method="post" action="login">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<label>Access token <input type="password" name="token" autocomplete="current-password" required></label>
<button type="submit">Sign in</button>
</form>
{{template "bottom"}}{{end}}

{{define "error"}}{{template "top" (top "Error" "" false)}}
<h1>{{.Code}}</h1><p class="err">{{.Msg}}</p><p><a href="./">Back to the queue</a></p>
{{template "bottom"}}{{end}}

{{define "status"}}{{if .}}<dl>
<dt>Breaker</dt><dd>{{.Breaker}}{{if .ConsecutiveFailures}} ({{.ConsecutiveFailures}} failures){{end}}{{if future .OpenUntil}}, open until {{when .OpenUntil}}{{end}}</dd>
<dt>Pacing</dt><dd>{{rate .PerMinute}}{{if gt .Ceiling 0.0}}, ceiling {{rate .Ceiling}}{{end}}{{if future .PausedUntil}}, paused until {{when .PausedUntil}}{{end}}</dd>
<dt>Recent</dt><dd>{{.Recent}}</dd>
</dl>{{end}}{{end}}

{{define "evidence"}}<dl>
<dt>Halted</dt><dd>{{when .Time}} <span class="muted">{{ago .Time}}</span></dd>
{{if .Worker}}<dt>Worker</dt><dd>{{.Worker}}</dd>{{end}}
{{if .Status}}<dt>Status</dt><dd>{{.Status}}</dd>{{end}}
{{if .Reason}}<dt>Reason</dt><dd>{{.Reason}}</dd>{{end}}
{{if .Markers}}<dt>Markers</dt><dd>{{join .Markers}}</dd>{{end}}
{{if .Evidence}}<dt>Detector</dt><dd>{{.Evidence}}</dd>{{end}}
{{if .URL}}<dt>URL</dt><dd>{{.URL}}</dd>{{end}}
</dl>
{{if .BodyHead}}<pre class="body">{{.BodyHead}}</pre>{{end}}{{end}}

{{define "queue"}}{{template "top" (top "Halted hosts" .CSRF .SignedIn)}}
<h1>Halted hosts{{if .Rows}} <span class="badge">{{len .Rows}}</span>{{end}}</h1>
{{if .ReadOnly}}<p class="muted">Read-only: resuming is switched off here.</p>{{end}}
{{if .Err}}<p class="err">{{.Err}}</p>{{end}}
{{range .Rows}}<section class="card">
<h2><a href="host?h={{.Halt.Host}}">{{.Halt.Host}}</a> <span class="badge">halted</span></h2>
{{template "evidence" .Halt}}
{{if .Err}}<p class="muted">{{.Err}}</p>{{else}}{{template "status" .Status}}{{end}}
<p><a href="host?h={{.Halt.Host}}">Review {{.Halt.Host}} →</a></p>
</section>{{else}}{{if not .Err}}<p class="done">No host is halted.</p>{{end}}{{end}}
{{if .More}}<p class="muted">The newest {{len .Rows}} halted hosts are shown; egressctl halts lists them all.</p>{{end}}
{{template "bottom"}}{{end}}

{{define "host"}}{{template "top" (top .Host .CSRF .SignedIn)}}
<h1>{{.Host}} {{if .Status}}{{if .Status.Halted}}<span class="badge">halted</span>{{else}}<span class="badge ok">sending</span>{{end}}{{end}}</h1>
{{if eq .Done "resumed"}}<p class="done">Resumed: every worker may send to {{.Host}} again.</p>{{end}}
{{if eq .Done "kept"}}<p class="done">Kept halted; your note is recorded.</p>{{end}}
{{if .StatusErr}}<p class="err">{{.StatusErr}}</p>{{end}}
{{template "status" .Status}}
{{if .Err}}<p class="err">{{.Err}}</p>{{end}}
{{if and .Status .Status.Halted (not .ReadOnly)}}<div class="forms">
<form method="post" action="resume" class="card">
<h2>Resume</h2>
<input type="hidden" name="csrf" value="{{.CSRF}}"><input type="hidden" name="h" value="{{.Host}}">
<label>Your name <input name="by" required maxlength="128" autocomplete="name"></label>
<label>Reason (one line) <input name="reason" required maxlength="512"></label>
<button type="submit">Resume {{.Host}}</button>
</form>
<form method="post" action="keep" class="card">
<h2>Keep halted</h2>
<input type="hidden" name="csrf" value="{{.CSRF}}"><input type="hidden" name="h" value="{{.Host}}">
<label>Your name <input name="by" required maxlength="128" autocomplete="name"></label>
<label>Note (one line) <input name="reason" required maxlength="512"></label>
<button type="submit" class="secondary">Keep halted</button>
</form></div>{{end}}
<h2>Halts</h2>
{{range .Halts}}<section class="card">{{template "evidence" .}}</section>{{else}}<p class="muted">No halt recorded.</p>{{end}}
<h2>Notes</h2>
{{range .Notes}}<section class="card"><dl><dt>{{if .Resumed}}Resumed{{else}}Kept halted{{end}}</dt><dd>{{when .Time}} by {{.By}}</dd><dt>Why</dt><dd>{{.Text}}</dd></dl></section>{{else}}<p class="muted">No note yet.</p>{{end}}
<h2>Audit trail</h2>
{{if .TrailErr}}<p class="err">{{.TrailErr}}</p>{{end}}
{{if .Trail}}<table><tr><th>Time</th><th>Kind</th><th>Fields</th></tr>
{{range .Trail}}<tr><td>{{.Time}}</td><td>{{.Kind}}</td><td>{{.Fields}}</td></tr>{{end}}</table>{{else}}<p class="muted">No audit line for this host.</p>{{end}}
{{template "bottom"}}{{end}}
`

var pages = template.Must(template.New("console").Funcs(funcs).Parse(layout))

// render writes the page name with status code.
func (s *server) render(w http.ResponseWriter, code int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	pages.ExecuteTemplate(w, name, data)
}

func strconvF(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }
