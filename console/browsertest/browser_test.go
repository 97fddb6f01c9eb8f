package browsertest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/console"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/redis/go-redis/v9"
)

// screenshot, when set, is where the queue's screenshot is written (the
// README's docs/console-queue.png: -screenshot ../../docs/console-queue.png).
var screenshot = flag.String("screenshot", "", "write the queue's screenshot to this PNG file")

// egressaudit is the audit log's verifier, built once.
var egressaudit string

func TestMain(m *testing.M) {
	flag.Parse()
	redis.SetLogger(quiet{})
	path, remove, err := testprog.BuildBinary("github.com/egresskit/egresskit/cmd/egressaudit", "egressaudit")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	egressaudit = path
	code := redistest.Main(m).Run()
	remove()
	os.Exit(code)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

const (
	proxyUser   = "crawler"
	proxyPass   = "Pr0xyS3cretPass"
	secretQuery = "QueryS3cretValue"
	token       = "console-t0ken-for-tests-4f9a2c71b8"
	refusal     = "Access denied: TestBot is blocked by policy."
)

// site refuses /page (a 403 naming the bot) and answers anything else.
func site(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var after atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/page" {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "<html><body>"+refusal+"</body></html>")
			return
		}
		after.Add(1)
		io.WriteString(w, "<html><body>welcome back</body></html>")
	}))
	t.Cleanup(srv.Close)
	return srv, &after
}

