package io.github.redisratelimit.tests;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import redis.clients.jedis.Jedis;

/**
 * A real server for the tests: the binary REDIS_SERVER names (default redis-server) on a free
 * loopback port, with the module RATELIMIT_MODULE names, or without it; a cluster's node or not.
 * Stopped by close, or when the test JVM exits.
 */
final class Server implements AutoCloseable {
    final int port;
    private final Process process;
    private final Path dir;

    private Server(int port, Process process, Path dir) {
        this.port = port;
        this.process = process;
        this.dir = dir;
    }

    static String binary() {
        String b = System.getenv("REDIS_SERVER");
        return b == null || b.isEmpty() ? "redis-server" : b;
    }

    static Path module() {
        String m = System.getenv("RATELIMIT_MODULE");
        Path path = m == null || m.isEmpty() ? Path.of("../../../target/release/libredis_ratelimit.so") : Path.of(m);
        if (!Files.exists(path)) {
            throw new IllegalStateException("no module at " + path.toAbsolutePath() + ": set RATELIMIT_MODULE or cargo build --release");
        }
        return path.toAbsolutePath();
    }

    /** Starts a server; a port another process took first is tried again. */
    static Server start(boolean module, boolean cluster) {
        return start(binary(), module, cluster);
    }

    /** Starts a server of the binary given (the bench's, one after another). */
    static Server start(String binary, boolean module, boolean cluster) {
        IllegalStateException last = null;
        for (int attempt = 0; attempt < 5; attempt++) {
            try {
                return tryStart(binary, module, cluster);
            } catch (IllegalStateException e) {
                last = e;
            }
        }
        throw last;
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private static Server tryStart(String binary, boolean module, boolean cluster) {
        try {
            int port = freePort();
            Path dir = Files.createTempDirectory("ratelimit-java-server-");
            List<String> args = new ArrayList<>(List.of(binary, "--port", Integer.toString(port), "--bind", "127.0.0.1",
                    "--dir", dir.toString(), "--save", "", "--appendonly", "no"));
            if (module) {
                args.addAll(List.of("--loadmodule", module().toString()));
            }
            if (cluster) {
                args.addAll(List.of("--cluster-enabled", "yes", "--cluster-config-file", dir.resolve("nodes.conf").toString(),
                        "--cluster-announce-ip", "127.0.0.1"));
            }
            Process process = new ProcessBuilder(args).redirectErrorStream(true)
                    .redirectOutput(dir.resolve("server.log").toFile()).start();
            Server server = new Server(port, process, dir);
            Runtime.getRuntime().addShutdownHook(new Thread(server::close));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (System.nanoTime() < deadline) {
                if (!process.isAlive()) {
                    server.close();
                    throw new IllegalStateException(binary + " exited before it answered on " + port);
                }
                // Dialled by hand first: Jedis would throw for every refusal.
                try (Socket probe = new Socket()) {
                    probe.connect(new InetSocketAddress("127.0.0.1", port), 1000);
                } catch (IOException notYet) {
                    Thread.sleep(20);
                    continue;
                }
                try (Jedis jedis = server.jedis()) {
                    if (!jedis.info("server").contains("process_id:" + process.pid() + "\r")) {
                        server.close();
                        throw new IllegalStateException("another server answers on " + port);
                    }
                    return server;
                } catch (redis.clients.jedis.exceptions.JedisException loading) {
                    Thread.sleep(20);
                }
            }
            server.close();
            throw new IllegalStateException(binary + " did not answer on " + port);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** The server process's time on a CPU so far, in ns (from /proc: the bench's measure). */
    long cpuNanos() {
        try {
            return Long.parseLong(Files.readString(Path.of("/proc/" + process.pid() + "/schedstat")).split(" ")[0]);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A plain connection to this server alone. */
    Jedis jedis() {
        return new Jedis("127.0.0.1", port);
    }

    /** Forms a cluster of nodes started as cluster nodes: the slots split evenly among them. */
    static void formCluster(List<Server> nodes) throws InterruptedException {
        int per = 16384 / nodes.size();
        for (int i = 0; i < nodes.size(); i++) {
            try (Jedis j = nodes.get(i).jedis()) {
                int last = i == nodes.size() - 1 ? 16383 : (i + 1) * per - 1;
                // Distinct epochs up front: two nodes meeting at epoch 0 settle it between them first.
                j.sendCommand(redis.clients.jedis.Protocol.Command.CLUSTER, "SET-CONFIG-EPOCH", Integer.toString(i + 1));
                j.sendCommand(redis.clients.jedis.Protocol.Command.CLUSTER, "ADDSLOTSRANGE", Integer.toString(i * per),
                        Integer.toString(last));
                if (i > 0) {
                    j.clusterMeet("127.0.0.1", nodes.get(0).port);
                }
            }
        }
        for (Server node : nodes) {
            try (Jedis j = node.jedis()) {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (!(j.clusterInfo().contains("cluster_state:ok") && j.clusterNodes().lines()
                        .filter(l -> l.contains("master") && l.split(" ").length > 8).count() == nodes.size())) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("the cluster did not form on " + node.port);
                    }
                    Thread.sleep(50);
                }
            }
        }
    }

    @Override
    public void close() {
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException | UncheckedIOException gone) {
            // Removed already (close runs again at exit).
        }
    }
}
