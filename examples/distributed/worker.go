package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
)

// workerConfig is what the coordinator tells a worker.
type workerConfig struct {
	id      int
	redis   string
	prefix  string
	pages   int
	targets []string // base URLs
}

// line is one JSON line a worker prints: a request it made, an escalation,
// or its view of a host's shared state at the end.
type line struct {
	Kind   string `json:"kind"` // "request", "escalation" or "state"
	Worker int    `json:"worker"`
	Host   string `json:"host"` // the host key

	// request
	Path string `json:"path,omitempty"`
	// Sent holds the status of each attempt that reached the host (0 for
	// one that got no response); attempts refused before sending are not
	// in it.
	Sent []int `json:"sent,omitempty"`
	// Result is the final status, or why the request was not sent.
	Result string `json:"result,omitempty"`

	// escalation
	Status int    `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"`

	// state
	Breaker   string  `json:"breaker,omitempty"`
	Halted    bool    `json:"halted,omitempty"`
	PerMinute float64 `json:"per_minute,omitempty"`
}

// printer writes lines to a writer shared by goroutines.
type printer struct {
	mu  sync.Mutex // guards enc
	enc *json.Encoder
}

func (p *printer) print(l line) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enc.Encode(l)
}

// sentKey is the context key of a request's *attempts.
type sentKey struct{}

// attempts collects the statuses of one request's attempts that were sent.
type attempts struct {
	mu       sync.Mutex // guards statuses
	statuses []int
}

// countSent is the observer that fills each request's attempts: an attempt
// was sent when it got a status or took time on the wire (one refused
// before sending has neither).
func countSent(ctx context.Context, e *telemetry.Event) {
	a, ok := ctx.Value(sentKey{}).(*attempts)
	if !ok || (e.Status == 0 && e.Duration == 0) {
		return
	}
	a.mu.Lock()
	a.statuses = append(a.statuses, e.Status)
	a.mu.Unlock()
}

// runWorker crawls cfg.pages pages of every target through a chain whose
// per-host state lives in Redis, printing a line per request, then its view
// of each host's state.
func runWorker(ctx context.Context, cfg workerConfig, stdout io.Writer) error {
	// The coordinator holds our stdin open; when it goes away, so do we.
	// This goroutine blocks in a read of stdin until then: it ends with
	// the process, which runWorker is the whole of.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	client, err := dialRedis(ctx, cfg.redis)
	if err != nil {
		return err
	}
	defer client.Close()
	state, err := redisstore.New(client, redisstore.Config{
		Prefix:    cfg.prefix,
		HostState: hostStateConfig(),
		// A worker that cannot reach the shared state stops sending rather
		// than crawl on with a private one.
		OnRedisError: redisstore.FailClosed,
		// Generous, for busy machines; the default is 50ms.
		Timeout: time.Second,
	})
	if err != nil {
		return err
	}
	out := &printer{enc: json.NewEncoder(stdout)}
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	chain, err := egresskit.New(egresskit.Config{
		Base:      base,
		UserAgent: userAgent,
		Store:     settled{state},
		Retry: retry.Policy{
			MaxRetries: 3,
			BaseDelay:  50 * time.Millisecond,
			MaxDelay:   2 * time.Second,
			Deadline:   10 * time.Second,
		},
		Observers: []telemetry.Observer{telemetry.ObserverFunc(countSent)},
		OnEscalate: func(e egresskit.Escalation) {
			out.print(line{Kind: "escalation", Worker: cfg.id, Host: e.Host, Status: e.Status, Reason: e.Reason})
		},
	})
	if err != nil {
		return err
	}
	httpClient := &http.Client{Transport: chain}

	keys := make([]string, len(cfg.targets))
	for i, t := range cfg.targets {
		if keys[i], err = chain.HostKey(t); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	for i, target := range cfg.targets {
		wg.Go(func() {
			for page := range cfg.pages {
				path := fmt.Sprintf("/w%d/page/%d", cfg.id, page)
				sent, result := get(ctx, httpClient, target+path)
				out.print(line{Kind: "request", Worker: cfg.id, Host: keys[i], Path: path, Sent: sent, Result: result})
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, key := range keys {
		st, err := chain.Status(ctx, key)
		if err != nil {
			return err
		}
		out.print(line{Kind: "state", Worker: cfg.id, Host: key, Breaker: st.Breaker.String(), Halted: st.Halted, PerMinute: st.PerMinute})
	}
	return nil
}

// get GETs rawURL and returns the statuses of the attempts sent and the
// request's result.
func get(ctx context.Context, c *http.Client, rawURL string) (sent []int, result string) {
	a := &attempts{}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, sentKey{}, a), http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err.Error()
	}
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		result = strconv.Itoa(resp.StatusCode)
	}
	switch {
	case errors.Is(err, egresskit.ErrHalted):
		result = "host halted"
	case errors.Is(err, egresskit.ErrOpen):
		result = "breaker open"
	case errors.Is(err, redisstore.ErrUnavailable):
		result = "redis unavailable"
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		result = telemetry.Redactor{}.RedactError(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.statuses, result
}
