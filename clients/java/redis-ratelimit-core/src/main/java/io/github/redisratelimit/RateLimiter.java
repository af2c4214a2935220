package io.github.redisratelimit;

import io.github.redisratelimit.command.Command;
import io.github.redisratelimit.spi.Transport;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;

/**
 * The limiters' calls over one {@link Transport}, blocking: each waits for its answer (as long as
 * the Redis client's own timeout allows) and throws what went wrong as itself, not wrapped. The
 * same calls as {@link AsyncRateLimiter}, which {@link #async()} gives. Safe for concurrent use.
 */
public final class RateLimiter {
    private final AsyncRateLimiter async;

    /**
     * A limiter over an adapter's transport, with the default options.
     *
     * @param transport the adapter's transport
     */
    public RateLimiter(Transport transport) {
        this(new AsyncRateLimiter(transport));
    }

    /**
     * A limiter over an adapter's transport.
     *
     * @param transport the adapter's transport
     * @param options how it finds its backend and bounds its own calls
     */
    public RateLimiter(Transport transport, RateLimiterOptions options) {
        this(new AsyncRateLimiter(transport, options));
    }

    /**
     * The blocking form of an asynchronous limiter (they share the backend found).
     *
     * @param async the limiter
     */
    public RateLimiter(AsyncRateLimiter async) {
        this.async = Objects.requireNonNull(async, "async");
    }

    /**
     * The same limiter, answering with futures.
     *
     * @return the asynchronous limiter
     */
    public AsyncRateLimiter async() {
        return async;
    }

    /**
     * This limiter's transport and options, its writes waiting for {@code replicas} replicas for
     * at most {@code timeout}, for one call or a few: {@code rl.waitingForReplicas(1, ms).settle(...)}.
     *
     * @param replicas the replicas to wait for (0: none)
     * @param timeout the longest wait, at least 1 ms
     * @return the limiter
     */
    public RateLimiter waitingForReplicas(int replicas, Duration timeout) {
        return new RateLimiter(async.waitingForReplicas(replicas, timeout));
    }

    /**
     * The backend, found on the first call.
     *
     * @return the backend
     */
    public Backend backend() {
        return Futures.join(async.backend());
    }

    /**
     * Sends any built call to the backend found, and reads its reply.
     *
     * @param <T> what the reply reads as
     * @param call the call, from a builder of {@code io.github.redisratelimit.command}
     * @return its answer
     */
    public <T> T execute(Command<T> call) {
        return Futures.join(async.execute(call));
    }

    /**
     * Counts a call against a fixed window ({@code RATELIMIT.HIT}).
     *
     * @param key the counter
     * @param limit the limit
     * @return the decision
     */
    public Decision hit(String key, Fixed limit) {
        return Futures.join(async.hit(key, limit));
    }

    /**
     * Whether a HIT of {@code cost} would be admitted, writing nothing ({@code RATELIMIT.PEEK}).
     *
     * @param key the counter
     * @param limit the limit
     * @param cost the cost, at least 1
     * @return the decision
     */
    public Decision peek(String key, long limit, long cost) {
        return Futures.join(async.peek(key, limit, cost));
    }

    /**
     * Counts a call against a sliding window ({@code RATELIMIT.SLIDE}).
     *
     * @param key the counter
     * @param limit the limit
     * @return the decision
     */
    public Decision slide(String key, Sliding limit) {
        return Futures.join(async.slide(key, limit));
    }

    /**
     * Whether a SLIDE would be admitted, writing nothing.
     *
     * @param key the counter
     * @param limit the limit
     * @return the decision
     */
    public Decision slidePeek(String key, Sliding limit) {
        return Futures.join(async.slidePeek(key, limit));
    }

    /**
     * Counts one call against several limits, all or nothing ({@code RATELIMIT.HITALL}).
     *
     * @param limits the limits
     * @param options the options
     * @return the decision
     */
    public MultiDecision hitAll(List<Limit> limits, AllOptions options) {
        return Futures.join(async.hitAll(limits, options));
    }

    /**
     * Takes tokens from a GCRA bucket ({@code RATELIMIT.GCRA}).
     *
     * @param key the bucket
     * @param rate the rate
     * @return the decision
     */
    public Decision gcra(String key, Rate rate) {
        return Futures.join(async.gcra(key, rate));
    }

