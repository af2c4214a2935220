package ratelimit

import (
	"context"
	"errors"
	"time"
)

// Permit is one of a key's permits held: its lease is renewed every third of it until End.
type Permit struct {
	// Acquisition is ACQUIRE's answer that gave it.
	Acquisition
	l      *Limiter
	key    string
	lease  time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// Hold takes one of at most limit permits of key (ctx bounds the taking only) and keeps its lease
// renewed until End. No permit free: a *PermitUnavailableError (errors.Is ErrPermitUnavailable).
func (l *Limiter) Hold(ctx context.Context, key string, limit int64, lease time.Duration) (*Permit, error) {
	if lease < 3*time.Millisecond {
		return nil, invalid("a held lease must be 3 ms or more (it is renewed every third of it)")
	}
	got, err := l.Acquire(ctx, key, limit, lease, "")
	if err != nil {
		return nil, err
	}
	if !got.Acquired {
		return nil, &PermitUnavailableError{InUse: got.InUse, Limit: limit, Wait: got.Wait}
	}
	p := &Permit{Acquisition: got, l: l, key: key, lease: lease, done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	go p.renew()
	return p, nil
}

func (p *Permit) renew() {
	defer close(p.done)
	tick := time.NewTicker(p.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
			// A renewal that fails (the server away for a moment) is tried again at the next tick;
			// one that takes longer than a tick is late anyway.
			ctx, cancel := context.WithTimeout(p.ctx, min(p.lease/3, p.l.background))
			left, err := p.l.Renew(ctx, p.key, p.ID, p.lease)
			cancel()
			if err == nil && left == 0 {
				p.cancel(ErrPermitLost)
				return
			}
		}
	}
}

// Lost is done when the lease was found gone (its cause ErrPermitLost), or the permit ended.
func (p *Permit) Lost() context.Context { return p.ctx }

// End stops the renewals and releases the permit; false when it was no longer live. The release
// waits as long as ctx allows, and at most the limiter's background timeout.
func (p *Permit) End(ctx context.Context) (bool, error) {
	p.cancel(nil)
	<-p.done
	ctx, cancel := context.WithTimeout(ctx, p.l.background)
	defer cancel()
	return p.l.Release(ctx, p.key, p.ID)
}

// WithPermit runs work holding one of at most limit permits of key (see Hold), and releases it
// when work returns or panics. No permit free: a *PermitUnavailableError, and work does not run.
// A renewal that finds the lease gone cancels work's context with ErrPermitLost as its cause.
func (l *Limiter) WithPermit(ctx context.Context, key string, limit int64, lease time.Duration, work func(context.Context) error) error {
	p, err := l.Hold(ctx, key, limit, lease)
	if err != nil {
		return err
	}
	workCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(p.Lost(), func() {
		if errors.Is(context.Cause(p.Lost()), ErrPermitLost) {
			cancel(ErrPermitLost)
		}
	})
	defer func() {
		stop()
		cancel(nil)
		// Released even when ctx is done (the permit must not wait out its lease), within the
		// limiter's background timeout.
		_, _ = p.End(context.WithoutCancel(ctx))
	}()
	return work(workCtx)
}
