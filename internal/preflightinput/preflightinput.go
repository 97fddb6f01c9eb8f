// Package preflightinput reads the preflight command's target and proxy
// files: one target or proxy per line, validated as probe.Run validates
// them (package probeinput), with errors that name the line.
package preflightinput

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/probeinput"
	"github.com/egresskit/egresskit/probe"
	"github.com/egresskit/egresskit/telemetry"
)

// ErrNoProxies: a proxy list is empty.
var ErrNoProxies = errors.New("probe: no proxies")

// utf8BOM is the UTF-8 encoding of U+FEFF, the byte order mark.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// lineError carries the line number of an input error out of lines.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return e.err.Error() }

// lines calls fn for every non-blank, non-comment ('#') line of r with its
// 1-based number and its whitespace-separated fields. A UTF-8 byte order
// mark at the start of r is skipped, as editors on some systems write one. A line longer than
// probeinput.MaxLineLength stops the scan with a *lineError naming it; errors from fn
// are returned as they are; a read error is returned wrapped.
func lines(r io.Reader, fn func(line int, fields []string) error) error {
	br := bufio.NewReaderSize(r, 4096)
	if head, err := br.Peek(len(utf8BOM)); err == nil && bytes.Equal(head, utf8BOM) {
		br.Discard(len(utf8BOM))
	}
	buf := make([]byte, 0, 256)
	for n := 1; ; n++ {
		buf = buf[:0]
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			if len(buf)+len(frag) > probeinput.MaxLineLength+1 { // +1: the newline
				return &lineError{line: n, err: fmt.Errorf("%w: line longer than %d bytes", probeinput.ErrTooLong, probeinput.MaxLineLength)}
			}
			buf = append(buf, frag...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("probe: reading line %d: %w", n, err)
		}
		line := bytes.TrimSpace(buf)
		if len(line) > 0 && line[0] != '#' {
			if ferr := fn(n, strings.Fields(string(line))); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// Targets reads a target list: one target per line, "URL" or
// "URL EGRESS" separated by white space, where EGRESS is a proxy URL, an
// endpoint ID or "direct". Blank lines and lines starting with '#' are
// skipped. Every URL is validated as probe.Run would validate it.
//
// Errors name the 1-based line: a *probe.TargetError wrapping one of
// probeinput's ErrTooLong, ErrSyntax, ErrMalformedURL,
// ErrUnsupportedScheme, ErrMissingHost or ErrBadPort; a
// *probe.InvalidProxyError for a malformed proxy URL in the EGRESS field;
// probe.ErrNoTargets when there is no target at all;
// probe.ErrTooManyProbes past probeinput.MaxProbes lines.
func Targets(r io.Reader) ([]probe.Target, error) {
	var targets []probe.Target
	err := lines(r, func(n int, f []string) error {
		if len(f) > 2 {
			return &probe.TargetError{Index: len(targets), Line: n, Err: fmt.Errorf("%w: %d fields (want URL [EGRESS])", probeinput.ErrSyntax, len(f))}
		}
		if len(targets) == probeinput.MaxProbes {
			return fmt.Errorf("%w: more than %d targets", probe.ErrTooManyProbes, probeinput.MaxProbes)
		}
		if _, _, err := probeinput.TargetURL(f[0]); err != nil {
			return &probe.TargetError{Index: len(targets), Line: n, URL: showURL(f[0]), Err: err}
		}
		t := probe.Target{URL: f[0]}
		if len(f) == 2 {
			t.Egress = f[1]
			if probeinput.IsProxyURL(t.Egress) {
				if _, err := probeinput.ProxyURL(t.Egress); err != nil {
					return &probe.InvalidProxyError{Line: n, Err: err}
				}
			}
		}
		targets = append(targets, t)
		return nil
	})
	var le *lineError
	if errors.As(err, &le) {
		return nil, &probe.TargetError{Index: len(targets), Line: le.line, Err: le.err}
	}
	if err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, probe.ErrNoTargets
	}
	return targets, nil
}

// showURL returns the redacted form of a URL for an error message, or ""
// when s is too long or does not parse, as package probe shows it.
func showURL(s string) string {
	if len(s) > 256 {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return telemetry.Redactor{}.RedactURL(u)
}

// Proxies reads a proxy list: one endpoint per line, "PROXY-URL" or
// "ID PROXY-URL", where PROXY-URL is an http, https, socks5 or socks5h URL
// (credentials allowed) or "direct", optionally followed by labels
// "key=value" for egress rules (Options.Rules), as in
// "fra-1 http://10.0.0.5:3128 region=eu kind=datacenter". Blank lines and
// lines starting with '#' are skipped. An endpoint without an ID is named by its URL without
// credentials. The URLs are validated as package egress validates them.
//
// Errors name the 1-based line: a *probe.InvalidProxyError wrapping one of
// probeinput's ErrTooLong, ErrSyntax (too many fields, a duplicate ID),
// ErrMalformedURL, ErrUnsupportedScheme, ErrMissingHost or ErrBadPort;
// ErrNoProxies when there is none; probe.ErrTooManyProbes past
// probeinput.MaxProbes lines.
func Proxies(r io.Reader) ([]egress.Endpoint, error) {
	var eps []egress.Endpoint
	seen := map[string]bool{}
	err := lines(r, func(n int, f []string) error {
		var id, raw string
		var labels map[string]string
		for len(f) > 1 {
			k, v, ok := strings.Cut(f[len(f)-1], "=")
			if !ok || strings.Contains(f[len(f)-1], "://") {
				break
			}
			if k == "" {
				return &probe.InvalidProxyError{Line: n, Err: fmt.Errorf("%w: label %q without a key", probeinput.ErrSyntax, f[len(f)-1])}
			}
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
			f = f[:len(f)-1]
		}
		switch len(f) {
		case 1:
			raw = f[0]
		case 2:
			id, raw = f[0], f[1]
		default:
			return &probe.InvalidProxyError{Line: n, Err: fmt.Errorf("%w: %d fields (want [ID] PROXY-URL [key=value ...])", probeinput.ErrSyntax, len(f))}
		}
		u, err := probeinput.ProxyURL(raw)
		if err != nil {
			return &probe.InvalidProxyError{ID: id, Line: n, Err: err}
		}
		if id == "" {
			id = probeinput.Direct
			if u != nil {
				id = telemetry.Redactor{}.RedactURL(u)
			}
		}
		if seen[id] {
			return &probe.InvalidProxyError{ID: id, Line: n, Err: fmt.Errorf("%w: duplicate ID", probeinput.ErrSyntax)}
		}
		if len(eps) == probeinput.MaxProbes {
			return fmt.Errorf("%w: more than %d proxies", probe.ErrTooManyProbes, probeinput.MaxProbes)
		}
		seen[id] = true
		eps = append(eps, egress.Endpoint{ID: id, Proxy: raw, Labels: labels})
		return nil
	})
	var le *lineError
	if errors.As(err, &le) {
		return nil, &probe.InvalidProxyError{Line: le.line, Err: le.err}
	}
	if err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, ErrNoProxies
	}
	return eps, nil
}
