package io.github.redisratelimit;

import io.github.redisratelimit.command.Checks;
import java.time.Duration;

/**
 * A fixed-window limit ({@code RATELIMIT.HIT}): {@code limit} per {@code window}, or per calendar
 * unit. Made with {@link #of(long, Duration)} or {@link #of(long, Calendar)}, then the withers.
 *
 * @param limit hits admitted per window, at least 1
 * @param window the window's length in whole milliseconds, from the first hit (or, aligned, at
 *     multiples of it since the Unix epoch); {@code null} for a calendar window
 * @param calendar a calendar window instead of {@code window}, or {@code null}
 * @param cost what the call counts for (nonzero; a negative one gives back)
 * @param align windows laid on the clock: at multiples of {@code window} since the Unix epoch
 * @param zone a calendar window's zone (UTC, an offset such as {@code +05:30}, or an IANA name:
 *     the module only), or {@code null} for UTC
 */
public record Fixed(long limit, Duration window, Calendar calendar, long cost, boolean align, String zone) {
    /**
     * Checks the limit as the server would.
     *
     * @param limit see the record
     * @param window see the record
     * @param calendar see the record
     * @param cost see the record
     * @param align see the record
     * @param zone see the record
     * @throws InvalidArgumentException what {@code hit} would refuse
     */
    public Fixed {
        Checks.positive(limit, "limit");
        Checks.fixedWindow(window, calendar);
        Checks.zone(calendar != null, zone);
        Checks.nonzero(cost, "COST");
    }

    /**
     * {@code limit} per {@code window}, counting 1 a call.
     *
     * @param limit hits admitted per window
     * @param window the window's length
     * @return the limit
     */
    public static Fixed of(long limit, Duration window) {
        return new Fixed(limit, window, null, 1, false, null);
    }

    /**
     * {@code limit} per calendar unit (in UTC unless {@link #inZone(String)}), counting 1 a call.
     *
     * @param limit hits admitted per window
     * @param calendar the calendar unit
     * @return the limit
     */
    public static Fixed of(long limit, Calendar calendar) {
        return new Fixed(limit, null, calendar, 1, false, null);
    }

    /**
     * The same limit, counting {@code cost} a call (negative: given back).
     *
     * @param cost what the call counts for
     * @return the limit
     */
    public Fixed withCost(long cost) {
        return new Fixed(limit, window, calendar, cost, align, zone);
    }

    /**
     * The same limit with its windows at multiples of their length since the Unix epoch.
     *
     * @return the limit
     */
    public Fixed aligned() {
        return new Fixed(limit, window, calendar, cost, true, zone);
    }

    /**
     * The same calendar limit in another zone.
     *
     * @param zone UTC, an offset such as {@code +05:30}, or an IANA name (the module only)
     * @return the limit
     */
    public Fixed inZone(String zone) {
        return new Fixed(limit, window, calendar, cost, align, zone);
    }

    /**
     * Nothing to check: the constructor checked the limit as the server would.
     *
     * @deprecated an invalid limit cannot be made; remove the call
     */
    @Deprecated
    public void validate() {
    }
}
