package io.github.redisratelimit;

/**
 * A call of a limiter waiting for replicas ({@link RateLimiterOptions#waitingForReplicas}) that
 * fewer replicas acknowledged in time than it waits for. The call was made: {@link #answer()}
 * is its answer. Not a {@link RateLimitException}: the server did not refuse the call, and a hot
 * limit's fail-open treats it as the server out of reach.
 */
public final class NotReplicatedException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The call's answer (a Decision, a Reservation, ...); not serialized. */
    private final transient Object answer;
    /** The replicas that acknowledged the write in time. */
    private final long acknowledged;
    /** The replicas waited for. */
    private final int wanted;

    /**
     * A call answered, acknowledged by too few replicas.
     *
     * @param answer the call's answer
     * @param acknowledged the replicas that acknowledged it in time
     * @param wanted the replicas waited for
     */
    public NotReplicatedException(Object answer, long acknowledged, int wanted) {
        super(acknowledged + " of " + wanted + " replicas acknowledged the write in time");
        this.answer = answer;
        this.acknowledged = acknowledged;
        this.wanted = wanted;
    }

    /**
     * The call's answer, as the call would have returned it.
     *
     * @return the answer
     */
    public Object answer() {
        return answer;
    }

    /**
     * The replicas that acknowledged the write in time.
     *
     * @return their number
     */
    public long acknowledged() {
        return acknowledged;
    }

    /**
     * The replicas waited for.
     *
     * @return their number
     */
    public int wanted() {
        return wanted;
    }
}