    /**
     * Takes as many of the rate's tokens as the bucket has, at least one ({@code GCRA ... PARTIAL}).
     *
     * @param key the bucket
     * @param rate the rate, its tokens the most to take
     * @return the grant
     */
    public Grant gcraUpTo(String key, Rate rate) {
        return Futures.join(async.gcraUpTo(key, rate));
    }

    /**
     * Decides a call against the limit the fleet learns ({@code RATELIMIT.ADAPT}).
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost what the call takes, at least 1
     * @return the decision, its limit the learned one
     */
    public Decision adapt(String key, Adaptive terms, long cost) {
        return Futures.join(async.adapt(key, terms, cost));
    }

    /**
     * As {@link #adapt(String, Adaptive, long)}, asked again at the turn a denial told.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost see {@link #adapt(String, Adaptive, long)}
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it: it is
     *     then admitted on a bucket not in debt, so that no one who was not waiting takes its turn
     * @return as {@link #adapt(String, Adaptive, long)}
     */
    public Decision adapt(String key, Adaptive terms, long cost, boolean turn) {
        return Futures.join(async.adapt(key, terms, cost, turn));
    }

    /**
     * Takes as many of {@code cost} as the adaptive limit's bucket has, at least one.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost the most the call takes, at least 1
     * @return the grant
     */
    public Grant adaptUpTo(String key, Adaptive terms, long cost) {
        return Futures.join(async.adaptUpTo(key, terms, cost));
    }

    /**
     * As {@link #adaptUpTo(String, Adaptive, long)}, asked again at the turn a denial told.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost see {@link #adaptUpTo(String, Adaptive, long)}
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it: it is
     *     then admitted on a bucket not in debt, so that no one who was not waiting takes its turn
     * @return as {@link #adaptUpTo(String, Adaptive, long)}
     */
    public Grant adaptUpTo(String key, Adaptive terms, long cost, boolean turn) {
        return Futures.join(async.adaptUpTo(key, terms, cost, turn));
    }

    /**
     * {@code RATELIMIT.ADAPT RESERVE}: {@code estimate} decided and taken, and a reservation to
     * {@link #settle} with what was used.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param estimate what the call is expected to take, at least 1
     * @return the reservation (no token when denied)
     */
    public Reservation reserveAdapt(String key, Adaptive terms, long estimate) {
        return Futures.join(async.reserveAdapt(key, terms, estimate));
    }

    /**
     * As {@link #reserveAdapt(String, Adaptive, long)}, asked again at the turn a denial told.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param estimate see {@link #reserveAdapt(String, Adaptive, long)}
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it: it is
     *     then admitted on a bucket not in debt, so that no one who was not waiting takes its turn
     * @return as {@link #reserveAdapt(String, Adaptive, long)}
     */
    public Reservation reserveAdapt(String key, Adaptive terms, long estimate, boolean turn) {
        return Futures.join(async.reserveAdapt(key, terms, estimate, turn));
    }

    /**
     * {@code RATELIMIT.ADAPT PARTIAL RESERVE}: as many of {@code cost} as the bucket has whole, at
     * least one, reserved.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost the most the call takes, at least 1
     * @return the reservation of what was granted
     */
    public Reservation reserveAdaptUpTo(String key, Adaptive terms, long cost) {
        return Futures.join(async.reserveAdaptUpTo(key, terms, cost));
    }

    /**
     * As {@link #reserveAdaptUpTo(String, Adaptive, long)}, asked again at the turn a denial told.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost see {@link #reserveAdaptUpTo(String, Adaptive, long)}
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it: it is
     *     then admitted on a bucket not in debt, so that no one who was not waiting takes its turn
     * @return as {@link #reserveAdaptUpTo(String, Adaptive, long)}
     */
    public Reservation reserveAdaptUpTo(String key, Adaptive terms, long cost, boolean turn) {
        return Futures.join(async.reserveAdaptUpTo(key, terms, cost, turn));
    }

