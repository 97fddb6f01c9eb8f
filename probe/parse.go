package probe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/egresskit/egresskit/egress"
)

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
// MaxLineLength stops the scan with a *lineError naming it; errors from fn
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
			if len(buf)+len(frag) > MaxLineLength+1 { // +1: the newline
				return &lineError{line: n, err: fmt.Errorf("%w: line longer than %d bytes", ErrTooLong, MaxLineLength)}
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

// ParseTargets reads a target list: one target per line, "URL" or
// "URL EGRESS" separated by white space, where EGRESS is a proxy URL, an
// endpoint ID or "direct". Blank lines and lines starting with '#' are
// skipped. Every URL is validated as Run would validate it.
//
// Errors name the 1-based line: a *TargetError wrapping ErrTooLong,
// ErrSyntax, ErrMalformedURL, ErrUnsupportedScheme, ErrMissingHost or
// ErrBadPort; a *InvalidProxyError for a malformed proxy URL in the EGRESS field;
// ErrNoTargets when there is no target at all; ErrTooManyProbes past
// MaxProbes lines.
func ParseTargets(r io.Reader) ([]Target, error) {
	var targets []Target
	err := lines(r, func(n int, f []string) error {
		if len(f) > 2 {
			return &TargetError{Index: len(targets), Line: n, Err: fmt.Errorf("%w: %d fields (want URL [EGRESS])", ErrSyntax, len(f))}
		}
		if len(targets) == MaxProbes {
			return fmt.Errorf("%w: more than %d targets", ErrTooManyProbes, MaxProbes)
		}
		if _, _, err := parseTargetURL(f[0]); err != nil {
			return &TargetError{Index: len(targets), Line: n, URL: showURL(f[0]), Err: err}
		}
		t := Target{URL: f[0]}
		if len(f) == 2 {
			t.Egress = f[1]
			if isProxyURL(t.Egress) {
				if _, err := parseProxyURL(t.Egress); err != nil {
					return &InvalidProxyError{Line: n, Err: err}
				}
			}
		}
		targets = append(targets, t)
		return nil
	})
	var le *lineError
	if errors.As(err, &le) {
		return nil, &TargetError{Index: len(targets), Line: le.line, Err: le.err}
	}
	if err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, ErrNoTargets
	}
	return targets, nil
}

// showURL returns the redacted form of a URL for an error message, or ""
// when s is too long or does not parse.
func showURL(s string) string {
	if len(s) > 256 {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return redactURL(u)
}

// ParseProxies reads a proxy list: one endpoint per line, "PROXY-URL" or
// "ID PROXY-URL", where PROXY-URL is an http, https, socks5 or socks5h URL
// (credentials allowed) or "direct", optionally followed by labels
// "key=value" for egress rules (Options.Rules), as in
// "fra-1 http://10.0.0.5:3128 region=eu kind=datacenter". Blank lines and
// lines starting with '#' are skipped. An endpoint without an ID is named by its URL without
// credentials. The URLs are validated as package egress validates them.
//
// Errors name the 1-based line: a *InvalidProxyError wrapping ErrTooLong,
// ErrSyntax (too many fields, a duplicate ID), ErrMalformedURL,
// ErrUnsupportedScheme, ErrMissingHost or ErrBadPort; ErrNoProxies when
// there is none.
func ParseProxies(r io.Reader) ([]egress.Endpoint, error) {
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
				return &InvalidProxyError{Line: n, Err: fmt.Errorf("%w: label %q without a key", ErrSyntax, f[len(f)-1])}
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
			return &InvalidProxyError{Line: n, Err: fmt.Errorf("%w: %d fields (want [ID] PROXY-URL [key=value ...])", ErrSyntax, len(f))}
		}
		e, err := newExit(id, raw)
		if err != nil {
			return &InvalidProxyError{ID: id, Line: n, Err: err}
		}
		if id == "" {
			id = e.shown
			if e.proxy == nil {
				id = direct
			}
		}
		if seen[id] {
			return &InvalidProxyError{ID: id, Line: n, Err: fmt.Errorf("%w: duplicate ID", ErrSyntax)}
		}
		if len(eps) == MaxProbes {
			return fmt.Errorf("%w: more than %d proxies", ErrTooManyProbes, MaxProbes)
		}
		seen[id] = true
		eps = append(eps, egress.Endpoint{ID: id, Proxy: raw, Labels: labels})
		return nil
	})
	var le *lineError
	if errors.As(err, &le) {
		return nil, &InvalidProxyError{Line: le.line, Err: le.err}
	}
	if err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, ErrNoProxies
	}
	return eps, nil
}
