package io.github.redisratelimit.command;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * One call, built and its arguments checked but not sent: its form for the module and for the
 * Functions library, and how its reply reads. The builders of each command family
 * ({@link WindowCommands}, {@link GcraCommands}, {@link SettleCommands}, {@link LeaseCommands},
 * {@link TopCommands}) make them; the limiter sends them.
 *
 * @param <T> what the reply reads as
 * @param command the module's command ({@code RATELIMIT.HIT}, ...)
 * @param function the library's function, or {@code null} for the module's own commands (TOP)
 * @param keys the keys, in order
 * @param args the arguments after the keys
 * @param numkeys whether the module's form names its keys' count first (HITALL)
 * @param reader reads the reply (as {@link io.github.redisratelimit.spi.Transport} gives it)
 */
public record Command<T>(String command, String function, List<String> keys, List<String> args, boolean numkeys,
        Function<Object, T> reader) {
    /**
     * The call, its lists kept as given.
     *
     * @param command the module's command
     * @param function the library's function
     * @param keys the keys
     * @param args the arguments
     * @param numkeys whether the key count comes first
     * @param reader reads the reply
     */
    public Command {
        keys = List.copyOf(keys);
        args = List.copyOf(args);
    }

    /**
     * Whether the call writes: all but PEEK, TOP and SLIDE's PEEK. A limiter waiting for replicas
     * waits behind those that do.
     *
     * @return true if it writes
     */
    public boolean writes() {
        return !command.equals("RATELIMIT.PEEK") && !command.equals("RATELIMIT.TOP")
                && !(command.equals("RATELIMIT.SLIDE") && args.contains("PEEK"));
    }

    /**
     * The call as the module takes it.
     *
     * @return the command and its arguments
     */
    public List<String> moduleArgs() {
        List<String> all = new ArrayList<>();
        all.add(command);
        if (numkeys) {
            all.add(Integer.toString(keys.size()));
        }
        all.addAll(keys);
        all.addAll(args);
        return all;
    }

    /**
     * The position of the first key in {@link #moduleArgs()}, or -1 when there is none.
     *
     * @return the position
     */
    public int moduleKeyPosition() {
        return keys.isEmpty() ? -1 : numkeys ? 2 : 1;
    }

    /**
     * The call as {@code FCALL} to the library.
     *
     * @return {@code FCALL}, the function, the key count, the keys and the arguments
     */
    public List<String> libraryArgs() {
        List<String> all = new ArrayList<>();
        all.add("FCALL");
        all.add(function);
        all.add(Integer.toString(keys.size()));
        all.addAll(keys);
        all.addAll(args);
        return all;
    }

    /**
     * The position of the first key in {@link #libraryArgs()}, or -1 when there is none.
     *
     * @return the position
     */
    public int libraryKeyPosition() {
        return keys.isEmpty() ? -1 : 3;
    }

    /**
     * Reads the call's reply.
     *
     * @param reply the reply
     * @return what it says
     * @throws io.github.redisratelimit.UnexpectedReplyException a reply of another shape
     */
    public T read(Object reply) {
        return reader.apply(reply);
    }
}
