package io.github.redisratelimit.jedis;

import io.github.redisratelimit.InvalidArgumentException;
import io.github.redisratelimit.ServerErrorException;
import io.github.redisratelimit.spi.Transport;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPool;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * The limiter's transport over Jedis: a {@code UnifiedJedis} ({@code JedisPooled},
 * {@code JedisCluster}, ...), or one node's {@code Connection}. Jedis blocks: each call is made in
 * the caller's thread and answered by a completed future. In a cluster the call's key routes it
 * to its slot's primary by the slots Jedis knows.
 */
final class JedisTransport implements Transport {
    private final UnifiedJedis jedis;
    private final Connection node;

    private JedisTransport(UnifiedJedis jedis, Connection node) {
        this.jedis = jedis;
        this.node = node;
    }

    static JedisTransport of(UnifiedJedis jedis) {
        return new JedisTransport(jedis, null);
    }

    /** A command's name, as Jedis sends it. */
    private record Name(byte[] raw) implements ProtocolCommand {
        @Override
        public byte[] getRaw() {
            return raw;
        }
    }

    @Override
    public CompletionStage<Object> send(int keyPos, List<String> args) {
        try {
            Name name = new Name(args.get(0).getBytes(StandardCharsets.UTF_8));
            byte[][] rest = new byte[args.size() - 1][];
            for (int i = 1; i < args.size(); i++) {
                rest[i - 1] = args.get(i).getBytes(StandardCharsets.UTF_8);
            }
            Object raw;
            if (node != null) {
                raw = node.executeCommand(new CommandArguments(name).addObjects((Object[]) rest));
            } else if (keyPos > 0) {
                // The sample key routes the call in a cluster (sendCommand builds the arguments
                // the cluster's executor expects).
                raw = jedis.sendCommand(rest[keyPos - 1], name, rest);
            } else {
                raw = jedis.sendCommand(name, rest);
            }
            return CompletableFuture.completedFuture(reply(raw));
        } catch (JedisDataException e) {
            return CompletableFuture.failedFuture(new ServerErrorException(e.getMessage(), e));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** A reply as the core reads it: bulk strings as text, RESP3 maps as names and values in a row. */
    private static Object reply(Object raw) {
        if (raw instanceof byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
        if (raw instanceof List<?> items) {
            List<Object> out = new ArrayList<>(items.size());
            for (Object item : items) {
                if (item instanceof Map.Entry<?, ?> pair) {
                    out.add(reply(pair.getKey()));
                    out.add(reply(pair.getValue()));
                } else {
                    out.add(reply(item));
                }
            }
            return out;
        }
        if (raw instanceof Map<?, ?> map) {
            List<Object> out = new ArrayList<>(map.size() * 2);
            map.forEach((k, v) -> {
                out.add(reply(k));
                out.add(reply(v));
            });
            return out;
        }
        return raw;
    }

    @Override
    public CompletionStage<Waited> sendWaiting(int keyPos, List<String> args, int replicas, long timeoutMs) {
        if (node != null) {
            // The write, then WAIT, on this one connection.
            CompletableFuture<Object> written = send(keyPos, args).toCompletableFuture();
            CompletableFuture<Object> waited =
                    send(-1, List.of("WAIT", Integer.toString(replicas), Long.toString(timeoutMs))).toCompletableFuture();
            return written.thenCombine(waited, (reply, acknowledged) -> new Waited(reply, ((Number) acknowledged).longValue()));
        }
        Connection connection;
        try {
            if (jedis instanceof JedisCluster cluster) {
                connection = cluster.getConnectionFromSlot(JedisClusterCRC16.getSlot(args.get(keyPos)));
            } else if (jedis instanceof JedisPooled pooled) {
                connection = pooled.getPool().getResource();
            } else {
                return CompletableFuture.failedFuture(new InvalidArgumentException(
                        "waiting for replicas needs a JedisPooled or a JedisCluster (a connection of its pool to write and WAIT on)"));
            }
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        try (Connection c = connection) {
            return new JedisTransport(null, c).sendWaiting(keyPos, args, replicas, timeoutMs);
        }
    }

    @Override
    public CompletionStage<Void> eachPrimary(Function<Transport, CompletionStage<Void>> fn) {
        if (!(jedis instanceof JedisCluster cluster)) {
            return fn.apply(this);
        }
        try {
            for (ConnectionPool pool : cluster.getClusterNodes().values()) {
                try (Connection c = pool.getResource()) {
                    JedisTransport node = new JedisTransport(null, c);
                    Object role = node.send(-1, List.of("ROLE")).toCompletableFuture().join();
                    if (role instanceof List<?> r && !r.isEmpty() && "master".equals(r.get(0))) {
                        fn.apply(node).toCompletableFuture().join();
                    }
                }
            }
            return CompletableFuture.completedFuture(null);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public boolean cluster() {
        return jedis instanceof JedisCluster;
    }
}
