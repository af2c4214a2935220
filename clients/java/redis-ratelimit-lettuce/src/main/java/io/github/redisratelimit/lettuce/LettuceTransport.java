package io.github.redisratelimit.lettuce;

import io.github.redisratelimit.ServerErrorException;
import io.github.redisratelimit.spi.Transport;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.BaseRedisAsyncCommands;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;

/**
 * The limiter's transport over one Lettuce connection. Each call is one {@code dispatch} with its
 * key marked as the key, so that a cluster connection sends it to the key's primary by the slots
 * it knows, with no MOVED round trip. Any codec: the calls carry their own.
 */
final class LettuceTransport implements Transport {
    private final BaseRedisAsyncCommands<String, String> commands;
    private final StatefulRedisClusterConnection<?, ?> cluster;

    private LettuceTransport(BaseRedisAsyncCommands<String, String> commands, StatefulRedisClusterConnection<?, ?> cluster) {
        this.commands = commands;
        this.cluster = cluster;
    }

    // Unchecked: dispatch encodes with the CommandArgs' codec and decodes with the output's, never
    // with the connection's, so a connection of any codec sends these String calls alike.
    @SuppressWarnings("unchecked")
    static LettuceTransport of(StatefulRedisConnection<?, ?> connection) {
        return new LettuceTransport((BaseRedisAsyncCommands<String, String>) connection.async(), null);
    }

    @SuppressWarnings("unchecked")
    static LettuceTransport of(StatefulRedisClusterConnection<?, ?> connection) {
        return new LettuceTransport((BaseRedisAsyncCommands<String, String>) connection.async(), connection);
    }

    /** A command's name, as Lettuce sends it. */
    private record Keyword(String command) implements ProtocolKeyword {
        @Override
        public byte[] getBytes() {
            return command.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public String toString() {
            return command;
        }
    }

    @Override
    public CompletionStage<Object> send(int keyPos, List<String> args) {
        CommandArgs<String, String> sent = new CommandArgs<>(StringCodec.UTF8);
        for (int i = 1; i < args.size(); i++) {
            if (i == keyPos) {
                sent.addKey(args.get(i));
            } else {
                sent.add(args.get(i));
            }
        }
        return commands.dispatch(new Keyword(args.get(0)), new ReplyOutput(), sent).toCompletableFuture()
                .handle((reply, e) -> {
                    if (e == null) {
                        return reply;
                    }
                    Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
                    if (cause instanceof RedisCommandExecutionException server) {
                        throw new ServerErrorException(server.getMessage(), server);
                    }
                    throw new CompletionException(cause);
                });
    }

    @Override
    public CompletionStage<Waited> sendWaiting(int keyPos, List<String> args, int replicas, long timeoutMs) {
        if (cluster != null) {
            // WAIT on the connection to the key's primary, which the write goes out on too.
            RedisClusterNode primary = cluster.getPartitions().getMasterBySlot(SlotHash.getSlot(args.get(keyPos)));
            if (primary == null) {
                return CompletableFuture.failedFuture(new CompletionException(
                        new IllegalStateException("no primary known for the key's slot")));
            }
            return cluster.getConnectionAsync(primary.getNodeId())
                    .thenCompose(node -> of(node).sendWaiting(keyPos, args, replicas, timeoutMs));
        }
        // Both dispatched at once on the one connection: the WAIT goes out right behind the write.
        CompletionStage<Object> written = send(keyPos, args);
        CompletionStage<Object> waited = send(-1, List.of("WAIT", Integer.toString(replicas), Long.toString(timeoutMs)));
        return written.thenCombine(waited, (reply, acknowledged) -> new Waited(reply, ((Number) acknowledged).longValue()));
    }

    @Override
    public CompletionStage<Void> eachPrimary(Function<Transport, CompletionStage<Void>> fn) {
        if (cluster == null) {
            return fn.apply(this);
        }
        List<CompletableFuture<Void>> each = new ArrayList<>();
        for (RedisClusterNode node : cluster.getPartitions()) {
            if (node.is(RedisClusterNode.NodeFlag.UPSTREAM)) {
                each.add(cluster.getConnectionAsync(node.getNodeId())
                        .thenCompose(c -> fn.apply(of(c)).toCompletableFuture()));
            }
        }
        return CompletableFuture.allOf(each.toArray(CompletableFuture[]::new));
    }

    @Override
    public boolean cluster() {
        return cluster != null;
    }
}
