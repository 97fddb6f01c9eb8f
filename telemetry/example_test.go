package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
)

func ExampleRedactor() {
	u, _ := url.Parse("https://crawler:hunter2@example.com/feed?page=2&api_key=abc123")
	fmt.Println((telemetry.Redactor{}).RedactURL(u))

	h := http.Header{"Authorization": {"Bearer abc123"}, "Accept": {"text/html"}}
	fmt.Println((telemetry.Redactor{}).RedactHeader(h))

	err := &url.Error{Op: "Get", URL: u.String(), Err: errors.New("connection reset")}
	fmt.Println((telemetry.Redactor{}).RedactError(err))
	// Output:
	// https://example.com/feed?page=2&api_key=REDACTED
	// map[Accept:[text/html] Authorization:[REDACTED]]
	// Get "https://example.com/feed?page=2&api_key=REDACTED": connection reset
}

// A crawler's request, observed as the chain would: one event per attempt,
// logged through slog.
func ExampleNewSlog() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "duration":
				return slog.Attr{} // vary from run to run
			case "url", "host":
				a.Value = slog.StringValue(strings.ReplaceAll(a.Value.String(), srv.Listener.Addr().String(), "test-server"))
			}
			return a
		},
	}))
	obs := telemetry.Fanout(telemetry.NewSlog(logger, telemetry.SlogOptions{}))

	u, _ := url.Parse(srv.URL + "/items?token=s3cret")
	start := time.Now()
	resp, err := http.Get(u.String())
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	obs.Observe(context.Background(), &telemetry.Event{
		Time: start, Host: u.Host, Method: http.MethodGet, URL: (telemetry.Redactor{}).RedactURL(u),
		Attempt: 1, Final: true, Status: resp.StatusCode, Outcome: classify.Transient,
		Breaker: "closed", Duration: time.Since(start),
	})
	// Output:
	// level=WARN msg="egress attempt" host=test-server method=GET url="http://test-server/items?token=REDACTED" attempt=1 retries=0 final=true status=503 outcome=transient markers="" egress="" egress_reason="" breaker=closed wait=0s error=""
}

func ExampleNewAudit() {
	dir, _ := os.MkdirTemp("", "audit")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.jsonl")

	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path})
	if err != nil {
		fmt.Println(err)
		return
	}
	audit.Observe(context.Background(), &telemetry.Event{Host: "example.com", Method: "GET", Attempt: 1, Status: 403, Outcome: classify.Refused})
	audit.Record("review", slog.String("host", "example.com"), slog.String("by", "ops"), slog.Bool("allowed", false))
	audit.Close()

	f, _ := os.Open(path)
	defer f.Close()
	head, err := telemetry.Verifier{}.Verify(f)
	fmt.Println("verify:", head.Seq, err)

	// Editing any line breaks the chain at that line.
	b, _ := os.ReadFile(path)
	edited := strings.Replace(string(b), `"allowed":false`, `"allowed":true`, 1)
	_, err = telemetry.Verifier{}.Verify(strings.NewReader(edited))
	fmt.Println("verify edited:", err)
	// Output:
	// verify: 4 <nil>
	// verify edited: telemetry: audit log line 3: hash mismatch: the line was edited
}

// Provenance records go into the same hash chain as the crawl's lines.
func ExampleAudit_Consent() {
	dir, _ := os.MkdirTemp("", "audit")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.jsonl")
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(audit.Consent(telemetry.Consent{Subject: "news.example", Kind: "host",
		State: "granted", Licence: "CC-BY-4.0"}))
	fmt.Println(audit.Minimisation(telemetry.Minimisation{Subject: "news.example", Kind: "host",
		Fields: []string{"author_email"}}))
	fmt.Println(audit.Deletion(telemetry.Deletion{Request: "DSR-1", Stage: "received",
		Subject: "news-2026", Kind: "dataset"}))
	fmt.Println(audit.Deletion(telemetry.Deletion{Request: "DSR-1", Stage: "someday",
		Subject: "news-2026", Kind: "dataset"}))
	audit.Close()
	_, err = telemetry.Verifier{}.VerifyFiles(path)
	fmt.Println("verify:", err)
	// Output:
	// <nil>
	// <nil>
	// <nil>
	// telemetry: invalid provenance record: deletion stage "someday" (want received or completed)
	// verify: <nil>
}
