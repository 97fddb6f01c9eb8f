// Command jurisdiction sends requests for hosts in several jurisdictions
// through an egress pool whose rules pin them to proxies by label — German
// and French sites to region=eu, a government site to a US datacenter —
// and prints, per host, the rule that governed it and the endpoint chosen.
// Then, with the eu proxies drained, it shows the eu hosts failing with
// the rule's error rather than leaving from the US. It needs no network:
// the proxies and the origin are local test servers on 127.0.0.1.
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/egresskit/egresskit/egress"
)

// rules.json is the same file preflight reads with -rules.
//
//go:embed rules.json
var rulesJSON string

// hosts are the hosts visited, in order.
var hosts = []string{
	"www.bund.de", "shop.example.fr", "example.fr", "www.global.de",
	"portal.gov.example", "example.com", "news.example.org",
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "jurisdiction:", err)
		os.Exit(1)
	}
}

// labProxy is a forward proxy for the example: it sends every request,
// whatever its host, to the one local origin, marking the response with
// its name. A real deployment uses real proxies (squid, tinyproxy, a
// SOCKS server) at their own addresses.
func labProxy(name string, origin *url.URL) *httptest.Server {
	tr := &http.Transport{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = origin.Scheme, origin.Host // the lab's whole internet
		out.Host = r.URL.Host
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("X-Left-Via", name)
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
}

func run(w io.Writer) error {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))
	defer origin.Close()
	ou, _ := url.Parse(origin.URL)

	type site struct {
		id     string
		labels map[string]string
	}
	sites := []site{
		{"fra-1", map[string]string{"region": "eu", "jurisdiction": "de", "kind": "residential"}},
		{"par-1", map[string]string{"region": "eu", "jurisdiction": "fr", "kind": "datacenter"}},
		{"nyc-1", map[string]string{"region": "us", "jurisdiction": "us", "kind": "residential"}},
		{"iad-dc", map[string]string{"region": "us", "jurisdiction": "us", "kind": "datacenter"}},
	}
	var eps []egress.Endpoint
	for _, s := range sites {
		p := labProxy(s.id, ou)
		defer p.Close()
		eps = append(eps, egress.Endpoint{ID: s.id, Proxy: p.URL, Labels: s.labels})
	}

	rules, err := egress.ReadRules(strings.NewReader(rulesJSON))
	if err != nil {
		return err
	}
	pool, err := egress.New(egress.Config{Endpoints: eps, Rules: rules})
	if err != nil {
		return err
	}
	defer pool.Close()
	client := &http.Client{Transport: pool}

	visit := func(tw io.Writer) {
		fmt.Fprintln(tw, "host\trule\tendpoint\treason\tleft via\tresult")
		for _, h := range hosts {
			var c egress.Choice
			req, _ := http.NewRequestWithContext(egress.WithRecorder(context.Background(), &c),
				http.MethodGet, "http://"+h+"/", nil)
			rule, via, result := "-", "-", ""
			resp, err := client.Do(req)
			var re *egress.RuleError
			switch {
			case errors.As(err, &re):
				rule, result = re.Rule, "refused: no usable eligible endpoint"
			case err != nil:
				result = "error: " + err.Error()
			default:
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				via, result = resp.Header.Get("X-Left-Via"), string(body)
			}
			if c.Rule != "" {
				rule = c.Rule
			}
			ep, reason := c.EndpointID, c.Reason
			if ep == "" {
				ep, reason = "-", "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", h, rule, ep, reason, via, result)
		}
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	visit(tw)
	tw.Flush()

	fmt.Fprintln(w, "\nthe eu proxies are drained:")
	for _, s := range sites {
		if s.labels["region"] == "eu" {
			if err := pool.Drain(s.id); err != nil {
				return err
			}
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	visit(tw)
	return tw.Flush()
}
