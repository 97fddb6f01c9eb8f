package classify

import (
	"bytes"
	"context"
	"net/http"
)

// Head returns up to n leading bytes of resp's body, as they came on the
// wire (still encoded, if the body is), and leaves resp.Body whole: whoever
// reads it still receives every byte, in order, exactly once.
//
// When the classifier peeked at the body, Head returns from what the peek
// read (and not yet handed out) and waits for nothing. When resp's Result
// is pending (see onSettle), Head settles it first, as Of does, and
// returns from its head; called from an onSettle hook, it waits for
// nothing. Otherwise it reads the body's head the way a
// peek does: at most min(n, PeekSize) bytes, for at most PeekTimeout, and
// until ctx ends. It returns nil for a response without a body, when n is
// not positive, and when PeekSize is negative and the body was not peeked.
// A nil classifier reads as newClassifier(Config{}).
func (c *classifier) Head(ctx context.Context, resp *http.Response, n int) []byte {
	if c == nil {
		c = defaultClassifier
	}
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody || n <= 0 {
		return nil
	}
	if o := outcomeOf(resp); o != nil && o.lz != nil {
		return o.lz.head(n)
	}
	if b, ok := resp.Body.(*body); ok {
		pk := b.p
		pk.mu.Lock()
		defer pk.mu.Unlock()
		return bytes.Clone(pk.head[:min(n, len(pk.head))])
	}
	if n = min(n, c.peekSize); n <= 0 {
		return nil
	}
	b := &body{rc: resp.Body, p: &peek{pool: &c.heads}}
	head, _, _ := c.peekHead(ctx, b.rc, b.p, n)
	resp.Body = b
	return bytes.Clone(head)
}
