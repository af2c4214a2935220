package io.github.redisratelimit.command;

import static io.github.redisratelimit.command.Checks.invalid;
import static io.github.redisratelimit.command.Checks.positive;
import static io.github.redisratelimit.command.Replies.integer;
import static io.github.redisratelimit.command.Replies.integers;
import static io.github.redisratelimit.command.Replies.list;
import static io.github.redisratelimit.command.Replies.ms;

import io.github.redisratelimit.Acquisition;
import io.github.redisratelimit.UnexpectedReplyException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * The leases' calls ({@code RATELIMIT.ACQUIRE}, {@code RELEASE}, {@code RENEW}): permits in flight.
 */
public final class LeaseCommands {
    private LeaseCommands() {
    }

    /** The longest lease id the server takes. */
    private static final int MAX_ID_BYTES = 256;
    private static final SecureRandom RANDOM = new SecureRandom();

    /**
     * A fresh lease id: 128 random bits in hex.
     *
     * @return the id
     */
    public static String newLeaseId() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    private static String leaseId(String id) {
        if (id == null || id.isEmpty() || id.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > MAX_ID_BYTES) {
            throw invalid("ID must be 1 to 256 bytes");
        }
        return id;
    }

    private static List<String> leaseArgs(Duration lease) {
        CommandParts.Length l = CommandParts.length(lease, "lease");
        return l.inMs() ? List.of(l.text(true), "MS") : List.of(l.text(false));
    }

    /**
     * {@code RATELIMIT.ACQUIRE}: one of at most {@code limit} permits in flight, a lease under
     * {@code id} ({@code null}: a new one); a retry with the same id is counted once.
     *
     * @param key the permits' key
     * @param limit the permits there are
     * @param lease how long the permit is held unless renewed
     * @param id the lease's id, or {@code null}
     * @return the call
     */
    public static Command<Acquisition> acquire(String key, long limit, Duration lease, String id) {
        positive(limit, "limit");
        String held = leaseId(id == null ? newLeaseId() : id);
        List<String> args = new ArrayList<>(List.of(Long.toString(limit)));
        args.addAll(leaseArgs(lease));
        args.add("ID");
        args.add(held);
        return new Command<>("RATELIMIT.ACQUIRE", "ratelimit_acquire", List.of(CommandParts.key(key)), args, false, reply -> {
            List<?> items = list(reply, "ACQUIRE");
            if (items.size() != 5) {
                throw new UnexpectedReplyException("ACQUIRE", reply);
            }
            long[] n = integers(items.subList(0, 4), 4, "ACQUIRE");
            return new Acquisition(n[0] == 1, n[1], n[2], ms(n[3]), CommandParts.token(items.get(4)));
        });
    }

    /**
     * {@code RATELIMIT.RELEASE}: the permit under {@code id} given back.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @return the call: false if the permit was not live
     */
    public static Command<Boolean> release(String key, String id) {
        List<String> args = List.of(leaseId(id));
        return new Command<>("RATELIMIT.RELEASE", "ratelimit_release", List.of(CommandParts.key(key)), args, false, reply -> {
            Long n = integer(reply);
            if (n == null) {
                throw new UnexpectedReplyException("RELEASE", reply);
            }
            return n == 1;
        });
    }

    /**
     * {@code RATELIMIT.RENEW}: the live lease under {@code id} extended to {@code lease} from now.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @param lease the lease from now
     * @return the call: the lease it now has, or zero when it was lost
     */
    public static Command<Duration> renew(String key, String id, Duration lease) {
        List<String> args = new ArrayList<>(List.of(leaseId(id)));
        args.addAll(leaseArgs(lease));
        return new Command<>("RATELIMIT.RENEW", "ratelimit_renew", List.of(CommandParts.key(key)), args, false, reply -> {
            Long n = integer(reply);
            if (n == null) {
                throw new UnexpectedReplyException("RENEW", reply);
            }
            return n < 0 ? Duration.ZERO : Duration.ofMillis(n);
        });
    }
}
