package io.github.redisratelimit;

import java.time.Duration;

/**
 * What a report taught an adaptive limit ({@code RATELIMIT.REPORT}'s answer).
 *
 * @param limit the fleet's limit per window now
 * @param decreased whether this report cut it (the first throttle of its epoch)
 * @param hold how long until any caller is admitted again (a provider's Retry-After); zero when
 *     not held
 */
public record Learned(long limit, boolean decreased, Duration hold) {
}