// worker is one crawler process's chain on the shared Redis, sending
// through a real proxy that requires a password.
func worker(t *testing.T, addr, prefix, proxy string) *egresskit.Transport {
	t.Helper()
	st, err := redisstore.New(redistest.Dial(t, addr), redisstore.Config{Prefix: prefix, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "tinyproxy", Proxy: proxy}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	tr, err := egresskit.New(egresskit.Config{Store: st, Egress: pool, IgnoreRobots: true, UserAgent: "TestBot/1.0",
		Retry: retry.Policy{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func get(t *testing.T, tr *egresskit.Transport, u string) (*http.Response, error) {
	t.Helper()
	resp, err := (&http.Client{Transport: tr}).Get(u)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// browser returns a chromedp context of a fresh headless Chromium.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := testprog.Need(t, "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(900, 1000))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, on a context without a deadline
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// do runs steps in the browser, each call bounded to 30s.
func do(ctx context.Context, steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// run runs one action that returns a value, bounded to 30s.
func run[T any](ctx context.Context, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// pages collects the HTML of every page the browser showed.
type pages struct{ html []string }

func (p *pages) grab(ctx context.Context, t *testing.T) string {
	t.Helper()
	h, err := run(ctx, chromedp.OuterHTML("html"))
	if err != nil {
		t.Fatal(err)
	}
	p.html = append(p.html, h)
	return h
}

// TestConsoleInBrowser: a worker's chain is refused through a real proxy
// with a password and halts the host in a real Redis; the console, served
// over its own Store, shows it in the queue with its evidence; in Chromium
// an operator signs in, opens the host and resumes it with a reason; then
// the operator signs out, and the queue asks for the token again;
// a second worker sends to the host again, and egressaudit verify accepts
// the console's audit log with the resume in it. No page shows the proxy
// password or the secret query value.
func TestConsoleInBrowser(t *testing.T) {
	addr, prefix := redistest.Addr(t), redistest.Prefix(t)
	tiny := testprog.Tinyproxy(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
	origin, after := site(t)

	w1 := worker(t, addr, prefix, tiny.URL())
	resp, err := get(t, w1, origin.URL+"/page?api_key="+secretQuery)
	if err != nil || !egresskit.Halted(resp) {
		t.Fatalf("the first worker was not refused: %v", err)
	}
	key, _ := w1.HostKey(origin.URL)

	// The console: another Store on the same Redis, an audit log of its own.
	logPath := filepath.Join(t.TempDir(), "console.audit")
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: logPath, SyncEachLine: true})
	if err != nil {
		t.Fatal(err)
	}
	cst, err := redisstore.New(redistest.Dial(t, addr), redisstore.Config{Prefix: prefix, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.New(console.Config{Store: cst, Audit: audit, AuditFiles: []string{logPath}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/halts/", http.StripPrefix("/ops/halts", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base := srv.URL + "/ops/halts/"

	ctx := browser(t)
	var seen pages
	if err := do(ctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(`input[name="token"]`),
		chromedp.SendKeys(`input[name="token"]`, token),
		chromedp.Click(`button[type="submit"]`),
		chromedp.WaitVisible(`section.card`),
	); err != nil {
		page, _ := run(ctx, chromedp.OuterHTML("html"))
		t.Fatalf("signing in: %v\n%s", err, page)
	}
	queue := seen.grab(ctx, t)
	for _, want := range []string{key, "403", "TestBot is blocked by policy", "api_key=REDACTED", "Breaker", "Pacing"} {
		if !strings.Contains(queue, want) {
			t.Errorf("the queue does not show %q:\n%s", want, queue)
		}
	}
	png, err := run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "console-queue.png")
	if *screenshot != "" {
		shot = *screenshot
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("the screenshot is not a PNG")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}

	// On a phone's width nothing overflows sideways.
	if err := do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	overflow, err := run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil {
		t.Fatal(err)
	}
	if err := do(ctx, chromedp.EmulateViewport(900, 1000)); err != nil {
		t.Fatal(err)
	}
	if overflow {
		t.Error("the queue is wider than a phone's screen")
	}

	if err := do(ctx,
		chromedp.Click(`section.card h2 a`),
		chromedp.WaitVisible(`form[action="resume"]`),
	); err != nil {
		t.Fatalf("opening the host: %v", err)
	}
	seen.grab(ctx, t)
	if err := do(ctx,
		chromedp.SendKeys(`form[action="resume"] input[name="by"]`, "Ana Operator"),
		chromedp.SendKeys(`form[action="resume"] input[name="reason"]`, "The site's owner allowed our crawler"),
		chromedp.Click(`form[action="resume"] button`),
		chromedp.WaitVisible(`p.done`),
	); err != nil {
		t.Fatalf("resuming: %v", err)
	}
	done := seen.grab(ctx, t)
	if !strings.Contains(done, "Resumed") || !strings.Contains(done, "Ana Operator") || strings.Contains(done, `action="resume"`) {
		t.Errorf("the host page after resume:\n%s", done)
	}

	// Signing out ends the session: the queue asks for the token again.
	if err := do(ctx,
		chromedp.Click(`form[action="logout"] button`),
		chromedp.WaitVisible(`input[name="token"]`),
		chromedp.Navigate(base),
		chromedp.WaitVisible(`input[name="token"]`),
	); err != nil {
		t.Fatalf("signing out: %v", err)
	}
	if out := seen.grab(ctx, t); strings.Contains(out, "section class=\"card\"") || strings.Contains(out, "Review "+key) {
		t.Errorf("the queue after sign-out:\n%s", out)
	}

	// Every worker may send again: a second worker, on its own Store.
	w2 := worker(t, addr, prefix, tiny.URL())
	if resp, err := get(t, w2, origin.URL+"/after"); err != nil || resp.StatusCode != 200 || after.Load() != 1 {
		t.Errorf("a second worker after the resume: %v, %d requests reached the host", err, after.Load())
	}
	if resp, err := get(t, w1, origin.URL+"/after"); err != nil || resp.StatusCode != 200 {
		t.Errorf("the first worker after the resume: %v", err)
	}

	audit.Close()
	out, err := exec.Command(egressaudit, "verify", logPath).CombinedOutput()
	if err != nil {
		t.Errorf("egressaudit verify: %v\n%s", err, out)
	}
	out, err = exec.Command(egressaudit, "show", "-kind", "resume", logPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), key) || !strings.Contains(string(out), "Ana Operator") ||
		!strings.Contains(string(out), "The site's owner allowed our crawler") {
		t.Errorf("egressaudit show -kind resume: %v\n%s", err, out)
	}

	// A POST without the CSRF token is refused (the token itself passes).
	form := url.Values{"h": {key}, "by": {"x"}, "reason": {"y"}}
	req, _ := http.NewRequest("POST", base+"keep", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST without the CSRF token: %v, %v; want 403", resp.Status, err)
	} else {
		resp.Body.Close()
	}

	// Read-only: the same host, halted again, has no form.
	if resp, err := get(t, w1, origin.URL+"/page?api_key="+secretQuery); err != nil || !egresskit.Halted(resp) {
		t.Fatalf("halting the host again: %v", err)
	}
	ro, _ := console.New(console.Config{Store: cst, ReadOnly: true})
	rosrv := httptest.NewServer(http.StripPrefix("/ro", ro))
	t.Cleanup(rosrv.Close)
	// Navigate returns once the page has loaded.
	if err := do(ctx, chromedp.Navigate(rosrv.URL+"/ro/")); err != nil {
		t.Fatal(err)
	}
	roQueue := seen.grab(ctx, t)
	if err := do(ctx, chromedp.Navigate(rosrv.URL+"/ro/host?h="+url.QueryEscape(key))); err != nil {
		t.Fatal(err)
	}
	roHost := seen.grab(ctx, t)
	if strings.Contains(roQueue+roHost, "<form") || !strings.Contains(roQueue, "Review "+key) || !strings.Contains(roHost, "TestBot is blocked") {
		t.Errorf("read-only pages hold a form, or not the host:\n%s\n%s", roQueue, roHost)
	}

	for i, p := range seen.html {
		for _, secret := range []string{proxyPass, secretQuery, token} {
			if strings.Contains(p, secret) {
				t.Errorf("page %d shows a secret %q", i, secret)
			}
		}
	}
}
