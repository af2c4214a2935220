package io.github.redisratelimit;

import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Callable;

/**
 * One limit a whole fleet learns from its provider's answers ({@code RATELIMIT.ADAPT} and
 * {@code RATELIMIT.REPORT}): decide before calling the provider, report how it answered, or let
 * {@link #call} do both around an HTTP call. The rules are the module's (docs/adaptive.md); this
 * only reads the provider's answer ({@link ProviderAnswer#read}) and sends it.
 */
public final class AdaptiveLimit {
    private final RateLimiter limiter;
    private final String key;
    private final Adaptive terms;
    private final boolean tokens;
    private final Duration maxHold;

    /**
     * An adaptive limit of requests, its Retry-After holds at most a minute (as the SDKs honour).
     *
     * @param limiter the limiter
     * @param key the adaptive limit's key
     * @param terms its bounds and window
     */
    public AdaptiveLimit(RateLimiter limiter, String key, Adaptive terms) {
        this(limiter, key, terms, false, Duration.ofMinutes(1));
    }

    /**
     * An adaptive limit.
     *
     * @param limiter the limiter
     * @param key the adaptive limit's key
     * @param terms its bounds and window
     * @param tokens whether it counts tokens (each call's cost; its reports read the tokens'
     *     figures) rather than requests
     * @param maxHold the longest a provider's Retry-After holds the fleet
     */
    public AdaptiveLimit(RateLimiter limiter, String key, Adaptive terms, boolean tokens, Duration maxHold) {
        this.limiter = Objects.requireNonNull(limiter, "limiter");
        this.key = Objects.requireNonNull(key, "key");
        this.terms = Objects.requireNonNull(terms, "terms");
        this.tokens = tokens;
        this.maxHold = Objects.requireNonNull(maxHold, "maxHold");
    }

    /**
     * Whether a call of {@code cost} may go to the provider now.
     *
     * @param cost what the call takes, at least 1
     * @return the decision, its limit the learned one
     */
    public Decision decide(long cost) {
        return decide(cost, false);
    }

    /**
     * Whether a call of {@code cost} may go now, asked again at the turn a denial told.
     *
     * @param cost what the call takes, at least 1
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it: it is
     *     then admitted on a bucket not in debt, so that no one who was not waiting takes its turn
     * @return the decision, its limit the learned one
     */
    public Decision decide(long cost, boolean turn) {
        return limiter.adapt(key, terms, cost, turn);
    }

    /**
     * Whether a call estimated at {@code estimate} (tokens, say) may go now, and if so its
     * reservation: {@link #settle} it with what the call used once the answer says.
     *
     * @param estimate what the call is expected to take, at least 1
     * @return the reservation (no token when denied)
     */
    public Reservation reserve(long estimate) {
        return reserve(estimate, false);
    }

    /**
     * As {@link #reserve(long)}, asked again at the turn a denial told.
     *
     * @param estimate what the call is expected to take, at least 1
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it
     * @return the reservation (no token when denied)
     */
    public Reservation reserve(long estimate, boolean turn) {
        return limiter.reserveAdapt(key, terms, estimate, turn);
    }

    /**
     * Settles a reservation with what was used: the unused part back to the fleet (at most once).
     *
     * @param reservation what {@link #reserve} answered
     * @param used what the call used
     * @return the settlement
     */
    public Settlement settle(Reservation reservation, long used) {
        return limiter.settle(reservation, used);
    }

    /**
     * Reports how the provider answered.
     *
     * @param answer the answer, as {@link ProviderAnswer#read} reads it
     * @param throttled whether the call counts as throttled (its status, or a timeout counted as one)
     * @return what the limit learned; empty where none is learned at the key
     */
    public Optional<Learned> report(ProviderAnswer answer, boolean throttled) {
        return report(answer, throttled, null);
    }

    /**
     * Reports how the provider answered a call decided {@code age} ago: a throttle on a call
     * decided after the epoch's cut cuts again (where the provider states no remaining).
     *
     * @param answer the answer, as {@link ProviderAnswer#read} reads it
     * @param throttled whether the call counts as throttled (its status, or a timeout counted as one)
     * @param age how long ago the call was decided (null: not said)
     * @return what the limit learned; empty where none is learned at the key
     */
    public Optional<Learned> report(ProviderAnswer answer, boolean throttled, Duration age) {
        ProviderAnswer.Stated stated = tokens ? answer.tokens() : answer.requests();
        Report report = throttled ? Report.throttle() : Report.ok();
        if (age != null) {
            report = report.withAge(age);
        }
        if (throttled && answer.retryAfter().isPresent()) {
            Duration wait = answer.retryAfter().get();
            report = report.withRetryAfter(wait.compareTo(maxHold) > 0 ? maxHold : wait);
        }
        if (stated.limit().isPresent() && stated.limit().getAsLong() >= 1) {
            report = report.withLimit(stated.limit().getAsLong());
        }
        if (stated.remaining().isPresent() && stated.resetAfter().isPresent()) {
            report = report.withRemaining(stated.remaining().getAsLong(), stated.resetAfter().get());
        }
        return limiter.report(key, report);
    }

    /**
     * Sends {@code send} once the fleet's limit has room (waiting up to {@code maxWait}, else a
     * {@link RateLimitedException}), and reports its response; an exception it throws (a timeout)
     * is reported as no answer and thrown again.
     *
     * @param <T> the response body
     * @param cost what the call takes, at least 1
     * @param maxWait the longest to wait for the fleet's turn
     * @param send the provider call
     * @return its response
     * @throws Exception what {@code send} threw, or a {@link RateLimitedException}
     */
    public <T> HttpResponse<T> call(long cost, Duration maxWait, Callable<HttpResponse<T>> send) throws Exception {
        Instant deadline = Instant.now().plus(maxWait);
        for (Decision d = decide(cost); !d.allowed(); d = decide(cost, true)) {
            if (Instant.now().plus(d.retryAfter()).isAfter(deadline)) {
                throw new RateLimitedException(key, d.retryAfter());
            }
            Thread.sleep(d.retryAfter().toMillis() + 1);
        }
        long decided = System.nanoTime();
        HttpResponse<T> response;
        try {
            response = send.call();
        } catch (Exception e) {
            report(ProviderAnswer.read(0, Map.of(), Instant.now()), false, Duration.ofNanos(System.nanoTime() - decided));
            throw e;
        }
        ProviderAnswer answer = ProviderAnswer.read(response.statusCode(), response.headers().map(), Instant.now());
        report(answer, answer.throttled(), Duration.ofNanos(System.nanoTime() - decided));
        return response;
    }
}
