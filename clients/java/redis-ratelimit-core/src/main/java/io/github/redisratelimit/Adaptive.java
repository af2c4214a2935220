package io.github.redisratelimit;

import io.github.redisratelimit.command.Checks;
import java.time.Duration;

/**
 * An adaptive limit's terms ({@code RATELIMIT.ADAPT}): a limit per {@code window} that the fleet
 * learns from its provider's answers, between {@code floor} and {@code ceiling}, a new key
 * starting at {@code start}. See docs/adaptive.md.
 *
 * @param floor the lowest the learned limit goes, at least 1
 * @param start where a new key starts, from floor to ceiling
 * @param ceiling the highest the learned limit goes ({@code ceiling} times the window in ms at
 *     most 2^50)
 * @param window the window, whole milliseconds up to 2^40
 */
public record Adaptive(long floor, long start, long ceiling, Duration window) {
    /** Every scaled quantity of the module's adaptive limit stays within 2^50. */
    static final long MAX_SCALED = 1L << 50;

    /**
     * Checks the terms as the server would.
     *
     * @param floor see the record
     * @param start see the record
     * @param ceiling see the record
     * @param window see the record
     * @throws InvalidArgumentException what {@code adapt} would refuse
     */
    public Adaptive {
        Checks.positive(floor, "floor");
        Checks.positive(start, "start");
        Checks.positive(ceiling, "ceiling");
        long ms = Checks.lengthMs(window, "window");
        if (ms > Checks.MAX_SPAN_MS) {
            throw Checks.invalid("window is too large");
        }
        if (floor > start || start > ceiling) {
            throw Checks.invalid("floor <= start <= ceiling must hold");
        }
        if (ceiling > MAX_SCALED / ms) {
            throw Checks.invalid("ceiling * window is too large");
        }
    }
}
