package io.github.redisratelimit;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * {@code HITALL}'s answer: one decision for several limits, all or nothing.
 *
 * @param allowed admitted by every limit (and counted on all of them)
 * @param decisions each limit's own answer, in the order given ({@code allowed} there: whether that
 *     limit alone would admit the call)
 */
public record MultiDecision(boolean allowed, List<Decision> decisions) {
    /**
     * The decisions, kept as given.
     *
     * @param allowed admitted by every limit
     * @param decisions each limit's answer
     */
    public MultiDecision {
        decisions = List.copyOf(decisions);
    }

    /**
     * Zero when allowed; else how long until every limit that said no admits the call again.
     *
     * @return the wait
     */
    public Duration retryAfter() {
        Duration wait = Duration.ZERO;
        if (!allowed) {
            for (Decision d : decisions) {
                if (d.retryAfter().compareTo(wait) > 0) {
                    wait = d.retryAfter();
                }
            }
        }
        return wait;
    }

    /**
     * The most restrictive limit: the fewest remaining, then the latest reset (a decision of zeros
     * when there is none).
     *
     * @return that limit's decision
     */
    public Decision tightest() {
        Decision best = null;
        for (Decision d : decisions) {
            if (best == null || tighter(d, best)) {
                best = d;
            }
        }
        return best == null ? Decision.NONE : best;
    }

    /** Whether {@code d} restricts more than {@code than}: fewer remaining, then a later reset. */
    static boolean tighter(Decision d, Decision than) {
        return d.remaining() < than.remaining()
                || d.remaining() == than.remaining() && d.resetAfter().compareTo(than.resetAfter()) > 0;
    }

    /**
     * This answer's HTTP headers: every limit in {@code RateLimit-Policy}, the tightest in
     * {@code RateLimit} (of those that refused, when one did), and {@code Retry-After} when denied:
     * when every limit that refused admits again.
     *
     * @param names the limits' names, in order
     * @return the headers, in that order
     * @throws IllegalArgumentException when there is not one name per limit
     */
    public Map<String, String> headers(List<String> names) {
        return Headers.of(List.copyOf(names), decisions);
    }
}
