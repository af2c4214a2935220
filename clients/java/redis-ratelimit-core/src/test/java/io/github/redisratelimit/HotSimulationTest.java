package io.github.redisratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A deterministic simulation of a fleet's hot limit: the decisions of HotLimit (HotState's step
 * and granted, as take runs them) for each of 1,000 processes, with their clocks and transport
 * injected, against a model of the server's HIT PARTIAL RESERVE on one key (a window started by
 * its first grant, expiring at the first millisecond it counts, reset_ms as the module answers
 * it). The Go, Python and Node clients run the same scenarios on their own code. Each scenario
 * checks every window: admissions at most the limit, and each inside the window that granted
 * it; in steady windows with demand at least 1.2x the limit, at least 99% of the limit admitted;
 * with demand below 0.9x, at least 99.9% of requests admitted.
 */
class HotSimulationTest {
    private static final int CLIENTS = 1000;
    private static final long LIMIT = 100_000;
    private static final long MS = 1_000_000;
    private static final long WINDOW = 1000 * MS;
    private static final int WINDOWS = 4;
    // How far behind its primary the replica is.
    private static final long REPLICA_LAG = MS;
    private static final long PAUSE = 100 * MS;

    /**
     * A scenario: demand per window in limits; the most a round trip takes (uniform from 0);
     * each process's clock running at 1 + a rate within +-skew; a tenth of the processes dying at
     * {@code kill}; the server not answering for 100 ms from {@code pause}; the primary failing
     * at {@code promote} and its replica, 1 ms behind, taking over (grants answered once the
     * replica has them: WAIT 1). 0: never.
     */
    record Scenario(String name, double demand, long rtt, double skew, long kill, long pause, long promote) {
        @Override
        public String toString() {
            return name;
        }
    }

    static Stream<Scenario> scenarios() {
        return Stream.of(
                new Scenario("half the limit", 0.5, 2 * MS, 0, 0, 0, 0),
                new Scenario("0.85x, slow round trips, skewed clocks", 0.85, 5 * MS, 200e-6, 0, 0, 0),
                new Scenario("1.2x", 1.2, 2 * MS, 100e-6, 0, 0, 0),
                new Scenario("3x, slow round trips", 3, 5 * MS, 200e-6, 0, 0, 0),
                new Scenario("2x, a tenth killed mid-window", 2, 2 * MS, 0, WINDOW * 3 / 2, 0, 0),
                new Scenario("0.8x, the server paused 100 ms", 0.8, 2 * MS, 0, 0, WINDOW * 5 / 2, 0),
                new Scenario("1.5x, the server paused 100 ms", 1.5, 2 * MS, 0, 0, WINDOW * 5 / 2, 0),
                new Scenario("2x, a replica promoted (grants answered once replicated)", 2, 2 * MS, 0, 0, 0,
                        WINDOW * 2 + WINDOW / 5));
    }

    private enum Kind { DEMAND, RETRY, AT_SERVER, ANSWER }

    /** A take waiting: its tries, and whether it is counted among those waiting. */
    private static final class Take {
        int tries;
        boolean waited;
    }

    /** A grant made at {@code at}, for the promotion to take back if the replica lacked it. */
    private static final class Made {
        final long at;
        final int window;
        final long amount;
        boolean lost;

        Made(long at, int window, long amount) {
            this.at = at;
            this.window = window;
            this.amount = amount;
        }
    }

    private record Event(long at, long seq, Kind kind, int client, long want, long sent, Reservation grant,
            Made made, Take take) {
    }

    private static final class Process {
        HotState state;
        double rate;
        long offset;
        boolean dead;
        List<Take> waiting = new ArrayList<>();

        long local(long t) {
            return offset + (long) (t * rate);
        }

        /** The true instant when this process's clock reads local. */
        long trueAt(long local) {
            return (long) Math.ceil((local - offset) / rate);
        }
    }

    private static final class Window {
        final long start;
        final long end;
        long granted;
        long admitted;
        long requests;

        Window(long start, long end) {
            this.start = start;
            this.end = end;
        }
    }

    /** The module's HIT key limit window MS COST want PARTIAL RESERVE on one key. */
    private static final class Server {
        long count;
        int current = -1;
        final List<Window> windows = new ArrayList<>();

