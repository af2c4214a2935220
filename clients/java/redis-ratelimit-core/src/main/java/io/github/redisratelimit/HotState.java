package io.github.redisratelimit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * What a {@link HotLimit} decides, with no I/O and no clock of its own: every instant is in
 * nanoseconds on the process's monotonic clock, given by the caller. The blocks of granted tokens
 * held, the local demand, and the deny until the window resets. HotLimit runs it under its lock;
 * HotSimulationTest runs it against a model of the server. The rules are the Go, Python and Node
 * clients' (each proven by the same simulation), so the four share a limit alike.
 */
final class HotState {
    /** One grant: tokens left, usable before deadline, and the reservation that settles what was not used. */
    static final class Block {
        long left;
        final long deadline;
        final Reservation grant;

        Block(long left, long deadline, Reservation grant) {
            this.left = left;
            this.deadline = deadline;
            this.grant = grant;
        }
    }

    /**
     * What to do for a take: admit or deny it, and send a request (for {@code send} tokens), or
     * wait for the one in flight ({@code await}), or until {@code sleepUntil}, then step again.
     */
    record Step(boolean admitted, boolean denied, long send, boolean await, long sleepUntil) {
    }

    private final long limit;
    // How much of the local demand a block covers; the guard, and a thousandth of the time the
    // window had left (for the clocks' rates), come off each block's deadline.
    private final long horizon;
    private final long guard;
    // The grants not yet spent, in the order they came.
    private final List<Block> blocks = new ArrayList<>();
    // A request in flight (one at a time); the tokens the takes waiting for its answer want.
    private boolean asking;
    private long waiting;
    // The server said none remain: no request before then.
    private long deniedUntil;
    // A grant came too late to be used: the next request waits for the next window.
    private long pausedUntil;
    // The demand: tokens asked for since `since`, and the rate measured then (tokens a second).
    private long taken;
    private long since;
    private double rate;
    // What the server had left after the last grant (-1: not known yet), and its deadline.
    private long remaining = -1;
    private long windowEnd;

    HotState(long limit, Duration horizon, Duration guard, long now) {
        this.limit = limit;
        this.horizon = horizon.toNanos();
        this.guard = guard.toNanos();
        this.since = now;
    }

    /** The tokens usable at now: the blocks' left whose deadline has not come. */
    long held(long now) {
        long n = 0;
        for (Block b : blocks) {
            if (now < b.deadline) {
                n += b.left;
            }
        }
        return n;
    }

    /** Spends n tokens at now if the blocks hold them (the first to expire first): no round trip. */
    private boolean take(long now, long n) {
        drop(now);
        if (held(now) < n) {
            return false;
        }
        for (Block b : blocks) {
            long spent = Math.min(n, b.left);
            b.left -= spent;
            n -= spent;
        }
        drop(now);
        return true;
    }

    /** Forgets the blocks spent or past their deadline (an expired block's tokens are lost for its window). */
    private void drop(long now) {
        blocks.removeIf(b -> b.left <= 0 || now >= b.deadline);
    }

    /** Whether the server said none remain in the window running at now. */
    boolean denied(long now) {
        return now < deniedUntil;
    }

    /**
     * Whether to send a request at now, and for how many tokens (0: none), when {@code need}
     * more are wanted (0: only refilling ahead): when none is in flight, the server has not said
     * none remain, and what is held covers less than half a horizon of demand (or less than
     * need). It asks for a horizon of demand (measured over a horizon at least: none before), at
     * least need, no more than the demand spends before the window's end, nor than an eighth of
     * what the server had left (of the limit, in a window not seen yet).
     */
    private long ask(long now, long need) {
        if (asking || denied(now) || now < pausedUntil) {
            return 0;
        }
        long held = held(now);
        long elapsed = now - since;
        if (elapsed >= horizon) {
            rate = taken / (elapsed / 1e9);
            taken = 0;
            since = now;
        }
        long want = (long) Math.ceil(rate * horizon / 1e9);
        if (held >= need && (held > want / 2 || want == 0)) {
            return 0;
        }
        long left = limit;
        if (now < windowEnd) {
            want = Math.min(want, (long) Math.ceil(rate * (windowEnd - now) / 1e9));
            left = remaining;
        }
        want = Math.min(want, Math.max(1, left / 8));
        want = Math.max(want, Math.max(need - held, 1));
        asking = true;
        return want;
    }

    /**
     * The answer to the request sent at {@code sent}: a block usable until the window's end as
     * the server saw it, less the guard, counted from the send (the server read its clock after
     * it). A grant of 0, or one that left none, makes the window denied until it resets; a grant
     * too late to use waits for the next window.
     */
    void granted(long sent, long received, Reservation r) {
        asking = false;
        long reset = nanos(r.decision().resetAfter());
        long guarded = guard + reset / 1000;
        long resetAt = received + reset + guarded;
        long deadline = sent + reset - guarded;
        if (r.amount() > 0 && received < deadline) {
            blocks.add(new Block(r.amount(), deadline, r));
            remaining = r.decision().remaining();
            windowEnd = deadline;
        } else if (r.amount() > 0) {
            pausedUntil = resetAt;
            return;
        }
        if (r.amount() == 0 || r.decision().remaining() == 0) {
            deniedUntil = resetAt;
        }
    }

    /** A duration in ns, at most about 73 years (a calendar year's window is far below). */
    private static long nanos(Duration d) {
        return d.compareTo(Duration.ofDays(26_000)) > 0 ? Duration.ofDays(26_000).toNanos() : d.toNanos();
    }

    /**
     * A take of n at now, its {@code tries}th step: a step after waiting for an answer is a try
     * ({@code waited}: the take was counted among those waiting, and is not any more). The first
     * step counts n in the demand, admitted or not. A take is denied only when the server said
     * the window has none left: one whose tokens others spent first waits for the next answer,
     * however often (each grant spends the window, so the server says so within the limit's
     * count of answers).
     */
    Step step(long now, long n, int tries, boolean waited) {
        if (waited) {
            waiting -= n;
        }
        if (tries == 0) {
            taken += n;
        }
        if (take(now, n)) {
            return new Step(true, false, ask(now, waiting), false, 0);
        }
        if (denied(now)) {
            return new Step(false, true, 0, false, 0);
        }
        long want = ask(now, n + waiting);
        if (want > 0 || asking) {
            waiting += n;
            return new Step(false, false, want, true, 0);
        }
        return new Step(false, false, 0, false, pausedUntil);
    }

    /** A take that stopped waiting for the answer. */
    void gaveUp(long n) {
        waiting -= n;
    }

    /** A request that got no answer. */
    void failed() {
        asking = false;
    }

    /** What to settle at the end: each live block (what of it was used: its amount less left). */
    List<Block> unused(long now) {
        drop(now);
        List<Block> live = new ArrayList<>(blocks);
        blocks.clear();
        return live;
    }
}
