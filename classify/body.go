package classify

import (
	"context"
	"errors"
	"io"
	"sync"
)

// body is the response body the classifier attaches. It carries the Result
// and hands out the peeked head before the rest of the original body, so the
// caller receives every byte exactly once and in order.
//
// Read and WriteTo are meant for one reader at a time, as with any body;
// Close may be called concurrently with them.
type body struct {
	rc  io.ReadCloser // the original body; nil when there was none
	res Result
	// rcClosed is set before the body is published when the peek guard
	// closed rc because the request's context ended; read-only afterwards.
	rcClosed bool
	pool     *sync.Pool // where buf goes back; nil when buf is nil

	mu     sync.Mutex // guards buf, head, err and closed
	buf    *[]byte    // pooled buffer backing head; nil once released
	head   []byte     // peeked bytes not yet handed out
	err    error      // how the peek ended (io.EOF or a read error); nil: rc has more
	closed bool       // Close was called
}

var _ io.ReadCloser = (*body)(nil)
var _ io.WriterTo = (*body)(nil)

// Read hands out the peeked head, then reads the original body.
func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		var err error
		if len(b.head) == 0 {
			b.releaseLocked()
			err = b.err
		}
		b.mu.Unlock()
		return n, err
	}
	err := b.err
	b.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if b.rc == nil {
		return 0, io.EOF
	}
	return b.rc.Read(p)
}

// WriteTo writes the peeked head and then copies the rest of the original
// body to w, so io.Copy keeps any fast path the body or w has.
func (b *body) WriteTo(w io.Writer) (int64, error) {
	b.mu.Lock()
	head, buf, err := b.head, b.buf, b.err
	b.head, b.buf = nil, nil
	b.mu.Unlock()

	var n int64
	if len(head) > 0 {
		m, werr := w.Write(head)
		n = int64(m)
		if werr == nil && m < len(head) {
			werr = io.ErrShortWrite
		}
		if werr != nil {
			// Keep the unwritten bytes readable, as io.Copy's contract
			// does not promise that a failed copy consumed them.
			b.mu.Lock()
			if !b.closed {
				b.head, b.buf = head[m:], buf
			} else if buf != nil {
				b.pool.Put(buf)
			}
			b.mu.Unlock()
			return n, werr
		}
	}
	if buf != nil {
		b.pool.Put(buf)
	}
	switch {
	case err == io.EOF:
		return n, nil
	case err != nil:
		return n, err
	case b.rc == nil:
		return n, nil
	}
	m, err := io.Copy(w, b.rc)
	return n + m, err
}

// Close releases the peek buffer and closes the original body.
func (b *body) Close() error {
	b.mu.Lock()
	b.head = nil
	b.closed = true
	b.releaseLocked()
	b.mu.Unlock()
	if b.rc == nil || b.rcClosed {
		return nil
	}
	return b.rc.Close()
}

// releaseLocked returns the peek buffer to its pool. b.mu must be held.
func (b *body) releaseLocked() {
	if b.buf != nil {
		b.pool.Put(b.buf)
		b.buf = nil
	}
}

// WithResult returns body wrapped so that Of reports r for a response that
// carries it. A layer that replaces a classified response's body (to
// decompress it, count it, limit it) wraps its new body with
// WithResult(newBody, Of(resp, nil)) to keep the classification visible.
// A nil body reads as empty.
//
// Alternatively, a wrapping body may implement
//
//	Unwrap() io.ReadCloser
//
// returning the body it wraps; Of follows such chains (up to 16 deep).
func WithResult(body io.ReadCloser, r Result) io.ReadCloser {
	return newBody(body, r)
}

func newBody(rc io.ReadCloser, r Result) *body {
	return &body{rc: rc, res: r}
}

// attached returns the Result carried by rc, following Unwrap chains.
func attached(rc io.ReadCloser) (Result, bool) {
	for range 16 {
		switch b := rc.(type) {
		case *body:
			if b == nil {
				return Result{}, false
			}
			return b.res, true
		case interface{ Unwrap() io.ReadCloser }:
			rc = b.Unwrap()
		default:
			return Result{}, false
		}
	}
	return Result{}, false
}

// maxEmptyReads bounds consecutive (0, nil) reads, as bufio does.
const maxEmptyReads = 100

// errBadRead reports a Reader returning an impossible count.
var errBadRead = errors.New("classify: body reader returned an invalid count")

// readFull reads into buf until it is full, the reader fails, or it ends.
// err is nil only when buf is full and the reader has not yet ended.
func readFull(r io.Reader, buf []byte) (n int, err error) {
	empty := 0
	for n < len(buf) && err == nil {
		var m int
		m, err = r.Read(buf[n:])
		if m < 0 || m > len(buf)-n {
			return n, errBadRead
		}
		n += m
		if m == 0 && err == nil {
			if empty++; empty >= maxEmptyReads {
				return n, io.ErrNoProgress
			}
		} else {
			empty = 0
		}
	}
	return n, err
}

// guard closes a body when the request's context ends during a peek, so a
// body that ignores its context cannot hold the caller past it.
type guard struct {
	rc io.Closer
	wg sync.WaitGroup
}

func (g *guard) fire() {
	defer g.wg.Done()
	g.rc.Close()
}

// peekBody reads the head of rc into buf, bounded by ctx: when ctx ends
// first, rc is closed (closed is true) to unblock the read. net/http bodies
// unblock on their own; the guard covers other RoundTrippers.
func peekBody(ctx context.Context, rc io.ReadCloser, buf []byte) (n int, err error, closed bool) {
	if ctx == nil || ctx.Done() == nil {
		n, err = readFull(rc, buf)
		return n, err, false
	}
	g := &guard{rc: rc}
	g.wg.Add(1)
	stop := context.AfterFunc(ctx, g.fire)
	n, err = readFull(rc, buf)
	if stop() {
		g.wg.Done()
	} else {
		g.wg.Wait()
		closed = true
	}
	return n, err, closed
}
