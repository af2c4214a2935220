package io.github.redisratelimit;

import io.github.redisratelimit.command.WindowCommands;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * This process's share of a limit a fleet shares ({@link RateLimiter#hot(String, Fixed, HotOptions)}):
 * it takes blocks of tokens from the server ({@code RATELIMIT.HIT ... PARTIAL RESERVE}) and
 * decides locally, with no round trip, until a block is spent or its deadline (the instant its
 * request was sent, plus what the server said its window had left, less a guard): every token is
 * used inside the window that granted it, so the fleet admits at most the limit in every window.
 * One request in flight at a time, refilled ahead of the demand. {@link #close()} gives back
 * what is held. Thread-safe. See docs/hot-keys.md.
 */
public final class HotLimit implements AutoCloseable {
    // Requests leave from a thread of their own: a transport may block until the answer (Jedis
    // does), which must not hold the lock the takes spend their tokens under.
    private static final ExecutorService REQUESTS = Executors.newCachedThreadPool(task -> {
        Thread thread = new Thread(task, "redis-ratelimit hot limit request");
        thread.setDaemon(true);
        return thread;
    });
    private final AsyncRateLimiter limiter;
    private final String key;
    private final Fixed limit;
    private final boolean failOpen;
    private final long origin;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition answered = lock.newCondition();
    // Under lock:
    private final HotState state;
    private long answers;
    private RuntimeException error;
    private CompletableFuture<?> inFlight;
    private boolean closed;

    HotLimit(AsyncRateLimiter limiter, String key, Fixed limit, HotOptions options) {
        // Refused now where HIT would refuse it, not at the first take.
        WindowCommands.reserveHitUpTo(key, limit.withCost(1));
        this.limiter = limiter;
        this.key = key;
        this.limit = limit;
        this.failOpen = options.failOpen();
        this.origin = System.nanoTime();
        this.state = new HotState(limit.limit(), options.horizon(), options.guard(), 0);
    }

    private long now() {
        return System.nanoTime() - origin;
    }

    /**
     * Admits one token, or not.
     *
     * @return whether it was admitted
     * @see #take(long)
     */
    public boolean take() {
        return take(1);
    }

    /**
     * Admits {@code n} tokens from what this process holds, waiting for a block when it holds too
     * few (each request is bounded by the limiter's background timeout). False when the window
     * has none left for them.
     *
     * @param n the tokens, at least 1
     * @return whether they were admitted
     * @throws IllegalStateException once closed
     * @throws RateLimitException Redis unreachable (or refusing the call) with too few held;
     *     with {@link HotOptions#failOpen()} an unreachable Redis admits instead
     */
    public boolean take(long n) {
        if (n < 1) {
            throw new InvalidArgumentException("take needs n >= 1");
        }
        lock.lock();
        try {
            int tries = 0;
            boolean waited = false;
            while (true) {
                if (closed) {
                    if (waited) {
                        state.gaveUp(n);
                    }
                    throw new IllegalStateException("the hot limit of " + key + " is closed");
                }
                // Read before the request is sent: an answer that comes at once (a refused
                // connection) may be in before send returns.
                long seen = answers;
                long now = now();
                HotState.Step step = state.step(now, n, tries, waited);
                waited = step.await();
                if (step.send() > 0) {
                    send(step.send());
                }
                if (step.admitted() || step.denied()) {
                    return step.admitted();
                }
                if (!step.await()) {
                    // The window is ending: the next one's tokens, when it starts.
                    answered.awaitNanos(Math.max(1, step.sleepUntil() - now));
                    continue;
                }
                try {
                    while (answers == seen && !closed) {
                        answered.await();
                    }
                } catch (InterruptedException e) {
                    state.gaveUp(n);
                    throw e;
                }
                tries++;
                if (error != null && !closed) {
                    state.gaveUp(n);
                    if (failOpen && unreachable(error)) {
                        return true;
                    }
                    throw error;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RateLimitException("interrupted while waiting for a block of " + key, e);
        } finally {
            lock.unlock();
        }
    }

    /** Whether a request's error says Redis could not be reached, not that it refused the call. */
    private static boolean unreachable(RuntimeException e) {
        return !(e instanceof ServerErrorException || e instanceof LibraryNotLoadedException
                || e instanceof InvalidArgumentException || e instanceof UnexpectedReplyException);
    }

    /** Sends a request for {@code want} tokens (under lock): its answer makes a block. */
    private void send(long want) {
        long sent = now();
        CompletableFuture<Reservation> request = CompletableFuture
                .supplyAsync(() -> limiter.reserveHitUpTo(key, limit.withCost(want)), REQUESTS)
                .thenCompose(r -> r)
                .orTimeout(limiter.backgroundTimeout().toNanos(), TimeUnit.NANOSECONDS);
        // The callback's own future: it is done once the answer is in the state (already, where
        // the request failed before this line: then none is in flight).
        CompletableFuture<?> answering = request.whenComplete((r, e) -> {
            lock.lock();
            try {
                if (e != null) {
                    state.failed();
                    Throwable cause = Futures.unwrap(e);
                    error = cause instanceof RuntimeException re ? re
                            : new RateLimitException("no block of " + key + ": " + cause, cause);
                } else {
                    state.granted(sent, now(), r);
                    error = null;
                }
                answers++;
                inFlight = null;
                answered.signalAll();
            } finally {
                lock.unlock();
            }
        });
        if (!answering.isDone()) {
            inFlight = answering;
        }
    }

    /**
     * Gives back the tokens held of windows still running ({@code RATELIMIT.SETTLE}), a request
     * in flight's once it is answered (within the limiter's background timeout), and makes take
     * refuse.
     *
     * @throws RateLimitException a settle that failed (the others are made all the same)
     */
    @Override
    public void close() {
        CompletableFuture<?> pending;
        lock.lock();
        try {
            closed = true;
            pending = inFlight;
            answered.signalAll();
        } finally {
            lock.unlock();
        }
        if (pending != null) {
            // Its outcome is in the state either way.
            pending.handle((r, e) -> null).join();
        }
        List<HotState.Block> blocks;
        lock.lock();
        try {
            blocks = state.unused(now());
        } finally {
            lock.unlock();
        }
        RuntimeException failed = null;
        for (HotState.Block b : blocks) {
            try {
                Futures.join(limiter.settle(b.grant, b.grant.amount() - b.left));
            } catch (RuntimeException e) {
                if (failed == null) {
                    failed = e;
                } else {
                    failed.addSuppressed(e);
                }
            }
        }
        if (failed != null) {
            throw failed;
        }
    }
}
