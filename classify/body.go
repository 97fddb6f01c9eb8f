package classify

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
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
	lz *lazyOutcome  // non-nil when the head is read and judged on the first Read (see lazy)
}

// peek is the state of an inspected body. The head is read by a goroutine
// (fill) so that the peek can be cut by its time budget while a read is
// still blocked; that read's bytes then join the head when it returns, and
// the body hands them out before reading rc again. The goroutine makes at
// most one more read once the peek is cut and ends by itself; Close of the
// body unblocks it. The head of a lazy body is read by the caller's first
// Read instead, with the same loop (read), unless Of reads it first (see
// lazy); no goroutine and no channel then, unless another goroutine waits
// for that read.
type peek struct {
	pool *sync.Pool // where buf goes back

	mu       sync.Mutex    // guards the fields below, and those of a lazy body's state
	buf      *[]byte       // pooled buffer backing head; nil once released
	head     []byte        // peeked bytes not yet handed out
	err      error         // how the peek ended (io.EOF or a read error); nil: rc has more
	ended    chan struct{} // nil, or closed when the read in flight ends (see endedLocked)
	reading  bool          // a read of the head is in flight (read runs)
	rcClosed bool          // the peek closed rc because the request's context ended
	closed   bool          // Close was called
	stop     bool          // the peek was cut: read ends after its current read
}

// endedLocked returns a channel that is closed when the read of the head
// in flight ends, making it for the first goroutine to wait. pk.mu must be
// held and pk.reading set; or, for a lazy body, its hooks running (the
// channel is then closed when they return, or when the read in flight
// ends, whichever comes first: see lazy.hooksRan).
func (pk *peek) endedLocked() chan struct{} {
	if pk.ended == nil {
		pk.ended = make(chan struct{})
	}
	return pk.ended
}

var (
	_ io.ReadCloser = (*body)(nil)
	_ io.WriterTo   = (*body)(nil)
)

// Read hands out the peeked head, waiting for a read the peek left in
// flight, then reads the original body.
func (b *body) Read(p []byte) (int, error) {
	if lz := b.lz; lz != nil && !lz.done.Load() {
		lz.readHead()
	}
	pk := b.p
	for {
		pk.mu.Lock()
		if len(pk.head) > 0 {
			n := copy(p, pk.head)
			pk.head = pk.head[n:]
			var err error
			if len(pk.head) == 0 && !pk.reading {
				pk.releaseLocked()
				err = pk.err
			}
			pk.mu.Unlock()
			return n, err
		}
		if pk.reading {
			ch := pk.endedLocked()
			pk.mu.Unlock()
			<-ch
			continue
		}
		err := pk.err
		pk.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return b.rc.Read(p)
	}
}

// settled waits until no read of the peek is in flight.
func (pk *peek) settled() {
	pk.mu.Lock()
	if !pk.reading {
		pk.mu.Unlock()
		return
	}
	ch := pk.endedLocked()
	pk.mu.Unlock()
	<-ch
}

// WriteTo writes the peeked head and then copies the rest of the original
// body to w, so io.Copy keeps any fast path the body or w has.
func (b *body) WriteTo(w io.Writer) (int64, error) {
	if lz := b.lz; lz != nil && !lz.done.Load() {
		lz.readHead()
	}
	var n int64
	pk := b.p
	pk.settled()
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
			// Keep the unwritten bytes readable: a failed copy must
			// not lose them.
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
	m, err := io.Copy(w, b.rc)
	return n + m, err
}

