package io.github.redisratelimit;

/**
 * {@code RATELIMIT.TOP}'s options.
 *
 * @param view which keys: the most denied (the default), admitted, or shadowed
 * @param count how many keys, or 0 for the server's default
 * @param reset whether to reset the counts
 */
public record TopOptions(View view, long count, boolean reset) {
    /** The most denied keys, as many as the server gives by default. */
    public static final TopOptions DENIED = new TopOptions(View.DENIED, 0, false);

    /** TOP's views. */
    public enum View {
        /** The keys denied most. */
        DENIED,
        /** The keys admitted the most cost for. */
        ADMITTED,
        /** The keys that shadow mode would have denied most. */
        SHADOWED
    }
}
