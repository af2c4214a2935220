package io.github.redisratelimit;

import io.github.redisratelimit.command.AdaptiveCommands;
import io.github.redisratelimit.command.Command;
import io.github.redisratelimit.command.GcraCommands;
import io.github.redisratelimit.command.LeaseCommands;
import io.github.redisratelimit.command.SettleCommands;
import io.github.redisratelimit.command.TopCommands;
import io.github.redisratelimit.command.WindowCommands;
import io.github.redisratelimit.spi.Transport;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The limiters' calls over one {@link Transport}, each answered by a {@link CompletableFuture}.
 * Arguments are checked before anything is sent: a refused one throws an
 * {@link InvalidArgumentException} at once. The backend (the module, else the Functions library,
 * loaded when missing) is found on first use, once for every caller, and remembered. Safe for
 * concurrent use. {@link RateLimiter} is the same, blocking.
 */
public final class AsyncRateLimiter {
    private final Transport transport;
    private final RateLimiterOptions options;
    /** The backend, or its search in progress; cleared when a search fails, to search again. */
    private final AtomicReference<CompletableFuture<Backend>> backend = new AtomicReference<>();

    /**
     * A limiter over an adapter's transport, with the default options.
     *
     * @param transport the adapter's transport
     */
    public AsyncRateLimiter(Transport transport) {
        this(transport, RateLimiterOptions.DEFAULT);
    }

    /**
     * A limiter over an adapter's transport.
     *
     * @param transport the adapter's transport
     * @param options how it finds its backend and bounds its own calls
     */
    public AsyncRateLimiter(Transport transport, RateLimiterOptions options) {
        this.transport = Objects.requireNonNull(transport, "transport");
        this.options = Objects.requireNonNull(options, "options");
    }

    /**
     * The options the limiter was made with.
     *
     * @return its options
     */
    public RateLimiterOptions options() {
        return options;
    }

    /**
     * The backend, found on the first call (and by this one if none was made yet). A search that
     * failed is made again by the next call.
     *
     * @return the backend
     */
    public CompletableFuture<Backend> backend() {
        CompletableFuture<Backend> found = backend.get();
        if (found != null) {
            return found.copy();
        }
        CompletableFuture<Backend> search = new CompletableFuture<>();
        if (!backend.compareAndSet(null, search)) {
            return backend();
        }
        CompletableFuture<Backend> probed;
        try {
            probed = probe();
        } catch (RuntimeException e) {
            // A transport that throws rather than fail its future must not leave the search open.
            probed = CompletableFuture.failedFuture(e);
        }
        Futures.within(options.backgroundTimeout(), probed).whenComplete((b, e) -> {
            if (e != null) {
                backend.compareAndSet(search, null);
                search.completeExceptionally(Futures.unwrap(e));
            } else {
                search.complete(b);
            }
        });
        return search.copy();
    }

    private static boolean serverSays(Throwable e, String words) {
        return Futures.unwrap(e) instanceof ServerErrorException s && s.getMessage() != null
                && s.getMessage().toLowerCase(Locale.ROOT).contains(words);
    }

    /** The module answers PEEK with no arguments by its arity error; a server without it "unknown command". */
    private CompletableFuture<Backend> probe() {
        return transport.send(-1, List.of("RATELIMIT.PEEK")).toCompletableFuture().handle((reply, e) -> {
            if (e == null || Futures.unwrap(e) instanceof ServerErrorException && !serverSays(e, "unknown command")) {
                return CompletableFuture.completedFuture(Backend.MODULE);
            }
            if (!(Futures.unwrap(e) instanceof ServerErrorException)) {
                return CompletableFuture.<Backend>failedFuture(Futures.unwrap(e));
            }
            return ensureLibrary().thenApply(v -> Backend.LIBRARY);
        }).thenCompose(Function.identity());
    }

