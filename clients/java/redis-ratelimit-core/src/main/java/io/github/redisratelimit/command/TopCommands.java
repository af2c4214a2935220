package io.github.redisratelimit.command;

import static io.github.redisratelimit.command.Checks.positive;
import static io.github.redisratelimit.command.Replies.integer;
import static io.github.redisratelimit.command.Replies.list;

import io.github.redisratelimit.TopEntry;
import io.github.redisratelimit.TopOptions;
import io.github.redisratelimit.UnexpectedReplyException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * {@code RATELIMIT.TOP}: who is being limited.
 */
public final class TopCommands {
    private TopCommands() {
    }

    /**
     * {@code RATELIMIT.TOP} (the module only): the keys this node denied most (or admitted the most
     * cost for, or would have denied in shadow mode) lately, each with its error bound.
     *
     * @param o the options
     * @return the call
     */
    public static Command<List<TopEntry>> top(TopOptions o) {
        Objects.requireNonNull(o, "options");
        List<String> args = new ArrayList<>();
        args.add((o.view() == null ? TopOptions.View.DENIED : o.view()).name());
        if (o.count() != 0) {
            positive(o.count(), "COUNT");
            args.add("COUNT");
            args.add(Long.toString(o.count()));
        }
        if (o.reset()) {
            args.add("RESET");
        }
        return new Command<>("RATELIMIT.TOP", null, List.of(), args, false, reply -> {
            List<TopEntry> entries = new ArrayList<>();
            for (Object row : list(reply, "TOP")) {
                Map<String, Object> f = Replies.fields(row);
                Long count = integer(f.get("count"));
                Long error = integer(f.get("error"));
                if (!(f.get("key") instanceof String key) || count == null || error == null) {
                    throw new UnexpectedReplyException("TOP", reply);
                }
                entries.add(new TopEntry(key, count, error));
            }
            return entries;
        });
    }
}
