package io.github.redisratelimit.lettuce;

import io.github.redisratelimit.Acquisition;
import io.github.redisratelimit.Adaptive;
import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.AsyncRateLimiter;
import io.github.redisratelimit.Backend;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.Grant;
import io.github.redisratelimit.Learned;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.MultiDecision;
import io.github.redisratelimit.MultiReservation;
import io.github.redisratelimit.Permit;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.Report;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.Settlement;
import io.github.redisratelimit.Sliding;
import io.github.redisratelimit.TopEntry;
import io.github.redisratelimit.TopOptions;
import io.github.redisratelimit.command.Command;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;

/**
 * The limiters' calls as Reactor {@link Mono}s: each call is sent when subscribed, and a refused
 * argument is the Mono's error, as Reactor's callers expect. The same calls as
 * {@link AsyncRateLimiter}, which it wraps.
 */
public final class ReactiveRateLimiter {
    private final AsyncRateLimiter async;

    /**
     * The reactive form of an asynchronous limiter (they share the backend found).
     *
     * @param async the limiter
     */
    public ReactiveRateLimiter(AsyncRateLimiter async) {
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

    private static <T> Mono<T> mono(Supplier<CompletableFuture<T>> call) {
        return Mono.fromFuture(call);
    }

    /**
     * The backend, found on the first call.
     *
     * @return the backend
     */
    public Mono<Backend> backend() {
        return mono(async::backend);
    }

    /**
     * Sends any built call.
     *
     * @param <T> what the reply reads as
     * @param call the call
     * @return its answer
     */
    public <T> Mono<T> execute(Command<T> call) {
        return mono(() -> async.execute(call));
    }

    /**
     * {@code RATELIMIT.HIT}.
     *
     * @param key the counter
     * @param limit the limit
     * @return the decision
     */
    public Mono<Decision> hit(String key, Fixed limit) {
        return mono(() -> async.hit(key, limit));
    }

    /**
     * {@code RATELIMIT.PEEK}.
     *
     * @param key the counter
     * @param limit the limit
     * @param cost the cost, at least 1
     * @return the decision
     */
    public Mono<Decision> peek(String key, long limit, long cost) {
        return mono(() -> async.peek(key, limit, cost));
    }

    /**
     * {@code RATELIMIT.SLIDE}.
     *
     * @param key the counter
     * @param limit the limit
     * @return the decision
     */
    public Mono<Decision> slide(String key, Sliding limit) {
        return mono(() -> async.slide(key, limit));
    }

    /**
     * {@code RATELIMIT.SLIDE ... PEEK}.
     *
     * @param key the counter
     * @param limit the limit
     * @return the decision
     */
    public Mono<Decision> slidePeek(String key, Sliding limit) {
        return mono(() -> async.slidePeek(key, limit));
    }

    /**
     * {@code RATELIMIT.HITALL}.
     *
     * @param limits the limits
     * @param options the options
     * @return the decision
     */
    public Mono<MultiDecision> hitAll(List<Limit> limits, AllOptions options) {
        return mono(() -> async.hitAll(limits, options));
    }

    /**
     * {@code RATELIMIT.GCRA}.
     *
     * @param key the bucket
     * @param rate the rate
     * @return the decision
     */
    public Mono<Decision> gcra(String key, Rate rate) {
        return mono(() -> async.gcra(key, rate));
    }

    /**
     * {@code RATELIMIT.GCRA ... PARTIAL}.
     *
     * @param key the bucket
     * @param rate the rate
     * @return the grant
     */
    public Mono<Grant> gcraUpTo(String key, Rate rate) {
        return mono(() -> async.gcraUpTo(key, rate));
    }

    /**
     * Decides a call against the limit the fleet learns ({@code RATELIMIT.ADAPT}).
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost what the call takes, at least 1
     * @return the decision, its limit the learned one
     */
    public Mono<Decision> adapt(String key, Adaptive terms, long cost) {
        return mono(() -> async.adapt(key, terms, cost));
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
    public Mono<Decision> adapt(String key, Adaptive terms, long cost, boolean turn) {
        return mono(() -> async.adapt(key, terms, cost, turn));
    }

    /**
     * Takes as many of {@code cost} as the adaptive limit's bucket has, at least one.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost the most the call takes, at least 1
     * @return the grant
     */
    public Mono<Grant> adaptUpTo(String key, Adaptive terms, long cost) {
        return mono(() -> async.adaptUpTo(key, terms, cost));
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
    public Mono<Grant> adaptUpTo(String key, Adaptive terms, long cost, boolean turn) {
        return mono(() -> async.adaptUpTo(key, terms, cost, turn));
    }

    /**
     * {@code RATELIMIT.ADAPT RESERVE}: {@code estimate} decided and taken, and a reservation to
     * settle with what was used.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param estimate what the call is expected to take, at least 1
     * @return the reservation (no token when denied)
     */
    public Mono<Reservation> reserveAdapt(String key, Adaptive terms, long estimate) {
        return mono(() -> async.reserveAdapt(key, terms, estimate));
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
    public Mono<Reservation> reserveAdapt(String key, Adaptive terms, long estimate, boolean turn) {
        return mono(() -> async.reserveAdapt(key, terms, estimate, turn));
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
    public Mono<Reservation> reserveAdaptUpTo(String key, Adaptive terms, long cost) {
        return mono(() -> async.reserveAdaptUpTo(key, terms, cost));
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
    public Mono<Reservation> reserveAdaptUpTo(String key, Adaptive terms, long cost, boolean turn) {
        return mono(() -> async.reserveAdaptUpTo(key, terms, cost, turn));
    }

    /**
     * Tells the adaptive limit at {@code key} how its provider answered ({@code RATELIMIT.REPORT}).
     *
     * @param key the adaptive limit
     * @param report how the provider answered
     * @return what it learned; empty where no limit is learned at {@code key}
     */
    public Mono<Optional<Learned>> report(String key, Report report) {
        return mono(() -> async.report(key, report));
    }

    /**
     * Counts as many of the limit's cost as the window has left, at least one ({@code HIT ... PARTIAL}).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the grant
     */
    public Mono<Grant> hitUpTo(String key, Fixed limit) {
        return mono(() -> async.hitUpTo(key, limit));
    }

    /**
     * Counts as many of the limit's cost as the sliding window's estimate has room for, at least one
     * ({@code SLIDE ... PARTIAL}).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the grant
     */
    public Mono<Grant> slideUpTo(String key, Sliding limit) {
        return mono(() -> async.slideUpTo(key, limit));
    }

    /**
     * Takes as many of the rate's tokens as the bucket has whole, at least one, and reserves what was
     * granted ({@code GCRA ... PARTIAL RESERVE}).
     *
     * @param key the bucket
     * @param rate the rate, its tokens the most to take
     * @return the reservation
     */
    public Mono<Reservation> reserveGcraUpTo(String key, Rate rate) {
        return mono(() -> async.reserveGcraUpTo(key, rate));
    }

    /**
     * Gives {@code amount} back to the fixed window running now (a negative cost).
     *
     * @param key the counter
     * @param limit the limit (its cost is not read)
     * @param amount what to give back, at least 1
     * @return the decision
     */
    public Mono<Decision> refundHit(String key, Fixed limit, long amount) {
        return mono(() -> async.refundHit(key, limit, amount));
    }

    /**
     * Gives {@code amount} back to the sliding window's current window (a negative cost).
     *
     * @param key the counter
     * @param limit the limit (its cost is not read)
     * @param amount what to give back, at least 1
     * @return the decision
     */
    public Mono<Decision> refundSlide(String key, Sliding limit, long amount) {
        return mono(() -> async.refundSlide(key, limit, amount));
    }

    /**
     * Gives {@code amount} tokens back to the bucket (negative tokens).
     *
     * @param key the bucket
     * @param rate the rate (its tokens and alignment are not read)
     * @param amount tokens to give back, at least 1
     * @return the decision
     */
    public Mono<Decision> refundGcra(String key, Rate rate, long amount) {
        return mono(() -> async.refundGcra(key, rate, amount));
    }

    /**
     * {@code RATELIMIT.HIT ... RESERVE}.
     *
     * @param key the counter
     * @param limit the limit, its cost the estimate
     * @return the reservation
     */
    public Mono<Reservation> reserveHit(String key, Fixed limit) {
        return mono(() -> async.reserveHit(key, limit));
    }

    /**
     * {@code RATELIMIT.HIT ... PARTIAL RESERVE}.
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the reservation of what was granted
     */
    public Mono<Reservation> reserveHitUpTo(String key, Fixed limit) {
        return mono(() -> async.reserveHitUpTo(key, limit));
    }

    /**
     * {@code RATELIMIT.SLIDE ... PARTIAL RESERVE}.
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the reservation of what was granted
     */
    public Mono<Reservation> reserveSlideUpTo(String key, Sliding limit) {
        return mono(() -> async.reserveSlideUpTo(key, limit));
    }

    /**
     * {@code RATELIMIT.SLIDE ... RESERVE}.
     *
     * @param key the counter
     * @param limit the limit, its cost the estimate
     * @return the reservation
     */
    public Mono<Reservation> reserveSlide(String key, Sliding limit) {
        return mono(() -> async.reserveSlide(key, limit));
    }

    /**
     * {@code RATELIMIT.GCRA ... RESERVE}.
     *
     * @param key the bucket
     * @param rate the rate, its tokens the estimate
     * @return the reservation
     */
    public Mono<Reservation> reserveGcra(String key, Rate rate) {
        return mono(() -> async.reserveGcra(key, rate));
    }

    /**
     * {@code RATELIMIT.HITALL ... TOKENS ... RESERVE}.
     *
     * @param limits the limits
     * @param options the options, their tokens the estimate
     * @return the reservation
     */
    public Mono<MultiReservation> reserveAll(List<Limit> limits, AllOptions options) {
        return mono(() -> async.reserveAll(limits, options));
    }

    /**
     * {@code RATELIMIT.SETTLE}.
     *
     * @param reservation the reservation
     * @param used what was used
     * @return the settlement
     */
    public Mono<Settlement> settle(Reservation reservation, long used) {
        return mono(() -> async.settle(reservation, used));
    }

    /**
     * {@code RATELIMIT.SETTLE} of a {@link #reserveAll} reservation.
     *
     * @param reservation the reservation
     * @param used what was used
     * @return the settlements
     */
    public Mono<List<Settlement>> settleAll(MultiReservation reservation, long used) {
        return mono(() -> async.settleAll(reservation, used));
    }

    /**
     * {@code RATELIMIT.ACQUIRE}.
     *
     * @param key the permits' key
     * @param limit the permits there are
     * @param lease how long it is held unless renewed
     * @param id the lease's id, or {@code null} for a new one
     * @return the acquisition
     */
    public Mono<Acquisition> acquire(String key, long limit, Duration lease, String id) {
        return mono(() -> async.acquire(key, limit, lease, id));
    }

    /**
     * {@code RATELIMIT.RELEASE}.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @return false if it was not live
     */
    public Mono<Boolean> release(String key, String id) {
        return mono(() -> async.release(key, id));
    }

    /**
     * {@code RATELIMIT.RENEW}.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @param lease the lease from now
     * @return the lease it now has; zero when it was lost
     */
    public Mono<Duration> renew(String key, String id, Duration lease) {
        return mono(() -> async.renew(key, id, lease));
    }

    /**
     * Runs {@code work} holding one of at most {@code limit} permits of {@code key}, renewed while
     * it runs and released when it ends (completes, fails or is cancelled).
     *
     * @param <T> what the work gives
     * @param key the permits' key
     * @param limit the permits there are
     * @param lease the lease, 3 ms or more
     * @param work the work, given the permit
     * @return what the work gave; a {@link io.github.redisratelimit.PermitUnavailableException} when
     *     every permit is in use
     */
    public <T> Mono<T> withPermit(String key, long limit, Duration lease, Function<Permit, Mono<T>> work) {
        Objects.requireNonNull(work, "work");
        return Mono.usingWhen(mono(() -> async.hold(key, limit, lease)), work,
                permit -> Mono.fromFuture(permit::end));
    }

    /**
     * {@code RATELIMIT.TOP} (the module only).
     *
     * @param options the options
     * @return the keys
     */
    public Mono<List<TopEntry>> top(TopOptions options) {
        return mono(() -> async.top(options));
    }
}
