package io.github.redisratelimit;

import java.time.Duration;
import java.util.Objects;

/**
 * How a limiter finds its backend, bounds the calls it makes on its own, and waits for replicas.
 *
 * @param loadLibrary load the Functions library where the server has neither it nor the module
 *     (else a {@link LibraryNotLoadedException})
 * @param backgroundTimeout the deadline of each call the limiter makes on its own: finding the
 *     backend, a held permit's renewals (at most a third of its lease) and its release
 * @param replicas after every call that writes, wait until this many replicas have the write
 *     ({@code WAIT}, on the connection that wrote): a failover then loses no write a call answered;
 *     0, the default, waits for none. PEEK and TOP never wait.
 * @param replicaTimeout how long a call waits for them at most (whole milliseconds, rounded up);
 *     fewer in time, the call fails with a {@link NotReplicatedException} that carries its answer
 */
public record RateLimiterOptions(boolean loadLibrary, Duration backgroundTimeout, int replicas, Duration replicaTimeout) {
    /** The library loaded when missing, 5 s for the limiter's own calls, no replica waited for. */
    public static final RateLimiterOptions DEFAULT = new RateLimiterOptions(true, Duration.ofSeconds(5));

    /**
     * The options, checked.
     *
     * @param loadLibrary load the library when missing
     * @param backgroundTimeout the deadline of the limiter's own calls, above zero
     * @param replicas the replicas each write waits for, at least 0
     * @param replicaTimeout the longest wait for them, at least 1 ms
     */
    public RateLimiterOptions {
        Objects.requireNonNull(backgroundTimeout, "backgroundTimeout");
        Objects.requireNonNull(replicaTimeout, "replicaTimeout");
        if (backgroundTimeout.isNegative() || backgroundTimeout.isZero()) {
            throw new InvalidArgumentException("the background timeout must be above zero");
        }
        if (replicas < 0) {
            throw new InvalidArgumentException("replicas must be an integer >= 0");
        }
        // WAIT's 0 would wait for ever.
        if (replicaTimeout.compareTo(Duration.ofMillis(1)) < 0) {
            throw new InvalidArgumentException("the replica timeout must be at least 1 ms");
        }
    }

    /**
     * The options of earlier versions: no replica waited for.
     *
     * @param loadLibrary load the library when missing
     * @param backgroundTimeout the deadline of the limiter's own calls, above zero
     */
    public RateLimiterOptions(boolean loadLibrary, Duration backgroundTimeout) {
        this(loadLibrary, backgroundTimeout, 0, Duration.ofMillis(100));
    }

    /**
     * The same options, expecting the library loaded already on a server without the module.
     *
     * @return the options
     */
    public RateLimiterOptions withoutLibraryLoad() {
        return new RateLimiterOptions(false, backgroundTimeout, replicas, replicaTimeout);
    }

    /**
     * The same options with another deadline for the limiter's own calls.
     *
     * @param timeout the deadline, above zero
     * @return the options
     */
    public RateLimiterOptions withBackgroundTimeout(Duration timeout) {
        return new RateLimiterOptions(loadLibrary, timeout, replicas, replicaTimeout);
    }

    /**
     * The same options, each write waiting for {@code replicas} replicas for at most
     * {@code timeout} (as Go's {@code WithReplicas}, Python's {@code wait_for_replicas}, Node's
     * {@code waitForReplicas}).
     *
     * @param replicas the replicas to wait for (0: none)
     * @param timeout the longest wait, at least 1 ms
     * @return the options
     */
    public RateLimiterOptions waitingForReplicas(int replicas, Duration timeout) {
        return new RateLimiterOptions(loadLibrary, backgroundTimeout, replicas, timeout);
    }

    /** WAIT's timeout argument: whole milliseconds, rounded up. */
    long replicaTimeoutMs() {
        long ms = replicaTimeout.toMillis();
        return replicaTimeout.equals(Duration.ofMillis(ms)) ? ms : ms + 1;
    }
}