    /**
     * Tells the adaptive limit at {@code key} how its provider answered ({@code RATELIMIT.REPORT}).
     *
     * @param key the adaptive limit
     * @param report how the provider answered
     * @return what it learned; empty where no limit is learned at {@code key}
     */
    public Optional<Learned> report(String key, Report report) {
        return Futures.join(async.report(key, report));
    }

    /**
     * Counts as many of the limit's cost as the window has left, at least one ({@code HIT ... PARTIAL}).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the grant
     */
    public Grant hitUpTo(String key, Fixed limit) {
        return Futures.join(async.hitUpTo(key, limit));
    }

    /**
     * Counts as many of the limit's cost as the sliding window's estimate has room for, at least one
     * ({@code SLIDE ... PARTIAL}).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the grant
     */
    public Grant slideUpTo(String key, Sliding limit) {
        return Futures.join(async.slideUpTo(key, limit));
    }

    /**
     * Takes as many of the rate's tokens as the bucket has whole, at least one, and reserves what was
     * granted ({@code GCRA ... PARTIAL RESERVE}).
     *
     * @param key the bucket
     * @param rate the rate, its tokens the most to take
     * @return the reservation
     */
    public Reservation reserveGcraUpTo(String key, Rate rate) {
        return Futures.join(async.reserveGcraUpTo(key, rate));
    }

    /**
     * Gives {@code amount} back to the fixed window running now (a negative cost).
     *
     * @param key the counter
     * @param limit the limit (its cost is not read)
     * @param amount what to give back, at least 1
     * @return the decision
     */
    public Decision refundHit(String key, Fixed limit, long amount) {
        return Futures.join(async.refundHit(key, limit, amount));
    }

    /**
     * Gives {@code amount} back to the sliding window's current window (a negative cost).
     *
     * @param key the counter
     * @param limit the limit (its cost is not read)
     * @param amount what to give back, at least 1
     * @return the decision
     */
    public Decision refundSlide(String key, Sliding limit, long amount) {
        return Futures.join(async.refundSlide(key, limit, amount));
    }

    /**
     * Gives {@code amount} tokens back to the bucket (negative tokens).
     *
     * @param key the bucket
     * @param rate the rate (its tokens and alignment are not read)
     * @param amount tokens to give back, at least 1
     * @return the decision
     */
    public Decision refundGcra(String key, Rate rate, long amount) {
        return Futures.join(async.refundGcra(key, rate, amount));
    }

    /**
     * Counts an estimate (the limit's cost) against a fixed window, and reserves it for settle.
     *
     * @param key the counter
     * @param limit the limit, its cost the estimate
     * @return the reservation
     */
    public Reservation reserveHit(String key, Fixed limit) {
        return Futures.join(async.reserveHit(key, limit));
    }

    /**
     * Counts as many of the limit's cost as the window has left, at least one, and reserves what
     * was granted (the reservation's amount; 0, and no token, when none was left).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the reservation
     */
    public Reservation reserveHitUpTo(String key, Fixed limit) {
        return Futures.join(async.reserveHitUpTo(key, limit));
    }

    /**
     * Counts as many of the limit's cost as the sliding window's estimate has room for, at least
     * one, and reserves what was granted (the reservation's amount; 0, and no token, when none).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the reservation
     */
    public Reservation reserveSlideUpTo(String key, Sliding limit) {
        return Futures.join(async.reserveSlideUpTo(key, limit));
    }

    /**
     * This process's share of a limit a fleet shares, decided locally from blocks of granted
     * tokens: see {@link HotLimit} and docs/hot-keys.md.
     *
     * @param key the counter every process of the fleet names
     * @param limit the limit (its cost is not used: each take says how many)
     * @param options the tuning
     * @return the hot limit, to close at the end
     * @throws InvalidArgumentException a limit {@code hit} would refuse
     */
    public HotLimit hot(String key, Fixed limit, HotOptions options) {
        return new HotLimit(async, key, limit, options);
    }

    /**
     * This process's share of a limit a fleet shares, with the default tuning.
     *
     * @param key the counter every process of the fleet names
     * @param limit the limit
     * @return the hot limit, to close at the end
     * @see #hot(String, Fixed, HotOptions)
     */
    public HotLimit hot(String key, Fixed limit) {
        return hot(key, limit, HotOptions.DEFAULT);
    }

