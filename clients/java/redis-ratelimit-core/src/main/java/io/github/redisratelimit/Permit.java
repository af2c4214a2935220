package io.github.redisratelimit;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One of a key's permits held: its lease is renewed every third of it until {@link #close()} (or
 * {@link #end()}), which releases it. Closing twice releases once.
 */
public final class Permit implements AutoCloseable {
    /** The renewals of every permit: one daemon thread, each renewal a non-blocking send. */
    private static final ScheduledExecutorService RENEWALS = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "redis-ratelimit-permit-renewals");
        t.setDaemon(true);
        return t;
    });

    private final AsyncRateLimiter limiter;
    private final String key;
    private final Acquisition acquisition;
    private final Duration lease;
    private final CompletableFuture<Void> lost = new CompletableFuture<>();
    private final AtomicBoolean ended = new AtomicBoolean();
    private final ScheduledFuture<?> renewals;
    private CompletableFuture<Boolean> release;

    Permit(AsyncRateLimiter limiter, String key, Acquisition acquisition, Duration lease) {
        this.limiter = limiter;
        this.key = key;
        this.acquisition = acquisition;
        this.lease = lease;
        long every = Math.max(1, lease.toNanos() / 3);
        this.renewals = RENEWALS.scheduleAtFixedRate(this::renew, every, every, TimeUnit.NANOSECONDS);
    }

    /**
     * ACQUIRE's answer that gave the permit (its {@code id} is the lease's).
     *
     * @return the acquisition
     */
    public Acquisition acquisition() {
        return acquisition;
    }

    /**
     * The permits' key.
     *
     * @return the key
     */
    public String key() {
        return key;
    }

    /**
     * Completes exceptionally with a {@link PermitLostException} when a renewal finds the lease
     * gone; normally when the permit ends.
     *
     * @return the permit's loss
     */
    public CompletableFuture<Void> lost() {
        return lost.copy();
    }

    /**
     * Whether a renewal found the lease gone.
     *
     * @return true once lost
     */
    public boolean isLost() {
        return lost.isCompletedExceptionally();
    }

    private void renew() {
        if (ended.get()) {
            return;
        }
        Duration timeout = min(lease.dividedBy(3), limiter.backgroundTimeout());
        // A renewal that fails (the server away for a moment) is tried again at the next tick; one
        // that throws here must not either, or the executor would never run this task again.
        try {
            Futures.within(timeout, limiter.renew(key, acquisition.id(), lease)).thenAccept(left -> {
                if (left.isZero() && lost.completeExceptionally(new PermitLostException(key))) {
                    renewals.cancel(false);
                }
            });
        } catch (RuntimeException tryAgain) {
            // The next tick tries again.
        }
    }

    private static Duration min(Duration a, Duration b) {
        return a.compareTo(b) <= 0 ? a : b;
    }

    /**
     * Stops the renewals and releases the permit, within the limiter's background timeout.
     *
     * @return false when it was no longer live
     */
    public synchronized CompletableFuture<Boolean> end() {
        if (release == null) {
            ended.set(true);
            renewals.cancel(false);
            lost.complete(null);
            try {
                release = Futures.within(limiter.backgroundTimeout(), limiter.release(key, acquisition.id()));
            } catch (RuntimeException e) {
                release = CompletableFuture.failedFuture(e);
            }
        }
        return release.copy();
    }

    /**
     * Stops the renewals and releases the permit, waiting for the release (at most the limiter's
     * background timeout); a failed release is thrown.
     */
    @Override
    public void close() {
        Futures.join(end());
    }

    @Override
    public String toString() {
        return "Permit[key=" + key + ", id=" + acquisition.id() + ", lease=" + lease + "]";
    }
}
