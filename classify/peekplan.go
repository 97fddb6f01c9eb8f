package classify

import (
	"context"
	"io"
	"net/http"
	"slices"
)

// shouldPeek decides whether the body of resp is worth inspecting, and
// reports when it would have been but cannot be (an encoding this package
// does not decode); see Classify. When it peeks, enc is the body's
// Content-Encoding; the header is not looked up for a body left alone.
func (c *classifier) shouldPeek(resp *http.Response, status int, kind bodyKind) (peek bool, enc encoding, uninspected bool) {
	if c.peekSize <= 0 || resp.Body == nil || resp.Body == http.NoBody {
		return false, encIdentity, false
	}
	if resp.Request != nil && resp.Request.Method == http.MethodHead {
		return false, encIdentity, false
	}
	if status < 200 || status == 204 || (status >= 300 && status < 400) {
		return false, encIdentity, false
	}
	markers := (kind == kindHTML || kind == kindUnknown || (kind == kindJSON && c.jsonAny)) && c.bodyCanMatch(status, kind)
	token := c.token != noNeedle && (status == 401 || status == 403) && kind != kindOther
	if !markers && !token {
		return false, encIdentity, false
	}
	if enc = encodingOf(resp.Header); enc == encUnsupported {
		return false, enc, true
	}
	return true, enc, false
}

// bodyCanMatch reports whether a body marker or the agent token could match
// a response with this status.
func (c *classifier) bodyCanMatch(status int, kind bodyKind) bool {
	if status == 403 || (c.token != noNeedle && status == 401) { // 403: also a secondary rate limit
		return true
	}
	if kind != kindJSON && c.bodyAny {
		return true
	}
	for i := range c.bodies {
		// A JSON body is read only for the markers that allow JSON, so
		// that an API's successful answers are not held up.
		if m := &c.bodies[i]; (kind != kindJSON || m.json) && m.appliesTo(status) {
			return true
		}
	}
	return false
}

// peekLen returns how many bytes of a body with this status are inspected:
// OKPeekSize for a 2xx answer no marker names, else PeekSize.
func (c *classifier) peekLen(status int) int {
	if status < 200 || status > 299 || slices.Contains(c.fullOK, status) {
		return c.peekSize
	}
	return c.okPeek
}

// peekHead reads the first n bytes (at most PeekSize) of rc into a pooled
// buffer owned by pk, within the peek's time budget (see peek.fill), and
// returns the head read so far, how the read ended (nil while rc has more),
// whether the budget cut the peek; head is nil when nothing was read.
func (c *classifier) peekHead(ctx context.Context, rc io.ReadCloser, pk *peek, n int) (head []byte, err error, cut bool) {
	bp := c.heads.Get().(*[]byte)
	pk.buf = bp
	head, err, cut = pk.fill(ctx, rc, (*bp)[:n], c.peekTimeout, &c.timers)
	if len(head) == 0 {
		if !cut {
			pk.buf, pk.head = nil, nil
			c.heads.Put(bp)
		}
		return nil, err, cut
	}
	return head, err, cut
}