        Reservation reserve(long t, long want) {
            if (current >= 0 && t >= windows.get(current).end) {
                current = -1;
                count = 0;
            }
            long nowMs = t / MS * MS;
            long grant = Math.min(want, Math.max(0, LIMIT - count));
            if (grant > 0 && current < 0) {
                windows.add(new Window(t, nowMs + WINDOW));
                current = windows.size() - 1;
            }
            long reset = 0;
            if (current >= 0) {
                Window w = windows.get(current);
                w.granted += grant;
                reset = w.end - nowMs;
            }
            count += grant;
            Decision d = new Decision(grant > 0, count, LIMIT - count, LIMIT, Duration.ofNanos(reset), Duration.ZERO,
                    Duration.ofNanos(WINDOW));
            return new Reservation(d, "hot", String.valueOf(current), grant);
        }

        Window at(long t) {
            for (Window w : windows) {
                if (w.start <= t && t < w.end) {
                    return w;
                }
            }
            return null;
        }
    }

    private static final class Run {
        long admitted;
        long outside;
        long demanded;
        long deniedNone;
        long deniedTries;
        long calls;
        long lost;
        List<Window> windows;
    }

    private static Run simulate(Scenario sc, long seed) {
        SplittableRandom rng = new SplittableRandom(seed);
        Server server = new Server();
        PriorityQueue<Event> queue = new PriorityQueue<>(Comparator.comparingLong(Event::at).thenComparingLong(Event::seq));
        long[] seq = {0};
        long end = WINDOWS * WINDOW;
        double perClient = sc.demand() * LIMIT / CLIENTS / WINDOW; // a ns
        Process[] processes = new Process[CLIENTS];
        for (int i = 0; i < CLIENTS; i++) {
            Process p = new Process();
            p.rate = 1 + sc.skew() * (2 * rng.nextDouble() - 1);
            p.offset = rng.nextLong(3_600_000 * MS);
            p.state = new HotState(LIMIT, Duration.ofMillis(10), Duration.ofMillis(2), p.local(0));
            processes[i] = p;
            queue.add(new Event(exponential(rng, perClient), ++seq[0], Kind.DEMAND, i, 0, 0, null, null, null));
        }
        Run run = new Run();
        boolean killed = false;
        boolean promoted = false;
        long serverFree = 0;
        List<Made> grants = new ArrayList<>();
        while (!queue.isEmpty()) {
            Event e = queue.poll();
            long t = e.at();
            if (t > end) {
                break;
            }
            if (sc.kill() > 0 && t >= sc.kill() && !killed) {
                for (int i = 0; i < CLIENTS / 10; i++) {
                    processes[rng.nextInt(CLIENTS)].dead = true;
                }
                killed = true;
            }
            Process p = processes[e.client()];
            switch (e.kind()) {
                case DEMAND -> {
                    if (p.dead) {
                        continue;
                    }
                    run.demanded++;
                    Window w = server.at(t);
                    if (w != null) {
                        w.requests++;
                    }
                    queue.add(new Event(t + exponential(rng, perClient) + 1, ++seq[0], Kind.DEMAND, e.client(), 0, 0, null,
                            null, null));
                    step(sc, rng, server, queue, seq, run, e.client(), p, t, new Take());
                }
                case RETRY -> {
                    if (!p.dead) {
                        step(sc, rng, server, queue, seq, run, e.client(), p, t, e.take());
                    }
                }
                case AT_SERVER -> {
                    if (sc.pause() > 0 && t >= sc.pause() && t < sc.pause() + PAUSE) {
                        t = sc.pause() + PAUSE;
                    }
                    t = Math.max(t, serverFree);
                    serverFree = t;
                    if (sc.promote() > 0 && t >= sc.promote() && !promoted) {
                        // The replica has what the primary granted up to a lag before the failure.
                        for (Made g : grants) {
                            if (g.at > sc.promote() - REPLICA_LAG && !g.lost) {
                                g.lost = true;
                                if (g.window == server.current) {
                                    server.count -= g.amount;
                                    server.windows.get(g.window).granted -= g.amount;
                                }
                            }
                        }
                        promoted = true;
                    }
                    Reservation r = server.reserve(t, e.want());
                    Made made = new Made(t, server.current, r.amount());
                    grants.add(made);
                    long answer = t + leg(rng, sc) + (sc.promote() > 0 ? REPLICA_LAG : 0);
                    queue.add(new Event(answer, ++seq[0], Kind.ANSWER, e.client(), 0, e.sent(), r, made, null));
                }
                case ANSWER -> {
                    if (p.dead) {
                        continue;
                    }
                    Made made = e.made();
                    if (sc.promote() > 0 && made.at <= sc.promote() && made.at > sc.promote() - REPLICA_LAG) {
                        // The primary failed before the replica had it, so before answering it.
                        run.lost += made.amount;
                        p.state.failed();
                    } else {
                        p.state.granted(e.sent(), p.local(t), e.grant());
                    }
                    List<Take> waiting = p.waiting;
                    p.waiting = new ArrayList<>();
                    for (Take take : waiting) {
                        take.tries++;
                        step(sc, rng, server, queue, seq, run, e.client(), p, t, take);
                    }
                }
            }
        }
        run.windows = server.windows;
        return run;
    }