    /**
     * Counts an estimate against a sliding window, and reserves it.
     *
     * @param key the counter
     * @param limit the limit, its cost the estimate
     * @return the reservation
     */
    public Reservation reserveSlide(String key, Sliding limit) {
        return Futures.join(async.reserveSlide(key, limit));
    }

    /**
     * Takes an estimate from a bucket, and reserves it.
     *
     * @param key the bucket
     * @param rate the rate, its tokens the estimate
     * @return the reservation
     */
    public Reservation reserveGcra(String key, Rate rate) {
        return Futures.join(async.reserveGcra(key, rate));
    }

    /**
     * Decides a request's limits together, its estimated tokens on the token keys, and reserves
     * them ({@code HITALL ... TOKENS ... RESERVE}).
     *
     * @param limits the limits
     * @param options the options, their tokens the estimate
     * @return the reservation
     */
    public MultiReservation reserveAll(List<Limit> limits, AllOptions options) {
        return Futures.join(async.reserveAll(limits, options));
    }

    /**
     * Settles a reservation with what was used, at most once ({@code RATELIMIT.SETTLE}).
     *
     * @param reservation the reservation
     * @param used what was used
     * @return the settlement
     */
    public Settlement settle(Reservation reservation, long used) {
        return Futures.join(async.settle(reservation, used));
    }

    /**
     * Settles a {@link #reserveAll} reservation: one settlement per token key.
     *
     * @param reservation the reservation
     * @param used what was used
     * @return the settlements
     */
    public List<Settlement> settleAll(MultiReservation reservation, long used) {
        return Futures.join(async.settleAll(reservation, used));
    }

    /**
     * Takes one of at most {@code limit} permits in flight for {@code lease}, under {@code id}.
     *
     * @param key the permits' key
     * @param limit the permits there are
     * @param lease how long it is held unless renewed
     * @param id the lease's id, or {@code null} for a new one
     * @return the acquisition
     */
    public Acquisition acquire(String key, long limit, Duration lease, String id) {
        return Futures.join(async.acquire(key, limit, lease, id));
    }

    /**
     * Gives back the permit under {@code id}.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @return false if it was not live
     */
    public boolean release(String key, String id) {
        return Futures.join(async.release(key, id));
    }

    /**
     * Extends the live lease under {@code id} to {@code lease} from now.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @param lease the lease from now
     * @return the lease it now has; zero when it was lost
     */
    public Duration renew(String key, String id, Duration lease) {
        return Futures.join(async.renew(key, id, lease));
    }

    /**
     * Takes one of at most {@code limit} permits of {@code key} and keeps its lease renewed until
     * {@link Permit#close()}: for try-with-resources.
     *
     * @param key the permits' key
     * @param limit the permits there are
     * @param lease the lease, 3 ms or more
     * @return the permit held
     * @throws PermitUnavailableException every permit is in use
     */
    public Permit hold(String key, long limit, Duration lease) {
        return Futures.join(async.hold(key, limit, lease));
    }

    /**
     * Runs {@code work} holding one of at most {@code limit} permits of {@code key}, renewed while
     * it runs and released in a finally, whatever it throws.
     *
     * @param <T> what the work gives
     * @param key the permits' key
     * @param limit the permits there are
     * @param lease the lease, 3 ms or more
     * @param work the work, given the permit ({@link Permit#isLost()} tells if its lease ended first)
     * @return what the work gave
     * @throws PermitUnavailableException every permit is in use (the work does not run)
     */
    public <T> T withPermit(String key, long limit, Duration lease, Function<Permit, T> work) {
        Objects.requireNonNull(work, "work");
        Permit permit = hold(key, limit, lease);
        T result;
        try {
            result = work.apply(permit);
        } catch (RuntimeException | Error e) {
            try {
                permit.close();
            } catch (RuntimeException released) {
                e.addSuppressed(released);
            }
            throw e;
        }
        permit.close();
        return result;
    }

    /**
     * {@code RATELIMIT.TOP} (the module only) on the node the connection reaches first.
     *
     * @param options the options
     * @return the keys
     */
    public List<TopEntry> top(TopOptions options) {
        return Futures.join(async.top(options));
    }
}
