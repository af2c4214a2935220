package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// WithPermit runs work holding one of at most limit permits of key: the lease is renewed every
// third of lease while work runs, and released when it returns or panics. No permit free:
// ErrPermitUnavailable (wrapped, with the wait in the message), and work does not run. A renewal
// that finds the lease gone cancels work's context with ErrPermitLost as its cause.
func (l *Limiter) WithPermit(ctx context.Context, key string, limit int64, lease time.Duration, work func(context.Context) error) error {
	got, err := l.Acquire(ctx, key, limit, lease, "")
	if err != nil {
		return err
	}
	if !got.Acquired {
		return fmt.Errorf("%w: %d of %d in use, the first ends in %v", ErrPermitUnavailable, got.InUse, limit, got.Wait)
	}
	workCtx, cancel := context.WithCancelCause(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		tick := time.NewTicker(lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-workCtx.Done():
				return
			case <-tick.C:
				left, err := l.Renew(workCtx, key, got.ID, lease)
				if err == nil && left == 0 {
					cancel(ErrPermitLost)
					return
				}
			}
		}
	}()
	defer func() {
		cancel(nil)
		<-renewed
		// Released even when ctx is done: the permit must not wait out its lease.
		_, _ = l.Release(context.WithoutCancel(ctx), key, got.ID)
	}()
	return work(workCtx)
}