    /** Loads the library on every primary that lacks it (never REPLACE: a newer one loaded by hand stays). */
    private CompletableFuture<Void> ensureLibrary() {
        return transport.eachPrimary(node -> node.send(-1, List.of("FUNCTION", "LIST", "LIBRARYNAME", Library.NAME))
                .thenCompose(listing -> {
                    if (hasLibrary(listing)) {
                        return CompletableFuture.<Void>completedFuture(null);
                    }
                    if (!options.loadLibrary()) {
                        return CompletableFuture.<Void>failedFuture(new LibraryNotLoadedException());
                    }
                    return node.send(-1, List.of("FUNCTION", "LOAD", Library.source())).handle((r, e) -> {
                        if (e != null && !serverSays(e, "already exists")) {
                            throw new CompletionException(Futures.unwrap(e));
                        }
                        return (Void) null;
                    });
                })).toCompletableFuture();
    }

    private static boolean hasLibrary(Object listing) {
        if (listing instanceof List<?> entries) {
            for (Object entry : entries) {
                Object name = entry instanceof Map<?, ?> m ? m.get("library_name") : null;
                if (entry instanceof List<?> fields) {
                    for (int i = 0; i + 1 < fields.size(); i += 2) {
                        if ("library_name".equals(fields.get(i))) {
                            name = fields.get(i + 1);
                        }
                    }
                }
                if (Library.NAME.equals(name)) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * Sends any built call to the backend found, and reads its reply.
     *
     * @param <T> what the reply reads as
     * @param call the call, from a builder of {@code io.github.redisratelimit.command}
     * @return its answer
     */
    public <T> CompletableFuture<T> execute(Command<T> call) {
        Objects.requireNonNull(call, "call");
        if (transport.cluster() && call.keys().size() > 1) {
            int first = Slots.slot(call.keys().get(0));
            for (String key : call.keys()) {
                if (Slots.slot(key) != first) {
                    throw new InvalidArgumentException("CROSSSLOT Keys in request don't hash to the same slot "
                            + "(give them one hash tag, e.g. rl:{user:42}:s)");
                }
            }
        }
        return backend().thenCompose(b -> {
            if (b == Backend.LIBRARY && call.function() == null) {
                throw new InvalidArgumentException(call.command() + " needs the module (the Functions library has no such function)");
            }
            List<String> args = b == Backend.MODULE ? call.moduleArgs() : call.libraryArgs();
            int keyPos = b == Backend.MODULE ? call.moduleKeyPosition() : call.libraryKeyPosition();
            int replicas = options.replicas();
            if (replicas == 0 || !call.writes()) {
                return delivered(b, () -> transport.send(keyPos, args)).thenApply(call::read);
            }
            return delivered(b, () -> transport.sendWaiting(keyPos, args, replicas, options.replicaTimeoutMs()))
                    .thenApply(waited -> {
                        T answer = call.read(waited.reply());
                        if (waited.acknowledged() < replicas) {
                            throw new NotReplicatedException(answer, waited.acknowledged(), replicas);
                        }
                        return answer;
                    });
        });
    }

    /** {@code send}'s reply; on the library, sent again once the server lost it (a restart without
     * persistence, FUNCTION FLUSH) and it is loaded anew. */
    private <R> CompletionStage<R> delivered(Backend b, Supplier<CompletionStage<R>> send) {
        CompletionStage<R> sent = send.get();
        if (b != Backend.LIBRARY) {
            return sent;
        }
        return sent.handle((reply, e) -> e != null && serverSays(e, "function not found")
                ? ensureLibrary().thenCompose(v -> send.get())
                : e != null ? CompletableFuture.<R>failedFuture(Futures.unwrap(e)) : CompletableFuture.completedFuture(reply))
                .thenCompose(Function.identity());
    }

    /**
     * This limiter's transport and options, its writes waiting for {@code replicas} replicas for
     * at most {@code timeout}, for one call or a few: {@code rl.waitingForReplicas(1, ms).settle(...)}.
     *
     * @param replicas the replicas to wait for (0: none)
     * @param timeout the longest wait, at least 1 ms
     * @return the limiter
     */
    public AsyncRateLimiter waitingForReplicas(int replicas, Duration timeout) {
        return new AsyncRateLimiter(transport, options.waitingForReplicas(replicas, timeout));
    }

    /**
     * Counts a call against a fixed window ({@code RATELIMIT.HIT}).
     *
     * @param key the counter
     * @param limit the limit
     * @return the decision
     */
    public CompletableFuture<Decision> hit(String key, Fixed limit) {
        return execute(WindowCommands.hit(key, limit));
    }

    /**
     * Whether a HIT of {@code cost} would be admitted, writing nothing ({@code RATELIMIT.PEEK}).
     *
     * @param key the counter
     * @param limit the limit
     * @param cost the cost, at least 1
     * @return the decision
     */
    public CompletableFuture<Decision> peek(String key, long limit, long cost) {
        return execute(WindowCommands.peek(key, limit, cost));
    }

    /**
     * Counts a call against a sliding window ({@code RATELIMIT.SLIDE}).
     *
     * @param key the counter
     * @param limit the limit
     * @return the decision
     */
    public CompletableFuture<Decision> slide(String key, Sliding limit) {
        return execute(WindowCommands.slide(key, limit));
    }

    /**
     * Whether a SLIDE would be admitted, writing nothing.
     *
     * @param key the counter
     * @param limit the limit
     * @return the decision
     */
    public CompletableFuture<Decision> slidePeek(String key, Sliding limit) {
        return execute(WindowCommands.slidePeek(key, limit));
    }

    /**
     * Counts one call against several limits, all or nothing ({@code RATELIMIT.HITALL}).
     *
     * @param limits the limits
     * @param options the options
     * @return the decision
     */
    public CompletableFuture<MultiDecision> hitAll(List<Limit> limits, AllOptions options) {
        return execute(WindowCommands.hitAll(limits, options));
    }

    /**
     * Takes tokens from a GCRA bucket ({@code RATELIMIT.GCRA}).
     *
     * @param key the bucket
     * @param rate the rate
     * @return the decision
     */
    public CompletableFuture<Decision> gcra(String key, Rate rate) {
        return execute(GcraCommands.gcra(key, rate));
    }

    /**
     * Decides a call against the limit the fleet learns ({@code RATELIMIT.ADAPT}): paced, at most
     * a sixth of a window's limit at once; the decision's limit is the learned one.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost what the call takes, at least 1
     * @return the decision
     */
    public CompletableFuture<Decision> adapt(String key, Adaptive terms, long cost) {
        return execute(AdaptiveCommands.adapt(key, terms, cost));
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
    public CompletableFuture<Decision> adapt(String key, Adaptive terms, long cost, boolean turn) {
        return execute(AdaptiveCommands.adapt(key, terms, cost, turn));
    }

    /**
     * Takes as many of {@code cost} as the adaptive limit's bucket has, at least one
     * ({@code ADAPT ... PARTIAL}).
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost the most the call takes, at least 1
     * @return the grant
     */
    public CompletableFuture<Grant> adaptUpTo(String key, Adaptive terms, long cost) {
        return execute(AdaptiveCommands.adaptUpTo(key, terms, cost));
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
    public CompletableFuture<Grant> adaptUpTo(String key, Adaptive terms, long cost, boolean turn) {
        return execute(AdaptiveCommands.adaptUpTo(key, terms, cost, turn));
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
    public CompletableFuture<Reservation> reserveAdapt(String key, Adaptive terms, long estimate) {
        return execute(AdaptiveCommands.reserveAdapt(key, terms, estimate));
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
    public CompletableFuture<Reservation> reserveAdapt(String key, Adaptive terms, long estimate, boolean turn) {
        return execute(AdaptiveCommands.reserveAdapt(key, terms, estimate, turn));
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
    public CompletableFuture<Reservation> reserveAdaptUpTo(String key, Adaptive terms, long cost) {
        return execute(AdaptiveCommands.reserveAdaptUpTo(key, terms, cost));
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
    public CompletableFuture<Reservation> reserveAdaptUpTo(String key, Adaptive terms, long cost, boolean turn) {
        return execute(AdaptiveCommands.reserveAdaptUpTo(key, terms, cost, turn));
    }

    /**
     * Tells the adaptive limit at {@code key} how its provider answered ({@code RATELIMIT.REPORT}).
     *
     * @param key the adaptive limit
     * @param report how the provider answered
     * @return what it learned; empty where no limit is learned at {@code key}
     */
    public CompletableFuture<Optional<Learned>> report(String key, Report report) {
        return execute(AdaptiveCommands.report(key, report));
    }

    /**
     * Takes as many of the rate's tokens as the bucket has, at least one ({@code GCRA ... PARTIAL}).
     *
     * @param key the bucket
     * @param rate the rate, its tokens the most to take
     * @return the grant
     */
    public CompletableFuture<Grant> gcraUpTo(String key, Rate rate) {
        return execute(GcraCommands.gcraUpTo(key, rate));
    }

    /**
     * Counts as many of the limit's cost as the window has left, at least one ({@code HIT ... PARTIAL}).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the grant
     */
    public CompletableFuture<Grant> hitUpTo(String key, Fixed limit) {
        return execute(WindowCommands.hitUpTo(key, limit));
    }

    /**
     * Counts as many of the limit's cost as the sliding window's estimate has room for, at least one
     * ({@code SLIDE ... PARTIAL}).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the grant
     */
    public CompletableFuture<Grant> slideUpTo(String key, Sliding limit) {
        return execute(WindowCommands.slideUpTo(key, limit));
    }

    /**
     * Takes as many of the rate's tokens as the bucket has whole, at least one, and reserves what was
     * granted ({@code GCRA ... PARTIAL RESERVE}).
     *
     * @param key the bucket
     * @param rate the rate, its tokens the most to take
     * @return the reservation
     */
    public CompletableFuture<Reservation> reserveGcraUpTo(String key, Rate rate) {
        return execute(GcraCommands.reserveGcraUpTo(key, rate));
    }

    /**
     * Gives {@code amount} back to the fixed window running now (a negative cost).
     *
     * @param key the counter
     * @param limit the limit (its cost is not read)
     * @param amount what to give back, at least 1
     * @return the decision
     */
    public CompletableFuture<Decision> refundHit(String key, Fixed limit, long amount) {
        return execute(WindowCommands.refundHit(key, limit, amount));
    }

    /**
     * Gives {@code amount} back to the sliding window's current window (a negative cost).
     *
     * @param key the counter
     * @param limit the limit (its cost is not read)
     * @param amount what to give back, at least 1
     * @return the decision
     */
    public CompletableFuture<Decision> refundSlide(String key, Sliding limit, long amount) {
        return execute(WindowCommands.refundSlide(key, limit, amount));
    }

    /**
     * Gives {@code amount} tokens back to the bucket (negative tokens).
     *
     * @param key the bucket
     * @param rate the rate (its tokens and alignment are not read)
     * @param amount tokens to give back, at least 1
     * @return the decision
     */
    public CompletableFuture<Decision> refundGcra(String key, Rate rate, long amount) {
        return execute(GcraCommands.refundGcra(key, rate, amount));
    }

    /**
     * Counts an estimate (the limit's cost) against a fixed window, and reserves it for settle.
     *
     * @param key the counter
     * @param limit the limit, its cost the estimate
     * @return the reservation
     */
    public CompletableFuture<Reservation> reserveHit(String key, Fixed limit) {
        return execute(WindowCommands.reserveHit(key, limit));
    }

    /**
     * Counts as many of the limit's cost as the window has left, at least one, and reserves what
     * was granted (the reservation's amount; 0, and no token, when none was left).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the reservation
     */
    public CompletableFuture<Reservation> reserveHitUpTo(String key, Fixed limit) {
        return execute(WindowCommands.reserveHitUpTo(key, limit));
    }

    /**
     * Counts as many of the limit's cost as the sliding window's estimate has room for, at least
     * one, and reserves what was granted (the reservation's amount; 0, and no token, when none).
     *
     * @param key the counter
     * @param limit the limit, its cost the most to take
     * @return the reservation
     */
    public CompletableFuture<Reservation> reserveSlideUpTo(String key, Sliding limit) {
        return execute(WindowCommands.reserveSlideUpTo(key, limit));
    }

    /**
     * Counts an estimate against a sliding window, and reserves it.
     *
     * @param key the counter
     * @param limit the limit, its cost the estimate
     * @return the reservation
     */
    public CompletableFuture<Reservation> reserveSlide(String key, Sliding limit) {
        return execute(WindowCommands.reserveSlide(key, limit));
    }

    /**
     * Takes an estimate from a bucket, and reserves it.
     *
     * @param key the bucket
     * @param rate the rate, its tokens the estimate
     * @return the reservation
     */
    public CompletableFuture<Reservation> reserveGcra(String key, Rate rate) {
        return execute(GcraCommands.reserveGcra(key, rate));
    }

    /**
     * Decides a request's limits together, its estimated tokens on the token keys, and reserves
     * them ({@code HITALL ... TOKENS ... RESERVE}).
     *
     * @param limits the limits
     * @param options the options, their tokens the estimate
     * @return the reservation
     */
    public CompletableFuture<MultiReservation> reserveAll(List<Limit> limits, AllOptions options) {
        return execute(WindowCommands.reserveAll(limits, options));
    }

    /**
     * Settles a reservation with what was used, at most once ({@code RATELIMIT.SETTLE}).
     *
     * @param reservation the reservation
     * @param used what was used
     * @return the settlement
     */
    public CompletableFuture<Settlement> settle(Reservation reservation, long used) {
        return execute(SettleCommands.settle(reservation, used));
    }

    /**
     * Settles a {@link #reserveAll} reservation: one settlement per token key.
     *
     * @param reservation the reservation
     * @param used what was used
     * @return the settlements
     */
    public CompletableFuture<List<Settlement>> settleAll(MultiReservation reservation, long used) {
        return execute(SettleCommands.settleAll(reservation, used));
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
    public CompletableFuture<Acquisition> acquire(String key, long limit, Duration lease, String id) {
        return execute(LeaseCommands.acquire(key, limit, lease, id));
    }

    /**
     * Gives back the permit under {@code id}.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @return false if it was not live
     */
    public CompletableFuture<Boolean> release(String key, String id) {
        return execute(LeaseCommands.release(key, id));
    }

    /**
     * Extends the live lease under {@code id} to {@code lease} from now.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @param lease the lease from now
     * @return the lease it now has; zero when it was lost
     */
    public CompletableFuture<Duration> renew(String key, String id, Duration lease) {
        return execute(LeaseCommands.renew(key, id, lease));
    }

    /**
     * Takes one of at most {@code limit} permits of {@code key} and keeps its lease renewed (every
     * third of it) until {@link Permit#close()}. No permit free: the future fails with a
     * {@link PermitUnavailableException}.
     *
     * @param key the permits' key
     * @param limit the permits there are
     * @param lease the lease, 3 ms or more
     * @return the permit held
     */
    public CompletableFuture<Permit> hold(String key, long limit, Duration lease) {
        if (lease == null || lease.compareTo(Duration.ofMillis(3)) < 0) {
            throw new InvalidArgumentException("a held lease must be 3 ms or more (it is renewed every third of it)");
        }
        return acquire(key, limit, lease, null).thenApply(got -> {
            if (!got.acquired()) {
                throw new PermitUnavailableException(got.inUse(), limit, got.waitTime());
            }
            return new Permit(this, key, got, lease);
        });
    }

    /**
     * Runs {@code work} holding one of at most {@code limit} permits of {@code key} (see
     * {@link #hold}), and releases it when the stage {@code work} gives completes, or it throws.
     *
     * @param <T> what the work gives
     * @param key the permits' key
     * @param limit the permits there are
     * @param lease the lease, 3 ms or more
     * @param work the work, given the permit ({@link Permit#lost()} tells if its lease ends first)
     * @return what the work gave
     */
    public <T> CompletableFuture<T> withPermit(String key, long limit, Duration lease,
            Function<Permit, ? extends CompletionStage<T>> work) {
        Objects.requireNonNull(work, "work");
        return hold(key, limit, lease).thenCompose(permit -> {
            CompletionStage<T> done;
            try {
                done = work.apply(permit);
            } catch (RuntimeException e) {
                done = CompletableFuture.failedFuture(e);
            }
            return done.handle((v, e) -> permit.end().handle((released, ignored) -> {
                if (e != null) {
                    throw new CompletionException(Futures.unwrap(e));
                }
                return v;
            })).thenCompose(Function.identity());
        });
    }

    /**
     * {@code RATELIMIT.TOP} (the module only) on the node the connection reaches first.
     *
     * @param options the options
     * @return the keys
     */
    public CompletableFuture<List<TopEntry>> top(TopOptions options) {
        return execute(TopCommands.top(options));
    }

    /** The limiter's own calls' deadline, for its permits. */
    Duration backgroundTimeout() {
        return options.backgroundTimeout();
    }
}