// Close releases the peek buffer (at once, or when a read left in flight by
// the peek returns) and closes the original body. A lazy body whose head
// was never read is settled on its status and headers (see
// lazy.closeLocked).
func (b *body) Close() error {
	pk := b.p
	pk.mu.Lock()
	var (
		r Result
		h hooks
	)
	if b.lz != nil {
		r, h = b.lz.closeLocked(false)
	}
	pk.head = nil
	pk.closed = true
	if !pk.reading {
		pk.releaseLocked()
	}
	rcClosed := pk.rcClosed
	pk.mu.Unlock()
	var err error
	if !rcClosed {
		err = b.rc.Close()
	}
	h.run(r)
	return err
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

// fill reads the head of rc into buf on a goroutine of its own, for at
// most budget (no time bound when budget <= 0) and until ctx (nil: none)
// ends. It returns the bytes read so far, how the read ended (nil while it
// goes on), and whether the peek was cut by the budget with a read still in
// flight, whose bytes will join pk.head when it returns. When ctx ends
// first, rc is closed to unblock the read and pk.err becomes ctx's cause.
//
// buf must be (*pk.buf)[:len]; pk must not be published yet.
func (pk *peek) fill(ctx context.Context, rc io.ReadCloser, buf []byte, budget time.Duration, timers *sync.Pool) (head []byte, err error, cut bool) {
	pk.head = buf[:0]
	pk.reading = true
	done := pk.endedLocked() // pk is not published: no lock needed
	go pk.read(rc, buf)
	cut = pk.wait(ctx, rc, done, budget, timers)
	pk.mu.Lock()
	head, err = pk.head, pk.err
	pk.mu.Unlock()
	return head, err, cut
}

// wait waits for the read of the head that closes done, for at most budget
// (no time bound when budget <= 0) and until ctx (nil: none) ends, and
// reports whether the budget cut the peek with a read still in flight.
// When ctx ends first, rc is closed to unblock the read and pk.err becomes
// ctx's cause.
func (pk *peek) wait(ctx context.Context, rc io.ReadCloser, done chan struct{}, budget time.Duration, timers *sync.Pool) (cut bool) {
	var (
		timeout <-chan time.Time
		ctxDone <-chan struct{}
	)
	if budget > 0 {
		timer, _ := timers.Get().(*time.Timer)
		if timer == nil {
			timer = time.NewTimer(budget)
		} else {
			timer.Reset(budget)
		}
		defer func() {
			timer.Stop() // since Go 1.23, a stopped timer's channel holds no stale value
			timers.Put(timer)
		}()
		timeout = timer.C
	}
	if ctx != nil {
		ctxDone = ctx.Done()
	}
	select {
	case <-done:
	case <-timeout:
		pk.mu.Lock()
		pk.stop = true
		cut = pk.reading
		pk.mu.Unlock()
		return cut
	case <-ctxDone:
		pk.mu.Lock()
		pk.stop = true
		running := pk.reading
		pk.mu.Unlock()
		if running {
			// A body that ignores its context cannot hold the caller: close
			// it to unblock the read, and report why the rest is gone.
			rc.Close()
			pk.mu.Lock()
			pk.rcClosed = true
			pk.mu.Unlock()
			<-done
			pk.mu.Lock()
			if pk.err != io.EOF {
				pk.err = context.Cause(ctx)
			}
			pk.mu.Unlock()
		}
	}
	return false
}

// read reads rc into buf until buf is full, rc ends or fails, or the peek
// is cut, appending to pk.head after each read; then it clears pk.reading,
// which must be set, and closes pk.ended if a goroutine waits. It is fill's
// goroutine, and the first Read of a lazy body.
func (pk *peek) read(rc io.Reader, buf []byte) {
	n, empty := 0, 0
	for {
		m, err := rc.Read(buf[n:])
		if m < 0 || m > len(buf)-n {
			m, err = 0, errBadRead
		}
		if m == 0 && err == nil {
			if empty++; empty >= maxEmptyReads {
				err = io.ErrNoProgress
			}
		} else {
			empty = 0
		}
		n += m
		pk.mu.Lock()
		if !pk.closed {
			pk.head = pk.head[:len(pk.head)+m]
		}
		if err != nil {
			pk.err = err
		}
		if err != nil || n == len(buf) || pk.stop {
			pk.reading = false
			ended := pk.ended
			pk.ended = nil // its waiters hold it; a later wait (lazy.awaitHooksLocked) makes another
			if pk.closed {
				pk.releaseLocked()
			}
			pk.mu.Unlock()
			if ended != nil {
				close(ended)
			}
			return
		}
		pk.mu.Unlock()
	}
}
