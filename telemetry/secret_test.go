package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/telemetry"
)

// TestSecretAppearsNowhere puts one unique secret into a target URL's
// userinfo and query, a proxy URL, request headers and transport errors,
// builds events the way the chain does, and checks that the secret is in
// no log line, audit line or error string this package produces.
func TestSecretAppearsNowhere(t *testing.T) {
	const secret = "Zq7-unique-s3cret-91xK"
	target, _ := url.Parse("https://crawler:" + secret + "@example.com/a/b;jsessionid=" + secret +
		"?q=1&access_token=" + secret + "&X-Amz-Signature=" + secret + "#id_token=" + secret)
	proxy, _ := url.Parse("http://puser:" + secret + "@127.0.0.1:3128")
	header := http.Header{
		"Authorization":       {"Bearer " + secret},
		"Proxy-Authorization": {"Basic " + secret},
		"Cookie":              {"sid=" + secret},
		"X-Api-Key":           {secret},
		"Referer":             {target.String()},
	}
	errs := []error{
		&url.Error{Op: "Get", URL: target.String(), Err: fmt.Errorf("proxyconnect tcp: %s: %w", proxy, io.ErrUnexpectedEOF)},
		fmt.Errorf("egress: endpoint %s: %w", proxy.String(), errors.New("dial refused")),
		fmt.Errorf("upstream rejected Authorization: %s", header.Get("Authorization")),
	}

	var logs bytes.Buffer
	jsonLog := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	textLog := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit := newAudit(t, telemetry.AuditConfig{Path: path})
	var events []telemetry.Event
	collect := telemetry.ObserverFunc(func(_ context.Context, e *telemetry.Event) { events = append(events, *e) })
	obs := telemetry.Fanout(telemetry.NewSlog(jsonLog, telemetry.SlogOptions{}),
		telemetry.NewSlog(textLog, telemetry.SlogOptions{}), audit, collect)

	var strs []string
	for i, err := range errs {
		e := &telemetry.Event{
			Time: time.Now(), Host: target.Hostname(), Method: "GET",
			URL: (telemetry.Redactor{}).RedactURL(target), Attempt: i + 1, Retries: i,
			Outcome: classify.Transient, Egress: "p1", EgressReason: "affinity",
			Err: (telemetry.Redactor{}).RedactError(err),
		}
		obs.Observe(context.Background(), e)
		strs = append(strs, e.URL, e.Err)
	}
	// A careless producer that forgets to redact still leaks nothing
	// through the slog observer.
	careless := &telemetry.Event{URL: target.String(), Err: errs[0].Error(), Outcome: classify.Refused}
	telemetry.NewSlog(jsonLog, telemetry.SlogOptions{}).Observe(context.Background(), careless)
	telemetry.NewSlog(textLog, telemetry.SlogOptions{}).Observe(context.Background(), careless)
	audit.Observe(context.Background(), careless)

	strs = append(strs, (telemetry.Redactor{}).RedactURL(proxy), (telemetry.Redactor{}).RedactURLString(proxy.String()),
		fmt.Sprint((telemetry.Redactor{}).RedactHeader(header)))
	records := []error{
		auditrec.Robots(audit, "example.com", target.RequestURI(), false),
		auditrec.ForcedEgress(audit, "example.com", (telemetry.Redactor{}).RedactURL(proxy), "operator"),
		audit.Record("note", slog.Any("url", target), slog.Any("proxy", proxy), slog.Any("header", header),
			slog.Any("err", errs[0]), slog.String("raw", target.String()), slog.Any("query", target.Query())),
	}
	for _, err := range records {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}
	auditBytes, _ := os.ReadFile(path)
	for _, e := range events {
		strs = append(strs, fmt.Sprintf("%+v", e))
	}
	if err := verify(strings.NewReader("garbage " + secret + "\n")); err != nil {
		strs = append(strs, err.Error())
	}

	check := func(what, s string) {
		t.Helper()
		if strings.Contains(s, secret) {
			t.Errorf("secret found in %s: %s", what, s)
		}
	}
	check("slog output", logs.String())
	check("audit log", string(auditBytes))
	for _, s := range strs {
		check("produced string", s)
	}
	if logs.Len() == 0 || len(auditBytes) == 0 {
		t.Fatalf("nothing was written")
	}
	if !strings.Contains(string(auditBytes), telemetry.Redacted) {
		t.Errorf("audit log shows no redaction at all")
	}
}
