package io.github.redisratelimit;

import io.github.redisratelimit.command.Checks;
import java.util.List;

/**
 * {@code RATELIMIT.HITALL}'s options. {@link #DEFAULT} counts 1 on each fixed window.
 *
 * @param cost what the call counts for on each limit, at least 1
 * @param sliding sliding windows instead of fixed ones
 * @param align fixed windows at multiples of their length since the Unix epoch
 * @param zone the calendar windows' zone, or {@code null} for UTC
 * @param tokens when above 0, what is counted on the last {@code tokenKeys} limits instead of
 *     {@code cost} (an LLM call's tokens beside a request count)
 * @param tokenKeys how many of the last limits count {@code tokens}
 */
public record AllOptions(long cost, boolean sliding, boolean align, String zone, long tokens, int tokenKeys) {
    /** Cost 1 on each fixed window. */
    public static final AllOptions DEFAULT = new AllOptions(1, false, false, null, 0, 0);

    /**
     * Checks the options as the server would, without the limits ({@link #validate(List)} checks
     * them together).
     *
     * @param cost see the record
     * @param sliding see the record
     * @param align see the record
     * @param zone see the record
     * @param tokens see the record
     * @param tokenKeys see the record
     * @throws InvalidArgumentException what {@code hitAll} would refuse of any limits
     */
    public AllOptions {
        Checks.positive(cost, "COST");
        if (sliding && align) {
            throw Checks.invalid("SLIDE and ALIGN cannot be given together");
        }
        if (tokens != 0 || tokenKeys != 0) {
            Checks.positive(tokens, "TOKENS");
            if (tokenKeys < 1) {
                throw Checks.invalid("TOKENS' key count must be between 1 and numkeys");
            }
        }
    }

    /**
     * The same options, counting {@code cost} on each limit.
     *
     * @param cost what the call counts for
     * @return the options
     */
    public AllOptions withCost(long cost) {
        return new AllOptions(cost, sliding, align, zone, tokens, tokenKeys);
    }

    /**
     * The same options on sliding windows.
     *
     * @return the options
     */
    public AllOptions slidingWindows() {
        return new AllOptions(cost, true, align, zone, tokens, tokenKeys);
    }

    /**
     * The same options with fixed windows laid on the clock.
     *
     * @return the options
     */
    public AllOptions aligned() {
        return new AllOptions(cost, sliding, true, zone, tokens, tokenKeys);
    }

    /**
     * The same options with the calendar windows in {@code zone}.
     *
     * @param zone UTC, an offset, or an IANA name (the module only)
     * @return the options
     */
    public AllOptions inZone(String zone) {
        return new AllOptions(cost, sliding, align, zone, tokens, tokenKeys);
    }

    /**
     * The same options, counting {@code tokens} on the last {@code tokenKeys} limits.
     *
     * @param tokens what those limits count
     * @param tokenKeys how many of the last limits
     * @return the options
     */
    public AllOptions withTokens(long tokens, int tokenKeys) {
        return new AllOptions(cost, sliding, align, zone, tokens, tokenKeys);
    }

    /**
     * Checks these options with {@code limits} as {@code hitAll} would, with no round trip.
     *
     * @param limits the limits
     * @throws InvalidArgumentException what {@code hitAll} would refuse
     */
    public void validate(List<Limit> limits) {
        if (limits == null || limits.isEmpty()) {
            throw Checks.invalid("HITALL needs at least one limit");
        }
        boolean calendar = false;
        java.util.Set<String> keys = new java.util.HashSet<>();
        for (Limit l : limits) {
            calendar |= java.util.Objects.requireNonNull(l, "limit").calendar() != null;
            if (!keys.add(l.key())) {
                throw Checks.invalid("each key may be given only once");
            }
        }
        if (sliding && calendar) {
            throw Checks.invalid("SLIDE and a calendar window cannot be given together");
        }
        Checks.zone(calendar, zone);
        if (tokenKeys > limits.size()) {
            throw Checks.invalid("TOKENS' key count must be between 1 and numkeys");
        }
    }
}
