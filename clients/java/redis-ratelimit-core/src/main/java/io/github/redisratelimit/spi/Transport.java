package io.github.redisratelimit.spi;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;

/**
 * What an adapter gives the limiter: one Redis or Valkey client, standalone or a cluster. The
 * adapters (redis-ratelimit-lettuce, redis-ratelimit-jedis) implement it; an application does
 * not need to.
 */
public interface Transport {
    /**
     * Sends one command. In a cluster it goes to the primary of the slot of {@code args[keyPos]}
     * (any node for -1), with no redirect round trip where the client knows the slots.
     *
     * @param keyPos the position of the key that routes the call, or -1
     * @param args the command and its arguments
     * @return the reply as Long, String, null, List, Map or Boolean, nested as the server sent it;
     *     an error reply completes it with a {@link io.github.redisratelimit.ServerErrorException}
     */
    CompletionStage<Object> send(int keyPos, List<String> args);

    /**
     * Sends one write, then {@code WAIT replicas timeoutMs} on the connection that sent it (WAIT
     * counts that connection's writes), for a limiter waiting for replicas. The adapters'
     * transports can; this default fails with an
     * {@link io.github.redisratelimit.InvalidArgumentException}.
     *
     * @param keyPos the position of the key that routes the call
     * @param args the command and its arguments
     * @param replicas the replicas to wait for
     * @param timeoutMs the longest wait, in ms (at least 1)
     * @return the write's reply, as {@link #send} gives it, and WAIT's count of replicas
     */
    default CompletionStage<Waited> sendWaiting(int keyPos, List<String> args, int replicas, long timeoutMs) {
        return CompletableFuture.failedFuture(
                new io.github.redisratelimit.InvalidArgumentException("this transport cannot wait for replicas"));
    }

    /**
     * A write's reply, and how many replicas acknowledged it.
     *
     * @param reply the reply, as {@link #send} gives it
     * @param acknowledged the replicas that acknowledged the write in time
     */
    record Waited(Object reply, long acknowledged) {
    }

    /**
     * Runs {@code fn} with a transport for every primary (one server: itself), for the commands a
     * cluster needs on every node (FUNCTION LOAD); completes when all have.
     *
     * @param fn what to run on each primary
     * @return done when every primary's is
     */
    CompletionStage<Void> eachPrimary(Function<Transport, CompletionStage<Void>> fn);

    /**
     * Whether keys are spread over slots: a call's keys must then share one.
     *
     * @return true on a cluster
     */
    boolean cluster();
}