    /** One step of a take of 1 for process i at t: admit, deny, send, wait or sleep. */
    private static void step(Scenario sc, SplittableRandom rng, Server server, PriorityQueue<Event> queue, long[] seq,
            Run run, int i, Process p, long t, Take take) {
        HotState.Step step = p.state.step(p.local(t), 1, take.tries, take.waited);
        take.waited = step.await();
        if (step.send() > 0) {
            run.calls++;
            queue.add(new Event(t + leg(rng, sc), ++seq[0], Kind.AT_SERVER, i, step.send(), p.local(t), null, null, null));
        }
        if (step.admitted()) {
            run.admitted++;
            Window w = server.at(t);
            if (w != null) {
                w.admitted++;
            } else {
                run.outside++;
            }
        } else if (step.denied()) {
            if (p.state.denied(p.local(t))) {
                run.deniedNone++;
            } else {
                run.deniedTries++;
            }
        } else if (step.await()) {
            p.waiting.add(take);
        } else {
            long at = Math.max(t + 1, p.trueAt(step.sleepUntil()));
            queue.add(new Event(at, ++seq[0], Kind.RETRY, i, 0, 0, null, null, take));
        }
    }

    private static long leg(SplittableRandom rng, Scenario sc) {
        return rng.nextLong(sc.rtt() / 2 + 1);
    }

    private static long exponential(SplittableRandom rng, double perNs) {
        return (long) (-Math.log(1 - rng.nextDouble()) / perNs);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("scenarios")
    void neverOverAtMostOnePercentUnder(Scenario sc) {
        Run r = simulate(sc, scenarios().toList().indexOf(sc) + 1);
        assertEquals(0, r.outside, "admissions outside any window");
        long worstOver = Long.MIN_VALUE;
        long worstUnder = 0;
        int checked = 0;
        for (int n = 0; n < r.windows.size(); n++) {
            Window w = r.windows.get(n);
            worstOver = Math.max(worstOver, w.admitted - LIMIT);
            assertTrue(w.admitted <= LIMIT, "window " + n + ": " + w.admitted + " admitted, over the limit");
            boolean disturbed = sc.kill() > 0 && w.start <= sc.kill() && sc.kill() < w.end
                    || sc.pause() > 0 && w.start <= sc.pause() + PAUSE && sc.pause() < w.end
                    || sc.promote() > 0 && w.start <= sc.promote() && sc.promote() < w.end;
            boolean steady = n > 0 && w.end <= WINDOWS * WINDOW && !disturbed;
            if (steady && sc.demand() >= 1.2) {
                checked++;
                worstUnder = Math.max(worstUnder, LIMIT - w.admitted);
                assertTrue(w.admitted >= 0.99 * LIMIT, "window " + n + ": " + w.admitted + " admitted of " + LIMIT);
            }
        }
        // Takes still waiting when the run ends are neither admitted nor denied.
        double share = (double) r.admitted / (r.admitted + r.deniedNone + r.deniedTries);
        System.out.printf("%s: %d windows, worst over %d, worst steady under %d; %d of %d requests admitted (%.4f);"
                + " %d calls (1 per %.0f decisions); %d tokens lost in a failover%n", sc, r.windows.size(), worstOver,
                worstUnder, r.admitted, r.demanded, share, r.calls, (double) r.admitted / r.calls, r.lost);
        if (sc.promote() > 0) {
            assertTrue(r.lost > 0, "the promotion took back no grant: the scenario tests nothing");
        }
        if (sc.demand() >= 1.2) {
            assertTrue(checked > 0, "no steady window to check");
        }
        if (sc.demand() < 0.9) {
            assertTrue(share >= 0.999, sc.demand() + "x the limit: " + share + " of requests admitted");
        }
    }
}
