package classify

import (
	"context"
	"errors"
	"io"
	"sync"
)

// body is the response body the classifier installs when it peeked at the
// original body: it hands out the peeked head before the rest of the
// original body, so the caller receives every byte exactly once and in
// order. It carries no Result: an attempt's Result lives with its response
// (see Of).
//
// Read and WriteTo are meant for one reader at a time, as with any body;
// Close may be called concurrently with them.
type body struct {
	rc io.ReadCloser // the original body
	p  *peek         // the peeked head
}

// peek is the state of an inspected body.
type peek struct {
	pool *sync.Pool // where buf goes back
	// rcClosed is set before the body is published when the peek guard
	// closed rc because the request's context ended; read-only afterwards.
	rcClosed bool

	mu     sync.Mutex // guards buf, head, err and closed
	buf    *[]byte    // pooled buffer backing head; nil once released
	head   []byte     // peeked bytes not yet handed out
	err    error      // how the peek ended (io.EOF or a read error); nil: rc has more
	closed bool       // Close was called
}

var (
	_ io.ReadCloser = (*body)(nil)
	_ io.WriterTo   = (*body)(nil)
)

// Read hands out the peeked head, then reads the original body.
func (b *body) Read(p []byte) (int, error) {
	if pk := b.p; pk != nil {
		pk.mu.Lock()
		if len(pk.head) > 0 {
			n := copy(p, pk.head)
			pk.head = pk.head[n:]
			var err error
			if len(pk.head) == 0 {
				pk.releaseLocked()
				err = pk.err
			}
			pk.mu.Unlock()
			return n, err
		}
		err := pk.err
		pk.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	if b.rc == nil {
		return 0, io.EOF
	}
	return b.rc.Read(p)
}

// WriteTo writes the peeked head and then copies the rest of the original
// body to w, so io.Copy keeps any fast path the body or w has.
func (b *body) WriteTo(w io.Writer) (int64, error) {
	var n int64
	if pk := b.p; pk != nil {
		pk.mu.Lock()
		head, buf, err := pk.head, pk.buf, pk.err
		pk.head, pk.buf = nil, nil
		pk.mu.Unlock()

		if len(head) > 0 {
			m, werr := w.Write(head)
			n = int64(m)
			if werr == nil && m < len(head) {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				// Keep the unwritten bytes readable: a failed copy
				// must not lose them.
				pk.mu.Lock()
				if !pk.closed {
					pk.head, pk.buf = head[m:], buf
				} else if buf != nil {
					pk.pool.Put(buf)
				}
				pk.mu.Unlock()
				return n, werr
			}
		}
		if buf != nil {
			pk.pool.Put(buf)
		}
		switch {
		case err == io.EOF:
			return n, nil
		case err != nil:
			return n, err
		}
	}
	if b.rc == nil {
		return n, nil
	}
	m, err := io.Copy(w, b.rc)
	return n + m, err
}

// Close releases the peek buffer and closes the original body.
func (b *body) Close() error {
	if pk := b.p; pk != nil {
		pk.mu.Lock()
		pk.head = nil
		pk.closed = true
		pk.releaseLocked()
		pk.mu.Unlock()
		if pk.rcClosed {
			return nil
		}
	}
	if b.rc == nil {
		return nil
	}
	return b.rc.Close()
}

// releaseLocked returns the peek buffer to its pool. pk.mu must be held.
func (pk *peek) releaseLocked() {
	if pk.buf != nil {
		pk.pool.Put(pk.buf)
		pk.buf = nil
	}
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
