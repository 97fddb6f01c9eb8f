package redisstore

import (
	"context"
	"time"
)

// closeTimeout bounds Close: every host's held-back outcomes, each in one
// call of at most Config.Timeout, and at least this long in all.
const closeTimeout = 5 * time.Second

// Close is what a worker calls before it exits, typically deferred after
// New: it sends the OK outcomes the Store holds back (Config.RecordDelay)
// and waits for a send in progress, as Flush does, within
// max(5s, 8 × Config.Timeout). Without it a worker that exits loses up to
// RecordDelay of OKs (the hosts' pacing and breakers see fewer successes;
// halts, failures and throttles are never held back). Close does not
// close the client, which the Store does not own; the Store still works
// after Close, holding back later OKs again. Its errors are Flush's.
func (s *Store) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), max(closeTimeout, 8*s.set.cfg.Timeout))
	defer cancel()
	return s.Flush(ctx)
}
