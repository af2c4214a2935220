package io.github.redisratelimit;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

/** What the limiters, their permits and hot limits share of futures: waiting, failures, deadlines. */
final class Futures {
    private Futures() {
    }

    /** Waits for a call's answer, throwing its failure as itself. */
    static <T> T join(CompletionStage<T> stage) {
        try {
            return stage.toCompletableFuture().join();
        } catch (CompletionException e) {
            Throwable cause = unwrap(e);
            if (cause instanceof RuntimeException r) {
                throw r;
            }
            if (cause instanceof Error err) {
                throw err;
            }
            throw new RateLimitException(String.valueOf(cause.getMessage()), cause);
        }
    }

    /** The failure a completion wraps. */
    static Throwable unwrap(Throwable e) {
        while (e instanceof CompletionException && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    /** {@code stage}, failed with a timeout past {@code timeout} (the stage itself untouched). */
    static <T> CompletableFuture<T> within(Duration timeout, CompletionStage<T> stage) {
        return stage.toCompletableFuture().copy().orTimeout(timeout.toNanos(), TimeUnit.NANOSECONDS);
    }
}
