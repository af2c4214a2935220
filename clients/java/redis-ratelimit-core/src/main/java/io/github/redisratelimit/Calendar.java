package io.github.redisratelimit;

/** A calendar window: it ends at the next midnight, Monday, 1st or January 1st (in its zone). */
public enum Calendar {
    /** Until the next midnight. */
    DAY,
    /** Until the next Monday, 00:00 (ISO weeks). */
    WEEK,
    /** Until the next 1st, 00:00. */
    MONTH,
    /** Until the next January 1st, 00:00. */
    YEAR
}
