package io.github.redisratelimit;

import java.time.Duration;

/**
 * {@code ACQUIRE}'s answer.
 *
 * @param acquired whether a permit was taken
 * @param inUse the permits in use
 * @param remaining how many more permits may be taken now
 * @param waitTime the lease when acquired; when denied, how long until the earliest lease ends
 * @param id the lease's id ({@code null} when denied): {@code release} and {@code renew} take it
 */
public record Acquisition(boolean acquired, long inUse, long remaining, Duration waitTime, String id) {
}
