#!lua name=ratelimit

-- The module's commands as a Redis Functions library, for servers where no module can
-- be loaded (managed Redis and Valkey): the same arguments, replies, error texts and stored values
-- as RATELIMIT.HIT, RATELIMIT.PEEK, RATELIMIT.SLIDE, RATELIMIT.HITALL and RATELIMIT.GCRA, proven by
-- tests/functions.rs.
--
--   FCALL ratelimit_hit 1 key limit window [COST cost] [MS] [PARTIAL] [RESERVE] [ALIGN] [TZ zone]
--   FCALL_RO ratelimit_peek 1 key limit [COST cost]
--   FCALL ratelimit_slide 1 key limit window [COST cost] [MS] [PARTIAL] [PEEK | RESERVE]
--   FCALL ratelimit_hitall numkeys key [key ...] limit window [limit window ...] [COST cost] [MS] [SLIDE | ALIGN]
--         [TZ zone] [TOKENS tokens numtokenkeys] [RESERVE]
--   FCALL ratelimit_acquire 1 key limit lease [MS] ID id   (the module makes an id when none is given)
--   FCALL ratelimit_release 1 key id
--   FCALL ratelimit_renew 1 key id lease [MS]
--   FCALL ratelimit_gcra 1 key max_burst tokens_per_period period [TOKENS count] [PARTIAL] [RESERVE] [ALIGN]
--   FCALL ratelimit_settle numkeys key [key ...] reservation used   (a HITALL's token keys)
--   FCALL ratelimit_adapt 1 key floor start ceiling window [COST cost] [MS] [PARTIAL] [RESERVE] [TURN]
--   FCALL ratelimit_report 1 key OK|THROTTLED [RETRY ms] [LIMIT limit] [REMAINING remaining RESET ms] [AGE ms]
--
-- Calendar windows take UTC and fixed offsets here; named time zones are the module's (NAMED_ZONE).
--
-- Lua numbers are doubles, exact only up to 2^53: arguments are validated on their text as the
-- module validates them, and a valid value the library cannot compute exactly gets one error of its
-- own (BEYOND) instead of a wrong number.

-- Globals are read through the Functions sandbox at every use (some 180 instructions each, more
-- than most lines here cost): those used on every call are bound to locals the first time a
-- function runs (they do not exist while the library loads). `globals` is defined before the
-- locals that take its answers, so that its names are the globals.
local function globals()
    return redis.call, redis.pcall, string.find, string.match, string.format, string.upper, math.floor, math.ceil,
        math.max, tonumber, type, math.min, string.sub, table.concat
end
local redis_call, redis_pcall, find, match, format, upper, floor, ceil, max, tonumber, type, min, sub, concat

local INF = 1 / 0
local EXACT = 2 ^ 53 - 1
-- Numbers given to redis.call on the hot paths go as '%d' text: a Lua number would be formatted
-- as a float (%.17g), several times slower.
local MAX_WINDOW_MS = '4611686018427387903' -- i64::MAX / 2, the module's bound
local BEYOND = 'ERR ratelimit library: a number above 2^53 cannot be computed exactly here; use the module'
local ALIGN_WHOLE_US = 'ERR ratelimit library: ALIGN needs a period of whole microseconds here; use the module'
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local NOT_INTEGER = 'ERR value is not an integer or out of range'
local NOT_SLIDE = 'ERR value is not a ratelimit sliding window'
local UNKNOWN_ZONE = 'ERR TZ must be UTC, an offset such as +05:30, or a time zone name such as Europe/Paris'
local NAMED_ZONE =
    'ERR ratelimit library: TZ takes UTC or an offset such as +05:30 here; named time zones need the module'

-- Stands for a valid integer beyond EXACT: the module accepts it, the library cannot compute it.
local BIG = {}
-- And a valid integer below -EXACT: minus infinity (named once: `-INF` would negate on every use).
local BIG_NEGATIVE = -INF

-- Errors meant for the caller are raised as the server's own error, { err = text }, sealed: the
-- server's error handler adds the function's name and line to an error table by assigning its
-- `source` and `line`, which the seal drops, so the caller gets the text alone, as the module
-- answers it (tests/functions.rs compares them on every server). A pcall around every call
-- would do the same for some 550 instructions a call. A failed redis.call's error goes on as the
-- server made it.
local SEALED = { __newindex = function() end }
local function fail(text)
    error(setmetatable({ err = text }, SEALED))
end

-- `value`, or the caller's error `text` when the check before failed.
local function must(value, text)
    if value == nil then
        fail(text)
    end
    return value
end

-- A registered function's body, the globals bound before its first call.
local function command(body)
    return function(keys, args)
        if not redis_call then
            redis_call, redis_pcall, find, match, format, upper, floor, ceil, max, tonumber, type, min, sub, concat =
                globals()
        end
        return body(keys, args)
    end
end

-- A decimal integer as Redis reads one (string2ll: '-', digits, no '+', no leading zero, 64-bit):
-- its value, BIG beyond EXACT (BIG_NEGATIVE below -EXACT), or nil.
local function integer(text)
    -- Up to 15 characters every such integer is exact: one match, one conversion.
    if #text < 16 and find(text, '^%-?[1-9]%d*$') then
        return tonumber(text)
    end
    if text == '0' then
        return 0
    end
    local sign, digits = match(text, '^(%-?)([1-9]%d*)$')
    if not digits or #digits > 19 then
        return nil
    end
    if #digits == 19 and digits > (sign == '-' and '9223372036854775808' or '9223372036854775807') then
        return nil
    end
    local value = tonumber(text)
    if math.abs(value) > EXACT then
        return sign == '-' and BIG_NEGATIVE or BIG
    end
    return value
end

-- `parse` for arguments, which repeat (a service sends the same few limits, windows and costs):
-- what it answered for a text is kept, so that the next call costs a table lookup instead of
-- pattern matches and a conversion. Only answers are kept (a text `parse` refuses is parsed again,
-- to raise its error), only for texts up to `longest` bytes (32 unless given; numbers always), and
-- past 1024 texts it starts afresh. Returns the table of answers (a hot path may look a text up in
-- it first: one index, no call) and the function that fills it.
local function remembered(parse, longest)
    longest = longest or 32
    local known, count = {}, 0
    return known, function(text)
        local value = known[text]
        if value == nil then
            value = parse(text)
            if value ~= nil and (type(text) == 'number' or #text <= longest) then
                if count == 1024 then
                    -- Emptied in place: the hot paths hold this table.
                    for old in pairs(known) do
                        known[old] = nil
                    end
                    count = 0
                end
                known[text], count = value, count + 1
            end
        end
        return value
    end
end

-- `integer` for an argument or a stored counter (counts repeat as much: 1, 2, 3...).
local known_integer, argument = remembered(integer)

-- An integer >= 1 (BIG allowed), or nil.
local known_positive, positive_value = remembered(function(text)
    local value = integer(text)
    if value ~= nil and (value == BIG or value >= 1) then
        return value
    end
end)

-- An integer >= 1 (BIG allowed); else the module's error for `name`.
local function positive(text, name)
    local value = positive_value(text)
    if value == nil then
        fail('ERR ' .. name .. ' must be an integer >= 1')
    end
    return value
end

-- COST from the options: 1 by default, else an integer >= 1 (BIG allowed).
local function cost_of(opts)
    return opts.COST and positive(opts.COST, 'COST') or 1
end

-- HIT's and SLIDE's COST: 1 by default, else an integer other than 0 (negative ones give back;
-- BIG and BIG_NEGATIVE allowed).
local function signed_cost_of(opts)
    if not opts.COST then
        return 1
    end
    local cost = argument(opts.COST)
    if cost == nil or cost == 0 then
        fail('ERR COST must be a nonzero integer')
    end
    return cost
end

-- RESERVE's rule: the amount reserved is at least 1.
local function check_reserve(opts, amount, name)
    if opts.RESERVE and amount ~= BIG and amount < 1 then
        fail('ERR RESERVE needs ' .. name .. ' >= 1')
    end
end

-- PARTIAL's rule: the amount asked is at least 1.
local function check_partial(opts, amount, name)
    if opts.PARTIAL and amount ~= BIG and amount < 1 then
        fail('ERR PARTIAL needs ' .. name .. ' >= 1')
    end
end

-- A key's name in a reservation (the module's reservation::key_tag): FNV-1a, 32 bits, in hex;
-- each product stays below 2^53 (the prime is 2^24 + 403).
local function key_tag(key)
    local bxor, byte = bit.bxor, string.byte
    local h = 2166136261
    for i = 1, #key do
        h = bxor(h, byte(key, i)) % 4294967296
        h = ((h % 256) * 16777216 + h * 403) % 4294967296
    end
    return format('%08x', h)
end

-- A reservation's id (the module's reservation::id): 16 hex digits, unique among one key's
-- reservations while they count: the server's time in µs, and 12 random bits for calls in the
-- same µs.
local function reservation_id()
    local t = redis_call('TIME')
    return format('%08x%05x%03x', tonumber(t[1]) % 4294967296, tonumber(t[2]), math.random(0, 4095))
end

-- A reservation's last field: the key's tag, then the reservation's id (a new one unless given).
local function reservation_key(key, id)
    return key_tag(key) .. (id or reservation_id())
end

-- The options after the positional arguments, as the module reads them: names in any case, in any
-- order, each at most once; `valued` ones take the next argument.
local NO_OPTIONS = {}

local function options(args, from, spec, known)
    if from > #args then
        return NO_OPTIONS
    end
    local found = {}
    local i = from
    while i <= #args do
        local word = upper(args[i])
        local opt
        for k = 1, #spec do
            if word == spec[k].name then
                opt = spec[k]
            end
        end
        if not opt then
            fail('ERR syntax error: unknown option (expected ' .. known .. ')')
        end
        if found[opt.name] ~= nil then
            fail('ERR syntax error: ' .. opt.name .. ' given more than once')
        end
        if opt.valued then
            -- A two-valued option's second value is found under its name and '2'.
            for v = 1, opt.valued == 2 and 2 or 1 do
                i = i + 1
                if i > #args then
                    fail(opt.missing or ('ERR syntax error: ' .. opt.name .. ' needs a value'))
                end
                found[v == 1 and opt.name or opt.name .. '2'] = args[i]
            end
        else
            found[opt.name] = true
        end
        i = i + 1
    end
    return found
end

-- A length of time in ms from its text (in seconds unless `in_ms`), as the module bounds it (2^62
-- ms); BIG where the module accepts one the library cannot add to the clock exactly. Else nil and
-- what is wrong with it.
local function duration(text, in_ms)
    local value = positive_value(text)
    if value == nil then
        return nil, 'must be an integer >= 1'
    end
    if value == BIG then
        -- Beyond 2^53 seconds is beyond 2^62 ms; in ms compare the text with the bound.
        if not in_ms or #text > #MAX_WINDOW_MS or (#text == #MAX_WINDOW_MS and text > MAX_WINDOW_MS) then
            return nil, 'is too large'
        end
        return BIG
    end
    if not in_ms then
        if value > 4611686018427387 then
            return nil, 'is too large'
        end
        value = value * 1000
    end
    return value > EXACT and BIG or value
end

local known_seconds, seconds_ms = remembered(function(text)
    return (duration(text, false))
end)
local _, ms_ms = remembered(function(text)
    return (duration(text, true))
end)

-- A length of time `name` in ms from its text, or the module's error for it.
local function duration_ms(text, in_ms, name)
    local value = (in_ms and ms_ms or seconds_ms)(text)
    if value == nil then
        local _, wrong = duration(text, in_ms)
        fail('ERR ' .. name .. ' ' .. wrong)
    end
    return value
end

local function window_ms(text, in_ms)
    return duration_ms(text, in_ms, 'window')
end

-- Windows laid on the clock (the module's core/calendar.rs): ALIGNed to multiples of their length
-- since the epoch, or calendar windows, whose arithmetic is on day numbers (days since 1970-01-01).

local UNITS = { DAY = 'day', WEEK = 'week', MONTH = 'month', YEAR = 'year' }
local DAY_MS = 86400000

-- A fixed window's argument: its calendar unit's name (not with MS), else its length in ms.
local function fixed_window(text, in_ms)
    local unit = UNITS[upper(text)]
    if not unit then
        return window_ms(text, in_ms)
    end
    if in_ms then
        fail('ERR syntax error: MS and a calendar window cannot be given together')
    end
    return unit
end

-- TZ's offset east of UTC in ms (0 when not given); TZ needs a calendar window among the call's.
local function zone_offset(text, calendar)
    if text == nil then
        return 0
    end
    if not calendar then
        fail('ERR TZ needs a calendar window (day, week, month or year)')
    end
    if upper(text) == 'UTC' then
        return 0
    end
    local sign, h, m = match(text, '^([+-])(%d%d):(%d%d)$')
    if not sign then
        fail(NAMED_ZONE)
    end
    h, m = tonumber(h), tonumber(m)
    if h > 23 or m > 59 then
        fail(UNKNOWN_ZONE)
    end
    return (sign == '-' and -60000 or 60000) * (h * 60 + m)
end

-- Days since 1970-01-01 of a proleptic Gregorian date, and back (Howard Hinnant's algorithms).
local function days_from_civil(y, m, d)
    if m <= 2 then
        y = y - 1
    end
    local era = floor(y / 400)
    local yoe = y - era * 400
    local doy = floor((153 * ((m + 9) % 12) + 2) / 5) + d - 1
    return era * 146097 + yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy - 719468
end

local function civil_from_days(z)
    z = z + 719468
    local era = floor(z / 146097)
    local doe = z - era * 146097
    local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
    local mp = floor((5 * doy + 2) / 153)
    local m = mp < 10 and mp + 3 or mp - 9
    return yoe + era * 400 + (m <= 2 and 1 or 0), m
end

-- The first day of the calendar window after the one `day` falls in.
local function next_start(day, unit)
    if unit == 'day' then
        return day + 1
    elseif unit == 'week' then
        -- 1970-01-01 was a Thursday: (day + 3) mod 7 days since Monday.
        return day - (day + 3) % 7 + 7
    end
    local y, m = civil_from_days(day)
    if unit == 'year' or m == 12 then
        return days_from_civil(y + 1, 1, 1)
    end
    return days_from_civil(y, m + 1, 1)
end

-- The ms from `now` to the end of the window running then: a window's length or unit, ALIGNed or
-- a calendar one in the zone `offset` ms east of UTC (BIG stays BIG).
local function window_left(window, align, offset, now)
    if type(window) == 'string' then
        return next_start(floor((now + offset) / DAY_MS), window) * DAY_MS - offset - now
    elseif align and window ~= BIG then
        return window - now % window
    end
    return window
end

-- An integer as '%d' text, for redis.call (a number would go as '%.17g', slower still): one
-- format costs more than a whole call's arithmetic, and the numbers written repeat (windows,
-- window starts, counts, times within a millisecond). Each text is also kept back to its number:
-- a lease's score the server answers later ('%.17g' of an integer: the same digits) is a lookup.
local known_decimal, decimal
known_decimal, decimal = remembered(function(n)
    local text = format('%d', n)
    known_decimal[text] = n
    return text
end)

-- The server's clock in ms. Its seconds repeat for a second: a lookup once seen.
local function now_ms()
    local t = redis_call('TIME')
    local us = tonumber(t[2])
    return (known_integer[t[1]] or argument(t[1])) * 1000 + (us - us % 1000) / 1000
end

-- A redis.pcall's error reply raised again: WRONGTYPE as the module words it; any other (the
-- caller's ACL user may not run the command: NOPERM) as the server gave it.
local function raise(reply)
    fail(find(reply.err, '^WRONGTYPE') and WRONGTYPE or reply.err)
end

-- A GET's reply (by redis.pcall) as the string, nil if missing; WRONGTYPE for any other kind of key.
local function string_of(value)
    if type(value) == 'table' and value.err then
        raise(value)
    end
    return value
end

-- The string at `key`, nil if missing; WRONGTYPE for any other kind of key.
local function get(key)
    return string_of(redis_pcall('GET', key))
end

-- The counter at `key`: count (0 if missing) and PTTL (-1 without TTL; nil if missing). Relative
-- times are enough: a write sets `window` from now (PX, PEXPIRE), and Redis (7.0 on) gives
-- replicas and the AOF the absolute time.
local function read(key)
    local value = redis_pcall('GET', key)
    if not value then
        return 0, nil
    end
    -- A count seen before: one lookup (an error reply, a table, finds nothing).
    local count = known_integer[value]
    if count == nil then
        count = must(argument(string_of(value)), NOT_INTEGER)
    end
    if count == BIG or count == BIG_NEGATIVE then
        fail(BEYOND)
    end
    return count, redis_call('PTTL', key)
end

-- A new window's expiry: `window` ms from now (PX), or for a window laid on the clock its end `at`
-- (PXAT): on Redis 7.0 a script's relative expiry counts from when it is written, a ms after the
-- TIME the end was computed from, maybe.
local function expiry(window, at)
    if at then
        return 'PXAT', format('%d', at)
    end
    return 'PX', format('%d', window)
end

-- The module's `settle`: one counter's outcome and writes for a hit admitted (`admit`) or not; `at`
-- the end of a window laid on the clock (nil for one from now).
local function settle(key, limit, window, cost, count, ttl, admit, at)
    local admitted = admit and count + cost <= limit
    -- The usual outcome first, as early as it is known: admitted in a running window.
    if admitted and ttl and ttl >= 0 then
        redis_call('INCRBY', key, cost == 1 and '1' or format('%d', cost))
        return true, count + cost, limit - count - cost, ttl
    end
    local final = admitted and count + cost or count
    -- Admitted here, the counter is new or has no TTL: set with its window.
    local heal = ttl == -1 or admitted
    if admitted then
        redis_call('SET', key, format('%d', final), expiry(window, at))
    elseif heal then
        redis_call(at and 'PEXPIREAT' or 'PEXPIRE', key, format('%d', at or window))
    end
    local reset = heal and window or ttl or 0
    return admitted, final, max(limit - final, 0), reset
end

local HIT_OPTIONS = {
    { name = 'COST', valued = true },
    { name = 'MS' },
    { name = 'PARTIAL' },
    { name = 'RESERVE' },
    { name = 'ALIGN' },
    { name = 'TZ', valued = true },
}
local SLIDE_OPTIONS = {
    { name = 'COST', valued = true }, { name = 'MS' }, { name = 'PARTIAL' }, { name = 'PEEK' }, { name = 'RESERVE' },
}

-- `limit window` and the options of `spec` after them, as the module reads them.
local function limit_args(args, command, spec, known)
    if #args < 2 then
        fail("ERR wrong number of arguments for '" .. command .. "' command")
    end
    local limit = positive(args[1], 'limit')
    local opts = options(args, 3, spec, known)
    return limit, window_ms(args[2], opts.MS), signed_cost_of(opts), opts
end

-- HIT's give-back of `cost` < 0 (BIG_NEGATIVE: all of it) on a counter read as `count, ttl`: the
-- count down (not below 0; a count at or below 0 stays), the window's expiry kept, or healed.
-- The count and TTL left.
local function hit_give_back(key, window, count, ttl, cost, at)
    if not ttl then
        return 0, 0
    end
    local final = count
    if count > 0 then
        final = max(count + cost, 0)
    end
    if ttl == -1 then
        redis_call('SET', key, format('%d', final), expiry(window, at))
        return final, window
    end
    if final ~= count then
        redis_call('INCRBY', key, format('%d', final - count))
    end
    return final, ttl
end

-- How a reservation (the module's core/reservation.rs) names a calendar unit, and back.
local UNIT_CODES = { day = 0, week = 1, month = 2, year = 3 }
local UNIT_OF_CODE = { [0] = 'day', 'week', 'month', 'year' }

-- A zone as TZ takes it back (the module's Zone::text), after ':': nothing for UTC, else +HH:MM.
local function zone_text(offset)
    if offset == 0 then
        return ''
    end
    local minutes = math.abs(offset) / 60000
    return format(':%s%02d:%02d', offset < 0 and '-' or '+', floor(minutes / 60), minutes % 60)
end

-- HIT's reservation of `cost` on `key`, for its window as the call laid it (`laid`: a length or
-- a unit): rolling (h), ALIGNed (a) or a calendar one in the zone `offset` ms east of UTC (c).
local function hit_reservation(key, limit, laid, align, offset, cost, id)
    local window_end, tag = redis_call('PEXPIRETIME', key), reservation_key(key, id)
    if type(laid) == 'string' then
        return format('c:%d:%d:%d:%d:%s%s', limit, UNIT_CODES[laid], window_end, cost, tag, zone_text(offset))
    end
    return format('%s:%d:%d:%d:%d:%s', align and 'a' or 'h', limit, laid, window_end, cost, tag)
end

-- HIT's arguments after `limit window` in their module's order: the window (a length or a unit),
-- the zone, the cost, then PARTIAL's and RESERVE's rules.
local function hit_args(args)
    if #args < 2 then
        fail("ERR wrong number of arguments for 'ratelimit.hit' command")
    end
    local limit = positive(args[1], 'limit')
    local opts = options(args, 3, HIT_OPTIONS, 'COST, MS, PARTIAL, RESERVE, ALIGN or TZ')
    local window = fixed_window(args[2], opts.MS)
    local calendar = type(window) == 'string'
    local offset = zone_offset(opts.TZ, calendar)
    local cost = signed_cost_of(opts)
    check_partial(opts, cost, 'COST')
    check_reserve(opts, cost, 'COST')
    return limit, window, cost, opts, offset
end

local function hit(keys, args)
    -- The usual call, `limit window` seen before: two lookups.
    local limit, window, cost, opts, offset = known_positive[args[1]], known_seconds[args[2]], 1, NO_OPTIONS, 0
    if not (limit and window and #args == 2) then
        limit, window, cost, opts, offset = hit_args(args)
    end
    local count, ttl = read(keys[1])
    if limit == BIG or cost == BIG or window == BIG then
        fail(BEYOND)
    end
    local at, laid = nil, window
    if opts.ALIGN or type(window) == 'string' then
        local now = now_ms()
        window = window_left(window, opts.ALIGN, offset, now)
        at = now + window
    end
    if cost < 0 then
        local final, reset = hit_give_back(keys[1], window, count, ttl, cost, at)
        return { 1, final, max(limit - final, 0), reset }
    end
    if opts.PARTIAL then
        -- The module's decide_partial: what the window has left of the cost, at least one.
        local granted = count + cost <= limit and cost or max(limit - count, 0)
        local admitted, final, remaining, reset = settle(keys[1], limit, window, max(granted, 1), count, ttl,
            granted > 0, at)
        local reply = { admitted and 1 or 0, final, remaining, reset, granted }
        if opts.RESERVE then
            reply[6] = admitted and hit_reservation(keys[1], limit, laid, opts.ALIGN, offset, granted)
        end
        return reply
    end
    if opts.RESERVE then
        local admitted, final, remaining, reset = settle(keys[1], limit, window, cost, count, ttl, true, at)
        local reservation = admitted and hit_reservation(keys[1], limit, laid, opts.ALIGN, offset, cost)
        return { admitted and 1 or 0, final, remaining, reset, reservation }
    end
    -- Settle's usual outcome (admitted in a running window) without the call to it: a Lua call
    -- with its arguments costs about a thirtieth of the whole HIT.
    if ttl and ttl >= 0 and count + cost <= limit then
        redis_call('INCRBY', keys[1], cost == 1 and '1' or format('%d', cost))
        return { 1, count + cost, limit - count - cost, ttl }
    end
    local admitted, final, remaining, reset = settle(keys[1], limit, window, cost, count, ttl, true, at)
    return { admitted and 1 or 0, final, remaining, reset }
end

local PEEK_OPTIONS = { { name = 'COST', valued = true } }

local function peek(keys, args)
    -- The usual call, a limit seen before and no options: one lookup.
    local limit, cost = known_positive[args[1]], 1
    if not (limit and #args == 1) then
        if #args < 1 then
            fail("ERR wrong number of arguments for 'ratelimit.peek' command")
        end
        limit = positive(args[1], 'limit')
        cost = cost_of(options(args, 2, PEEK_OPTIONS, 'COST'))
    end
    local count, ttl = read(keys[1])
    if limit == BIG or cost == BIG then
        fail(BEYOND)
    end
    return { count + cost <= limit and 1 or 0, count, limit > count and limit - count or 0, ttl or 0 }
end

-- Defined with the sliding window below.
local hitall_slide

-- HITALL's and SETTLE's keys are each given once. Keys are few: comparing them pairwise beats
-- building a set.
local function refuse_repeated_keys(keys)
    for i = 2, #keys do
        for j = 1, i - 1 do
            if keys[i] == keys[j] then
                fail('ERR each key may be given only once')
            end
        end
    end
end

local HITALL_OPTIONS = {
    { name = 'COST', valued = true },
    { name = 'MS' },
    { name = 'SLIDE' },
    { name = 'ALIGN' },
    { name = 'TZ', valued = true },
    { name = 'TOKENS', valued = 2 },
    { name = 'RESERVE' },
}

-- TOKENS' amount and the index of the first key it counts on (n + 1 without it), after the
-- module's other checks; then RESERVE's rule.
local function hitall_tokens(opts, n)
    if not opts.TOKENS then
        if opts.RESERVE then
            fail('ERR RESERVE needs TOKENS >= 1')
        end
        return nil, n + 1
    end
    local tokens = positive(opts.TOKENS, 'TOKENS')
    local count = integer(opts.TOKENS2)
    if not count or count < 1 or count > n then
        fail("ERR TOKENS' key count must be between 1 and numkeys")
    end
    return tokens, n - count + 1
end

-- The reservation of a HITALL's token keys (from `first` on): each key's entry, joined by ',',
-- with the call's one id (each key's settle marks are its own).
local function joined_reservation(keys, first, entry)
    local entries, id = {}, reservation_id()
    for i = first, #keys do
        entries[#entries + 1] = entry(i, id)
    end
    return table.concat(entries, ',')
end

local HITALL_KEYS = {}

local function hitall(keys, args)
    local n = #keys
    -- The module's command has arity -5 (numkeys and three more), which Redis checks first.
    if n + #args < 3 then
        fail("ERR wrong number of arguments for 'ratelimit.hitall' command")
    end
    if n < 1 then
        fail('ERR numkeys must be an integer >= 1')
    end
    refuse_repeated_keys(keys)
    -- Every key's limit, window, count and TTL (at 4i-3 .. 4i) in one table, the same one for
    -- every call (functions never run at once): a table made per call costs more than all the
    -- arithmetic on its indexes. Each entry is written before it is read.
    local t = HITALL_KEYS
    for i = 1, n do
        local limit = args[2 * i - 1]
        if not limit or not args[2 * i] then
            fail("ERR wrong number of arguments for 'ratelimit.hitall' command")
        end
        t[4 * i - 3] = known_positive[limit] or positive(limit, 'limit')
    end
    local opts, cost = NO_OPTIONS, 1
    if #args > 2 * n then
        opts = options(args, 2 * n + 1, HITALL_OPTIONS, 'COST, MS, SLIDE, ALIGN, TZ, TOKENS or RESERVE')
        cost = cost_of(opts)
        if opts.SLIDE and opts.ALIGN then
            fail('ERR syntax error: SLIDE and ALIGN cannot be given together')
        end
    end
    -- A calendar window's unit stands in its window's slot until the clock is read.
    local calendar = false
    for i = 1, n do
        local window = args[2 * i]
        window = not opts.MS and known_seconds[window] or fixed_window(window, opts.MS)
        calendar = calendar or type(window) == 'string'
        t[4 * i - 2] = window
    end
    if opts.SLIDE then
        if calendar then
            fail('ERR syntax error: SLIDE and a calendar window cannot be given together')
        end
        if opts.TZ then
            zone_offset(opts.TZ, false)
        end
        local tokens, first = hitall_tokens(opts, n)
        return hitall_slide(keys, t, cost, tokens, first, opts.RESERVE)
    end
    local offset = zone_offset(opts.TZ, calendar)
    local tokens, first = hitall_tokens(opts, n)
    local laid = {}
    for i = first, n do
        laid[i] = t[4 * i - 2]
    end
    local now
    if calendar or opts.ALIGN then
        now = now_ms()
        for i = 1, n do
            t[4 * i - 2] = window_left(t[4 * i - 2], opts.ALIGN, offset, now)
        end
    end
    -- Every key is read before anything is written: an error on one changes none.
    for i = 1, n do
        t[4 * i - 1], t[4 * i] = read(keys[i])
    end
    if cost == BIG or tokens == BIG then
        fail(BEYOND)
    end
    local admit = true
    for i = 1, n do
        local limit = t[4 * i - 3]
        if limit == BIG or t[4 * i - 2] == BIG then
            fail(BEYOND)
        end
        admit = admit and t[4 * i - 1] + (i >= first and tokens or cost) <= limit
    end
    local reply = n == 2 and { admit and 1 or 0, false, false } or { admit and 1 or 0 }
    for i = 1, n do
        local window = t[4 * i - 2]
        local at = now and window ~= BIG and now + window or nil
        local spent = i >= first and tokens or cost
        local _, final, remaining, reset = settle(keys[i], t[4 * i - 3], window, spent, t[4 * i - 1], t[4 * i], admit, at)
        reply[i + 1] = { final, remaining, reset }
    end
    if opts.RESERVE then
        reply[n + 2] = admit
            and joined_reservation(keys, first, function(i, id)
                return hit_reservation(keys[i], t[4 * i - 3], laid[i], opts.ALIGN, offset, tokens, id)
            end)
    end
    return reply
end

-- The sliding window (the module's core/slide.rs). Exact in doubles while every product stays
-- within 2^53, which `slide_now` makes sure of (else BEYOND). A key's stored counts are one table
-- per text, read once and shared; the counts at the call travel as values (w, start, prev, curr,
-- scaled): a table per call costs more than the arithmetic.

-- ceil(a / b) for exact integers a > -b, 0 < b: the double's quotient, corrected (near 2^53 the
-- division may round across an integer).
local function ceil_div(a, b)
    local q = ceil(a / b)
    if q * b < a then
        q = q + 1
    elseif (q - 1) * b >= a then
        q = q - 1
    end
    return q
end

-- floor(a / b) for exact integers 0 <= a, 0 < b. (SLIDE's every call takes ceil_div; this, only
-- a denial's retry time.)
local function idiv(a, b)
    return ceil_div(a - b + 1, b)
end

-- A field of a sliding-window value: a non-negative integer as Redis reads one, or NOT_SLIDE.
local function slide_field(text)
    local n = must(integer(text), NOT_SLIDE)
    if n == BIG_NEGATIVE then
        fail(NOT_SLIDE)
    end
    return n
end

-- A sliding-window value's fields: { window, start, prev, curr, when they stop mattering
-- (Counts::end_ms) }.
local function slide_parse(value)
    local cw, cstart, cprev, ccurr = match(value, '^slide:([^:]*):([^:]*):([^:]*):([^:]*)$')
    if not cw then
        fail(NOT_SLIDE)
    end
    cw, cstart, cprev, ccurr = slide_field(cw), slide_field(cstart), slide_field(cprev), slide_field(ccurr)
    if cw == BIG or cstart == BIG or cprev == BIG or ccurr == BIG then
        fail(BEYOND)
    end
    if cw < 1 or cstart < 0 or cstart % cw ~= 0 or cprev < 0 or ccurr < 0 then
        fail(NOT_SLIDE)
    end
    return { cw, cstart, cprev, ccurr, cstart + cw * (ccurr > 0 and 2 or (cprev > 0 and 1 or 0)) }
end

-- Values repeat across keys (one window, one start, small counts): each read once.
local known_slide, slide_value = remembered(slide_parse, 64)

-- The sliding window at `key` as `slide_parse` gives it (shared with every key holding the same
-- text: never changed), nil if missing.
local function slide_read(key)
    local value = redis_pcall('GET', key)
    if not value then
        return nil
    end
    -- (An error reply, a table, is never known.)
    return known_slide[value] or slide_value(string_of(value))
end

-- The counts at `now` (now_of), from those stored (`c`, nil if none): the window length `w` they
-- decay by (their own), the start of the window they are counted in, prev, curr, and the estimate
-- scaled by w. BEYOND unless every number of the call stays exact.
local function slide_now(limit, window, cost, now, c)
    if limit == BIG or cost == BIG or window == BIG then
        fail(BEYOND)
    end
    if not c then
        if (limit + cost) * window > EXACT or now + 2 * window > EXACT then
            fail(BEYOND)
        end
        return window, now - now % window, 0, 0, 0
    end
    local cw, cstart, cprev, ccurr = c[1], c[2], c[3], c[4]
    local widest = cw > window and cw or window
    if (cprev + ccurr + limit + cost) * widest > EXACT or now + 2 * widest > EXACT then
        fail(BEYOND)
    end
    local start, prev, curr = now - now % cw, 0, 0
    if start < cstart then
        start, prev, curr = cstart, cprev, ccurr
    elseif start == cstart then
        prev, curr = cprev, ccurr
    elseif start - cstart == cw then
        prev = ccurr
    end
    local elapsed = now - start
    return cw, start, prev, curr, prev * (cw - (elapsed > 0 and elapsed or 0)) + curr * cw
end

-- -1 when the counts admit `cost` now or never can; else the ms until they would.
local function slide_retry(limit, cost, w, start, prev, curr, scaled, now)
    if scaled + cost * w <= limit * w or cost > limit then
        return -1
    end
    local budget = (limit - cost) * w
    local left = budget - curr * w
    if left >= 0 and prev > 0 then
        local e = w - idiv(left, prev)
        if e < w then
            return start + e - now
        end
    end
    local e = 0
    if curr > 0 then
        e = max(w - idiv(budget, curr), 0)
    end
    return start + w + e - now
end

-- The reply's `count, remaining, retry_after_ms, reset_ms` for counts the call's cost is not in.
local function slide_fields(limit, cost, w, start, prev, curr, scaled, now, reset)
    local count = ceil_div(scaled, w)
    return count, max(limit - count, 0), slide_retry(limit, cost, w, start, prev, curr, scaled, now), reset
end

-- The module's slide `settle`: writes for a call admitted (`admit`) or not, and the reply's fields.
-- The key's TTL is read only where a denial may heal it (`c`: the key is there).
local function slide_settle(key, limit, window, cost, now, c, w, start, prev, curr, scaled, admit)
    if admit then
        -- What is stored: the counts, carried over (rounded up) into the call's window if they
        -- were kept with another length, and the cost.
        if w ~= window then
            start, prev, curr = now - now % window, 0, ceil_div(scaled, w)
        end
        local at = start + 2 * window
        local value = 'slide:' .. (known_decimal[window] or decimal(window)) .. ':' .. (known_decimal[start] or decimal(start))
            .. ':' .. (known_decimal[prev] or decimal(prev)) .. ':' .. (known_decimal[curr + cost] or decimal(curr + cost))
        redis_call('SET', key, value, 'PXAT', known_decimal[at] or decimal(at))
        -- Admitted, so it fitted: no retry, and the count is within the limit.
        local count = ceil_div(scaled + cost * w, w)
        return count, limit - count, -1, at - now
    end
    local reset = 0
    if c then
        reset = redis_call('PTTL', key)
        if reset == -1 then
            local at = max(c[5], now + 1)
            redis_call('PEXPIREAT', key, at)
            reset = at - now
        end
    end
    return slide_fields(limit, cost, w, start, prev, curr, scaled, now, reset)
end

-- The counts' text, as the module writes it.
local function slide_text(window, start, prev, curr)
    return 'slide:' .. (known_decimal[window] or decimal(window)) .. ':' .. (known_decimal[start] or decimal(start))
        .. ':' .. (known_decimal[prev] or decimal(prev)) .. ':' .. (known_decimal[curr] or decimal(curr))
end

-- The reply's `count, remaining, -1, reset_ms` for counts left as prev, curr in the window of `w`
-- from `start`, expiring `reset` ms from now.
local function slide_admitted(limit, w, start, prev, curr, now, reset)
    local elapsed = now - start
    local count = ceil_div(prev * (w - (elapsed > 0 and elapsed or 0)) + curr * w, w)
    return count, max(limit - count, 0), -1, reset
end

-- A give-back of `cost` < 0 (the module's slide give_back) to the window that starts at `target`
-- if it still counts (the current one, from `start`, or the one before), on counts `c` (nil if
-- missing) that stand as prev, curr in windows of `w` at `now`. The reply's last four fields and
-- how much it took (as a negative number).
local function slide_give_back(key, limit, now, c, w, start, prev, curr, target, cost)
    if not c then
        return 0, limit, -1, 0, 0
    end
    local taken = 0
    if target == start then
        taken = curr < -cost and curr or -cost
        curr = curr - taken
    elseif target == start - w then
        taken = prev < -cost and prev or -cost
        prev = prev - taken
    end
    local ttl = redis_call('PTTL', key)
    if taken > 0 then
        if ttl == -1 then
            local at = max(start + w * (curr > 0 and 2 or (prev > 0 and 1 or 0)), now + 1)
            redis_call('SET', key, slide_text(w, start, prev, curr), 'PXAT', known_decimal[at] or decimal(at))
            ttl = at - now
        else
            redis_call('SET', key, slide_text(w, start, prev, curr), 'KEEPTTL')
        end
    elseif ttl == -1 then
        local at = max(c[5], now + 1)
        redis_call('PEXPIREAT', key, at)
        ttl = at - now
    end
    local count, remaining, retry, reset = slide_admitted(limit, w, start, prev, curr, now, ttl)
    return count, remaining, retry, reset, -taken
end

local function slide(keys, args)
    -- The usual call, `limit window` seen before: two lookups.
    local limit, window, cost, opts = known_positive[args[1]], known_seconds[args[2]], 1, NO_OPTIONS
    if not (limit and window and #args == 2) then
        limit, window, cost, opts =
            limit_args(args, 'ratelimit.slide', SLIDE_OPTIONS, 'COST, MS, PARTIAL, PEEK or RESERVE')
        if opts.PEEK and opts.RESERVE then
            fail('ERR syntax error: PEEK and RESERVE cannot be given together')
        end
        check_partial(opts, cost, 'COST')
        check_reserve(opts, cost, 'COST')
    end
    local key = keys[1]
    local c = slide_read(key)
    local now = now_ms()
    local w, start, prev, curr, scaled = slide_now(limit, window, cost, now, c)
    if cost < 0 and not opts.PEEK then
        local count, remaining, retry, reset = slide_give_back(key, limit, now, c, w, start, prev, curr, start, cost)
        return { 1, count, remaining, retry, reset }
    end
    local fits = scaled + cost * w <= limit * w
    local granted = cost
    if opts.PARTIAL and not fits then
        -- The module's decide_partial: what the estimate has room for, at least one, each
        -- decided as a call of that cost (one when none).
        granted = idiv(max(limit * w - scaled, 0), w)
        cost, fits = max(granted, 1), granted > 0
    end
    local count, remaining, retry, reset
    if opts.PEEK then
        count, remaining, retry, reset =
            slide_fields(limit, cost, w, start, prev, curr, scaled, now, c and redis_call('PTTL', key) or 0)
    else
        count, remaining, retry, reset = slide_settle(key, limit, window, cost, now, c, w, start, prev, curr, scaled, fits)
    end
    local reply = { fits and 1 or 0, count, remaining, retry, reset }
    if opts.PARTIAL then
        reply[6] = fits and granted or 0
    end
    if opts.RESERVE then
        -- An admitted call stored its counts in the window its reset counts from.
        reply[#reply + 1] = fits
            and format('s:%d:%d:%d:%d:%s', limit, window, now + reset - 2 * window, granted, reservation_key(key))
    end
    return reply
end

-- HITALL's SLIDE: every key read and checked before anything is written, all or nothing. `t`
-- holds each key's limit and window at 4i-3 and 4i-2, as `hitall` made it; a key's stored counts
-- and its counts at the call are kept as a row (missing key: the first nil).
hitall_slide = function(keys, t, cost, tokens, first, reserve)
    local n, rows = #keys, {}
    for i = 1, n do
        -- Indexed, not iterated: a missing key's counts are a nil in the middle.
        rows[i] = slide_read(keys[i])
    end
    local now = now_ms()
    local admit = true
    for i = 1, n do
        local c, limit, spent = rows[i], t[4 * i - 3], i >= first and tokens or cost
        local w, start, prev, curr, scaled = slide_now(limit, t[4 * i - 2], spent, now, c)
        rows[i] = { c, w, start, prev, curr, scaled }
        admit = admit and scaled + spent * w <= limit * w
    end
    local reply = { admit and 1 or 0 }
    for i = 1, n do
        local r, spent = rows[i], i >= first and tokens or cost
        reply[i + 1] = {
            slide_settle(keys[i], t[4 * i - 3], t[4 * i - 2], spent, now, r[1], r[2], r[3], r[4], r[5], r[6], admit),
        }
    end
    if reserve then
        reply[n + 2] = admit
            and joined_reservation(keys, first, function(i, id)
                -- An admitted call stored its counts in the window its reset counts from.
                local window = t[4 * i - 2]
                local start = now + reply[i + 1][4] - 2 * window
                return format('s:%d:%d:%d:%d:%s', t[4 * i - 3], window, start, tokens, reservation_key(keys[i], id))
            end)
    end
    return reply
end

-- Leases (the module's core/lease.rs): a sorted set of lease ids scored by their expiry in ms.
-- What a call reads of the set travels as values (mine, total, expired), not in a table.

local MAX_ID_LEN = 256
local BAD_ID = 'ERR ID must be 1 to ' .. MAX_ID_LEN .. ' bytes'

-- A score as ms, rounded up (scores this library and the module write are integers).
local function score_ms(text)
    return known_decimal[text] or ceil(tonumber(text))
end

-- The set at `key` as it stands at `now` for lease `id` (the module's `Leases`, the parts every
-- call needs): the id's expiry (nil if not a member), the set's size, and how many have expired,
-- counted only where others than the id are there.
local function lease_read(key, id, now)
    local mine = redis_pcall('ZSCORE', key, id)
    if mine then
        if type(mine) == 'table' then
            raise(mine)
        end
        mine = score_ms(mine)
    else
        mine = nil
    end
    local total = redis_call('ZCARD', key)
    local expired = 0
    if total == 1 and mine then
        -- The id's own lease alone: its score says it all.
        expired = mine <= now and 1 or 0
    elseif total > 0 then
        expired = redis_call('ZCOUNT', key, '-inf', known_decimal[now] or decimal(now))
    end
    return mine, total, expired
end

-- The earliest live expiry.
local function lease_earliest(key, now)
    local first = redis_call('ZRANGEBYSCORE', key, '(' .. decimal(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    return first[2] and score_ms(first[2]) or nil
end

-- The latest live expiry among the leases other than `id`.
local function lease_latest_other(key, id, now)
    local last = redis_call('ZREVRANGEBYSCORE', key, '+inf', '(' .. decimal(now), 'WITHSCORES', 'LIMIT', 0, 2)
    local score = last[1] == id and last[4] or last[2]
    return score and score_ms(score) or nil
end

-- The key's own expiry, nil without TTL. (A set of `total` 0 is no key: the callers ask only
-- where there is one.)
local function lease_key_expiry(key)
    local at = redis_call('PEXPIRETIME', key)
    return at >= 0 and at or nil
end

-- The module's `writes`: prune, the id's change (`set_mine`: its new expiry; `remove_mine`), and
-- the key's expiry at its latest lease where that moved or where the key had none (the heal);
-- made here, in that order.
local function lease_write(key, id, now, mine, total, expired, set_mine, remove_mine)
    local prune = expired > 0
    -- Read at most once, and only where the decision needs it.
    local key_expiry = false
    if not (prune or set_mine or remove_mine) then
        key_expiry = total > 0 and lease_key_expiry(key) or nil
        if key_expiry then
            return
        end
    end
    local live = mine ~= nil and mine > now
    local latest = set_mine or (not remove_mine and live and mine) or nil
    if total - expired - (live and 1 or 0) > 0 then
        local other = lease_latest_other(key, id, now)
        if other and (not latest or other > latest) then
            latest = other
        end
    end
    -- Read before anything is written: the last ZREM takes the key with it.
    if latest then
        if key_expiry == false then
            key_expiry = total > 0 and lease_key_expiry(key) or nil
        end
        if key_expiry == latest then
            latest = nil
        end
    end
    if prune then
        redis_call('ZREMRANGEBYSCORE', key, '-inf', known_decimal[now] or decimal(now))
    end
    if set_mine then
        redis_call('ZADD', key, known_decimal[set_mine] or decimal(set_mine), id)
    end
    if remove_mine then
        redis_call('ZREM', key, id)
    end
    if latest then
        redis_call('PEXPIREAT', key, known_decimal[latest] or decimal(latest))
    end
end

local ACQUIRE_OPTIONS = { { name = 'MS' }, { name = 'ID', valued = true } }
local RENEW_OPTIONS = { { name = 'MS' } }

local function acquire(keys, args)
    -- The usual call, `limit lease ID id` with a limit and a lease seen before: lookups.
    local limit, lease, id = known_positive[args[1]], known_seconds[args[2]], args[4]
    if not (limit and lease and #args == 4 and args[3] == 'ID') then
        if #args < 2 then
            fail("ERR wrong number of arguments for 'ratelimit.acquire' command")
        end
        limit = positive(args[1], 'limit')
        local opts = options(args, 3, ACQUIRE_OPTIONS, 'MS or ID')
        lease, id = duration_ms(args[2], opts.MS, 'lease'), opts.ID
        if not id then
            fail('ERR ratelimit library: ACQUIRE needs an ID here (the module makes one; a function cannot make ids unique across servers)')
        end
    end
    if #id < 1 or #id > MAX_ID_LEN then
        fail(BAD_ID)
    end
    local key, now = keys[1], now_ms()
    local mine, total, expired = lease_read(key, id, now)
    if limit == BIG or lease == BIG or now + lease > EXACT then
        fail(BEYOND)
    end
    local live = total - expired
    local acquired, in_use, ms = true, live, lease
    if not (mine and mine > now) then
        if live < limit then
            in_use = live + 1
        else
            acquired = false
            local earliest = lease_earliest(key, now)
            ms = earliest and earliest - now or 0
        end
    end
    lease_write(key, id, now, mine, total, expired, acquired and now + lease or nil, false)
    return { acquired and 1 or 0, in_use, limit - in_use > 0 and limit - in_use or 0, ms, acquired and id or false }
end

local function release(keys, args)
    if #args ~= 1 then
        fail("ERR wrong number of arguments for 'ratelimit.release' command")
    end
    local key, id = keys[1], args[1]
    if #id < 1 or #id > MAX_ID_LEN then
        fail(BAD_ID)
    end
    local now = now_ms()
    local mine, total, expired = lease_read(key, id, now)
    local live = mine ~= nil and mine > now
    lease_write(key, id, now, mine, total, expired, nil, live)
    return live and 1 or 0
end

local function renew(keys, args)
    if #args < 2 then
        fail("ERR wrong number of arguments for 'ratelimit.renew' command")
    end
    local id = args[1]
    if #id < 1 or #id > MAX_ID_LEN then
        fail(BAD_ID)
    end
    local opts = options(args, 3, RENEW_OPTIONS, 'MS')
    local lease = duration_ms(args[2], opts.MS, 'lease')
    local key, now = keys[1], now_ms()
    local mine, total, expired = lease_read(key, id, now)
    if lease == BIG or now + lease > EXACT then
        fail(BEYOND)
    end
    if not (mine and mine > now) then
        lease_write(key, id, now, mine, total, expired, nil, false)
        return -1
    end
    lease_write(key, id, now, mine, total, expired, now + lease, false)
    return lease
end

-- GCRA. A nanosecond quantity is two numbers, us and r (us * 1000 + r, 0 <= r < 1000), passed and
-- returned as such (no table per value), so that a TAT (about 1.8e18 ns) and spans up to the
-- module's 2^62 ns bound stay exact in doubles.

local MAX_SPAN = 4611686018427387903 -- i64::MAX / 2 (the double is a hair above; boundaries aside)

local function norm(us, r)
    local carry = floor(r / 1000)
    return us + carry, r - carry * 1000
end

-- An exact integer of nanoseconds (|n| <= 2^53).
local function from_ns(n)
    local us = floor(n / 1000)
    return norm(us, n - us * 1000)
end

-- Negative, zero or positive as a < b, a == b or a > b.
local function cmp(a_us, a_r, b_us, b_r)
    if a_us ~= b_us then
        return a_us - b_us
    end
    return a_r - b_r
end

-- a * n for an integer 0 <= n <= 2^53, exact while the product stays within the spans' bound.
local function mul(us, r, n)
    local n_hi = floor(n / 1000)
    local n_lo = n - n_hi * 1000
    return norm(us * n + r * n_hi, r * n_lo)
end

-- floor(a / b) for b = e ns (the emission), a >= 0: a double's guess, corrected exactly.
local function div(a_us, a_r, b_us, b_r, e)
    local q = floor((a_us * 1000 + a_r) / e)
    while q > 0 do
        local m_us, m_r = mul(b_us, b_r, q)
        if cmp(m_us, m_r, a_us, a_r) <= 0 then
            break
        end
        q = q - 1
    end
    while true do
        local m_us, m_r = mul(b_us, b_r, q + 1)
        if cmp(m_us, m_r, a_us, a_r) > 0 then
            return q
        end
        q = q + 1
    end
end

-- Nanoseconds to milliseconds, rounded up, as the module's ceil_ms.
local function ceil_ms(us, r)
    local ms = floor(us / 1000)
    return ms + ((us - ms * 1000 ~= 0 or r ~= 0) and 1 or 0)
end

-- A stored TAT (an integer as Redis reads one).
local function tat_of(text)
    local n = #text
    -- The usual TAT, 16 to 19 digits: split where the microseconds end.
    if n > 15 and n < 20 and find(text, '^[1-9]%d*$') and (n < 19 or text <= '9223372036854775807') then
        local us = tonumber(string.sub(text, 1, -4))
        if us > EXACT then
            fail(BEYOND)
        end
        return us, tonumber(string.sub(text, -3))
    end
    local value = must(integer(text), NOT_INTEGER)
    if value ~= BIG and value ~= BIG_NEGATIVE then
        return from_ns(value)
    end
    local sign, digits = match(text, '^(%-?)(%d+)$')
    local us, r = tonumber(string.sub(digits, 1, -4)), tonumber(string.sub(digits, -3))
    if us > EXACT then
        fail(BEYOND)
    end
    if sign == '-' then
        return norm(-us, -r)
    end
    return us, r
end

local function text_of(us, r)
    return us == 0 and format('%d', r) or format('%d%03d', us, r)
end

-- A period in seconds as Rust's f64 parser reads it (what the module uses), to the nearest ns.
local _, period_ns = remembered(function(text)
    -- Whole seconds up to a million: exact at once.
    if #text < 7 and find(text, '^[1-9]%d*$') then
        return tonumber(text) * 1e9
    end
    local lower = string.lower(text)
    local sign, body = match(lower, '^([+-]?)(.*)$')
    local seconds
    if body == 'inf' or body == 'infinity' then
        seconds = sign == '-' and -INF or INF
    else
        local mantissa = match(body, '^([%d.]+)e[+-]?%d+$') or body
        if not match(mantissa, '^%d*%.?%d*$') or not match(mantissa, '%d') then
            fail('ERR period is not a valid float')
        end
        seconds = tonumber(lower)
        if not seconds then
            fail('ERR period is not a valid float')
        end
    end
    if seconds <= 0 then
        fail('ERR period must be > 0')
    end
    -- Rust's round(): half away from zero, done without adding 0.5 (inexact above 2^52).
    local x = seconds * 1e9
    local whole = floor(x)
    if x - whole >= 0.5 then
        whole = whole + 1
    end
    if whole >= 2 ^ 63 then
        fail('ERR period would cause an overflow')
    end
    return whole
end)

local GCRA_OPTIONS = {
    { name = 'TOKENS', valued = true, missing = 'ERR Missing TOKENS value' },
    { name = 'RESERVE' },
    { name = 'PARTIAL' },
    { name = 'ALIGN' },
}

-- A rate's emission `e` ns as e_us, e_r, and its tolerance (`capacity` emissions) as tol_us, tol_r.
local function gcra_spans(emission, capacity)
    local e_us = floor(emission / 1000)
    local e_r = emission - e_us * 1000
    if e_r == 0 then
        -- A whole number of microseconds (the usual emission): spans are whole too.
        return e_us, 0, e_us * capacity, 0
    end
    local tol_us, tol_r = mul(e_us, e_r, capacity)
    return e_us, e_r, tol_us, tol_r
end

-- The server's clock in µs, and in ms.
local function gcra_now()
    local t = redis_call('TIME')
    local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    return now_us, floor(now_us / 1000)
end

-- ALIGN (the module's gcra::on_boundaries): the first boundary at or after (us, r), in whole µs,
-- of a period of `align` µs.
local function boundary_after(us, r, align)
    local t = us + (r > 0 and 1 or 0)
    local rem = math.fmod(t, align)
    if rem < 0 then
        rem = rem + align
    end
    return rem == 0 and t or t - rem + align
end

-- When a bucket at TAT (us, r) expires: at its TAT (with ALIGN, at the boundary after it), never
-- at or before now.
local function gcra_expiry(us, r, now_ms, align)
    if align then
        us, r = boundary_after(us, r, align), 0
    end
    return format('%d', max(ceil_ms(us, r), now_ms + 1))
end

-- A bucket's TAT stored with its expiry.
local function gcra_store(key, us, r, now_ms, align)
    redis_call('SET', key, text_of(us, r), 'PXAT', gcra_expiry(us, r, now_ms, align))
end

-- Milliseconds until (us, r), decided at `now_us`: with ALIGN, until the boundary after it, from
-- the clock's own `clock_us`.
local function gcra_until(us, r, now_us, clock_us, align)
    if align then
        return max(ceil_ms(boundary_after(us, r, align) - clock_us, 0), 0)
    end
    return ceil_ms(us - now_us, r)
end

-- The reply's `remaining, full_after_ms` for a bucket at TAT `after` (not before now).
local function gcra_fields(after_us, after_r, now_us, tol_us, tol_r, e_us, e_r, emission)
    local used_us, used_r = after_us - now_us, after_r
    local free_us, free_r = tol_us - used_us, tol_r - used_r
    if free_r < 0 then
        free_us, free_r = free_us - 1, free_r + 1000
    end
    local remaining = 0
    if free_us > 0 or (free_us == 0 and free_r > 0) then
        -- floor(free / e): with e whole microseconds, floor(free_us / e_us), exact below 2^53.
        remaining = e_r == 0 and floor(free_us / e_us) or div(free_us, free_r, e_us, e_r, emission)
    end
    return remaining, ceil_ms(used_us, used_r)
end

-- `n` tokens given back (the module's gcra give_back) to a bucket stored at s_us, s_r (nil if
-- missing): its TAT back by their emission, not before now. The TAT after (now at least) and the
-- tokens given.
local function gcra_give_back(key, s_us, s_r, n, now_us, now_ms, e_us, e_r, emission, align)
    if not s_us then
        return now_us, 0, 0
    end
    if cmp(s_us, s_r, now_us, 0) <= 0 or n == 0 then
        if redis_call('PTTL', key) == -1 then
            redis_call('PEXPIREAT', key, gcra_expiry(s_us, s_r, now_ms, align))
        end
        if cmp(s_us, s_r, now_us, 0) <= 0 then
            return now_us, 0, 0
        end
        return s_us, s_r, 0
    end
    -- ceil(ahead / e), from floor((ahead - 1 ns) / e).
    local a_us, a_r = norm(s_us - now_us, s_r - 1)
    local k = div(a_us, a_r, e_us, e_r, emission) + 1
    local after_us, after_r, given = now_us, 0, k
    if n < k then
        local b_us, b_r = mul(e_us, e_r, n)
        after_us, after_r = norm(s_us - b_us, s_r - b_r)
        given = n
    end
    gcra_store(key, after_us, after_r, now_ms, align)
    return after_us, after_r, given
end

local function gcra(keys, args)
    if #args < 3 then
        fail("ERR wrong number of arguments for 'ratelimit.gcra' command")
    end
    local max_burst = argument(args[1])
    if max_burst == nil or (max_burst ~= BIG and max_burst < 0) then
        fail('ERR max_burst is out of range, must be >= 0')
    end
    local per_period = must(argument(args[2]), 'ERR tokens_per_period is not an integer or out of range')
    if per_period ~= BIG and per_period < 1 then
        fail('ERR tokens_per_period is out of range, must be >= 1')
    end
    local period = period_ns(args[3])
    local opts = #args > 3 and options(args, 4, GCRA_OPTIONS, 'TOKENS, PARTIAL, RESERVE or ALIGN') or NO_OPTIONS
    local tokens = 1
    if opts.TOKENS then
        tokens = must(argument(opts.TOKENS), 'ERR TOKENS is not an integer or out of range')
        if tokens == 0 then
            fail('ERR TOKENS must be a nonzero integer')
        end
    end
    check_reserve(opts, tokens, 'TOKENS')
    if opts.ALIGN and opts.RESERVE then
        fail('ERR syntax error: ALIGN and RESERVE cannot be given together')
    end
    check_partial(opts, tokens, 'TOKENS')
    -- The module's overflow checks, on doubles (exact wherever the library computes at all); BIG
    -- values by their text, approximately.
    local per_period_approx = per_period == BIG and tonumber(args[2]) or per_period
    local emission = max(floor(period / per_period_approx), 1)
    if period <= EXACT and per_period ~= BIG then
        while emission > 1 and emission * per_period > period do
            emission = emission - 1
        end
        while (emission + 1) * per_period <= period do
            emission = emission + 1
        end
    end
    local capacity = (max_burst == BIG and tonumber(args[1]) or max_burst) + 1
    if emission * capacity > MAX_SPAN then
        fail('ERR (max_burst + 1) * period / tokens_per_period would cause an overflow')
    end
    local tokens_approx = (tokens == BIG or tokens == BIG_NEGATIVE) and tonumber(opts.TOKENS) or tokens
    if emission * math.abs(tokens_approx) > MAX_SPAN then
        fail('ERR TOKENS * period / tokens_per_period would cause an overflow')
    end
    local value = get(keys[1])
    local stored_us, stored_r
    if value then
        stored_us, stored_r = tat_of(value)
    end
    if max_burst == BIG or per_period == BIG or tokens == BIG or tokens == BIG_NEGATIVE or period > EXACT then
        fail(BEYOND)
    end
    -- ALIGN: the period in µs; the bucket decides at the boundary just passed.
    local align = opts.ALIGN and period / 1000
    if align and align ~= floor(align) then
        fail(ALIGN_WHOLE_US)
    end
    local e_us, e_r, tol_us, tol_r = gcra_spans(emission, capacity)
    local clock_us, now_ms = gcra_now()
    local now_us = align and clock_us - math.fmod(clock_us, align) or clock_us
    if tokens < 0 then
        local after_us, after_r =
            gcra_give_back(keys[1], stored_us, stored_r, -tokens, now_us, now_ms, e_us, e_r, emission, align)
        local remaining = gcra_fields(after_us, after_r, now_us, tol_us, tol_r, e_us, e_r, emission)
        return { 0, capacity, remaining, -1, gcra_until(after_us, after_r, now_us, clock_us, align) }
    end
    local tat_us, tat_r = now_us, 0
    if stored_us and (stored_us > now_us or (stored_us == now_us and stored_r > 0)) then
        tat_us, tat_r = stored_us, stored_r
    end
    if opts.PARTIAL then
        -- The module's decide_partial: the whole tokens free, when fewer than asked but one.
        local free_us, free_r = norm(now_us + tol_us - tat_us, tol_r - tat_r)
        local whole = 0
        if free_us > 0 or (free_us == 0 and free_r > 0) then
            whole = e_r == 0 and floor(free_us / e_us) or div(free_us, free_r, e_us, e_r, emission)
        end
        if whole < 1 then
            -- Denied as a request of one token is: retry when one is whole.
            tokens = 1
        elseif whole < tokens then
            -- Granted, and the bucket left empty.
            local after_us, after_r = norm(now_us + tol_us, tol_r)
            gcra_store(keys[1], after_us, after_r, now_ms, align)
            local reply = { 0, capacity, 0, -1, gcra_until(after_us, after_r, now_us, clock_us, align), whole }
            if opts.RESERVE then
                reply[7] = format('g:%d:%d:%d:%s', capacity, emission, whole, reservation_key(keys[1]))
            end
            return reply
        end
    end
    local inc_us, inc_r = e_us * tokens, 0
    if e_r ~= 0 then
        inc_us, inc_r = mul(e_us, e_r, tokens)
    end
    -- Each remainder below stays within (-1000, 2000): one carry at most, by comparison.
    local next_us, next_r = tat_us + inc_us, tat_r + inc_r
    if next_r >= 1000 then
        next_us, next_r = next_us + 1, next_r - 1000
    end
    local late_us, late_r = next_us - now_us - tol_us, next_r - tol_r
    if late_r < 0 then
        late_us, late_r = late_us - 1, late_r + 1000
    end
    local admitted = late_us < 0 or (late_us == 0 and late_r == 0)
    local after_us, after_r = tat_us, tat_r
    if admitted then
        after_us, after_r = next_us, next_r
        gcra_store(keys[1], after_us, after_r, now_ms, align)
    elseif stored_us and redis_call('PTTL', keys[1]) == -1 then
        redis_call('PEXPIREAT', keys[1], gcra_expiry(stored_us, stored_r, now_ms, align))
    end
    local remaining = gcra_fields(after_us, after_r, now_us, tol_us, tol_r, e_us, e_r, emission)
    local full = gcra_until(after_us, after_r, now_us, clock_us, align)
    local retry = -1
    if not admitted and cmp(inc_us, inc_r, tol_us, tol_r) <= 0 then
        retry = gcra_until(now_us + late_us, late_r, now_us, clock_us, align)
    end
    local reply = { admitted and 0 or 1, capacity, remaining, retry, full }
    if opts.PARTIAL then
        reply[6] = admitted and tokens or 0
    end
    if opts.RESERVE then
        reply[#reply + 1] = admitted and format('g:%d:%d:%d:%s', capacity, emission, tokens, reservation_key(keys[1]))
    end
    return reply
end

-- RATELIMIT.SETTLE (the module's commands/settle.rs and core/reservation.rs).

local NOT_RESERVATION = 'ERR invalid reservation'
local WINDOW_DIFFERS = "ERR the reservation's window differs from the key's"

-- A reservation's fields: its kind and numbers (three for gcra, six for an adaptive limit, four
-- otherwise) in a table, as the module reads them; BEYOND where a number is past 2^53; then a
-- calendar window's zone, the reservation's id (nil for one made before ids).
local function reservation_of(text, key)
    local kind, rest = match(text, '^(%l+):(.*)$')
    if not kind then
        fail(NOT_RESERVATION)
    end
    -- A calendar window's zone follows the tag, and may hold ':' (+05:30).
    local zone = ''
    if kind == 'c' then
        local head, tail = match(rest, '^([^:]*:[^:]*:[^:]*:[^:]*:[^:]*)(.*)$')
        if not head or (tail ~= '' and (string.sub(tail, 1, 1) ~= ':' or #tail < 2 or #tail > 65)) then
            fail(NOT_RESERVATION)
        end
        rest, zone = head, string.sub(tail, 2)
    end
    local n = kind == 'g' and 3 or kind == 'd' and 6 or 4
    local f, count = {}, 0
    for field in string.gmatch(rest .. ':', '([^:]*):') do
        count = count + 1
        f[count] = field
    end
    local tag, id = f[n + 1], nil
    if count ~= n + 1 or (#tag ~= 8 and #tag ~= 24) or not find(tag, '^[0-9a-f]+$') then
        fail(NOT_RESERVATION)
    end
    if #tag == 24 then
        tag, id = string.sub(tag, 1, 8), string.sub(tag, 9)
    end
    for i = 1, n do
        local v = integer(f[i])
        if v == nil or v == BIG_NEGATIVE or (v ~= BIG and v < 0) then
            fail(NOT_RESERVATION)
        end
        f[i] = v
    end
    for i = 1, n do
        if f[i] == BIG then
            -- No adaptive limit's number is past 2^50: not one the module made.
            fail(kind == 'd' and NOT_RESERVATION or BEYOND)
        end
    end
    local a, b, c, d = f[1], f[2], f[3], f[4]
    local valid
    if kind == 'd' then
        -- As ADAPT takes them: floor <= start <= ceiling, ceiling and amount times the window
        -- within the state's bound, as every time.
        valid = a >= 1 and a <= b and b <= c and d >= 1 and d <= 2 ^ 40 and c * d <= 2 ^ 50 and f[5] <= 2 ^ 50
            and f[6] >= 1 and f[6] * d <= 2 ^ 50
    elseif kind == 'g' then
        valid = a >= 1 and b >= 1 and c >= 1 and b * a <= MAX_SPAN and b * c <= MAX_SPAN
    elseif kind == 'c' then
        valid = a >= 1 and UNIT_OF_CODE[b] ~= nil and d >= 1
    else
        local windowed = kind == 'h' or kind == 'a' or kind == 's'
        valid = windowed and a >= 1 and b >= 1 and d >= 1 and (kind == 'h' or c % b == 0)
    end
    if not valid then
        fail(NOT_RESERVATION)
    end
    if tag ~= key_tag(key) then
        fail('ERR the reservation is for another key')
    end
    f[count] = nil
    return kind, f, zone, id
end

-- A key's settle marks (the module's core/settle_marks.rs): a hash named after the key, in its
-- cluster slot, of settled reservations' ids and what each settle applied.

local CRC16 -- Redis Cluster's CRC16 of each byte, made on first use (`bit` is a global).
local function crc16(text)
    local band, bxor, lshift, rshift, byte = bit.band, bit.bxor, bit.lshift, bit.rshift, string.byte
    if not CRC16 then
        CRC16 = {}
        for i = 0, 255 do
            local crc = lshift(i, 8)
            for _ = 1, 8 do
                crc = band(band(crc, 0x8000) ~= 0 and bxor(lshift(crc, 1), 0x1021) or lshift(crc, 1), 0xffff)
            end
            CRC16[i] = crc
        end
    end
    local crc = 0
    for i = 1, #text do
        crc = band(bxor(lshift(crc, 8), CRC16[bxor(rshift(crc, 8), byte(text, i))]), 0xffff)
    end
    return crc
end

-- For each bit of a slot, the nibbles of the name's last four characters that flip it alone.
local SLOT_BIT_NIBBLES =
    { 0x88d4, 0x808a, 0x9007, 0x9efb, 0x19a2, 0x0c93, 0x1184, 0x8eed, 0x1efb, 0x8022, 0x89c4, 0x82aa, 0x9447, 0x967b }

local function marks_of(key)
    local band, bxor, rshift = bit.band, bit.bxor, bit.rshift
    local differ, nibbles = band(bxor(crc16(key), crc16(key .. ':settled:@@@@')), 0x3fff), 0
    for b = 0, 13 do
        if band(rshift(differ, b), 1) == 1 then
            nibbles = bxor(nibbles, SLOT_BIT_NIBBLES[b + 1])
        end
    end
    local char = function(i)
        return 64 + band(rshift(nibbles, 4 * i), 15)
    end
    return key .. ':settled:' .. string.char(char(0), char(1), char(2), char(3))
end

local NOT_MARKS = "WRONGTYPE the key's settle marks (its name, then ':settled:') hold another kind of value"

-- What the settle of reservation `id` applied, if the key's `marks` say it was settled (false if
-- not).
local function settled_before(marks, id)
    local applied = redis_pcall('HGET', marks, id)
    if type(applied) == 'table' and applied.err then
        fail(find(applied.err, '^WRONGTYPE') and NOT_MARKS or applied.err)
    end
    if applied and not integer(applied) then
        fail('ERR a settle mark is not an integer')
    end
    return applied and tonumber(applied)
end

-- Until when what a reservation counted counts (the module's Reserved::counts_until).
local function counts_until(kind, f)
    if kind == 's' then
        return f[3] + 2 * f[2]
    elseif kind == 'g' then
        return now_ms() + ceil(f[1] * f[2] / 1000000)
    elseif kind == 'd' then
        return now_ms() + f[4]
    end
    return f[3]
end

-- Marks reservation `id` settled in `key`'s `marks`, having applied `applied` (the module's
-- commands/settle.rs): the marks expire when the last window they guard does (an adaptive
-- limit's key, kept ten windows, is not one).
local function mark_settled(key, kind, marks, id, applied, until_ms)
    local current = redis_call('PEXPIRETIME', marks)
    local key_expiry = kind == 'd' and -2 or redis_call('PEXPIRETIME', key)
    local at = max(until_ms, key_expiry, current)
    if at <= now_ms() then
        return
    end
    redis_call('HSET', marks, id, format('%d', applied))
    if current ~= at then
        redis_call('PEXPIREAT', marks, format('%d', at))
    end
end

-- A calendar reservation's zone as an offset in ms: one TZ would refuse is not a reservation
-- (a zone name, which the module takes, is refused as TZ refuses it here).
local function reserved_zone(zone)
    if zone == '' then
        return 0
    end
    local sign, h, m = match(zone, '^([+-])(%d%d):(%d%d)$')
    if sign and (tonumber(h) > 23 or tonumber(m) > 59) or find(zone, '^[+-]') and not sign then
        fail(NOT_RESERVATION)
    end
    return zone_offset(zone, true)
end

-- HIT's settle: `delta` (used - reserved) on the counter's window that ends at `window_end`; a
-- window started here is `window` long, or ends at `at` (one laid on the clock).
local function settle_hit(key, limit, window, window_end, delta, at)
    local count, ttl = read(key)
    local final, reset = count, ttl or 0
    if delta > 0 then
        final = count + delta
        if final > EXACT then
            fail(BEYOND)
        end
        if ttl and ttl >= 0 then
            redis_call('INCRBY', key, format('%d', delta))
        else
            redis_call('SET', key, format('%d', final), expiry(window, at))
            reset = window
        end
    else
        local live = ttl and ttl >= 0 and redis_call('PEXPIRETIME', key) == window_end
        final, reset = hit_give_back(key, window, count, ttl, live and delta or 0, at)
    end
    return { 1, final, max(limit - final, 0), reset, final - count }
end

-- SLIDE's settle: `delta` on the window that starts at `target`.
local function settle_slide(key, limit, window, target, delta)
    local c = slide_read(key)
    if c and c[1] ~= window then
        fail(WINDOW_DIFFERS)
    end
    local now = now_ms()
    local w, start, prev, curr = slide_now(limit, window, max(delta, 0), now, c)
    if delta > 0 then
        local at = start + 2 * w
        redis_call('SET', key, slide_text(w, start, prev, curr + delta), 'PXAT', known_decimal[at] or decimal(at))
        local count, remaining, retry, reset = slide_admitted(limit, w, start, prev, curr + delta, now, at - now)
        return { 1, count, remaining, retry, reset, delta }
    end
    local count, remaining, retry, reset, applied = slide_give_back(key, limit, now, c, w, start, prev, curr, target, delta)
    return { 1, count, remaining, retry, reset, applied }
end

-- GCRA's settle: `delta` tokens on a bucket of `capacity`, one back every `emission` ns.
local function settle_gcra(key, capacity, emission, delta)
    local value = get(key)
    local s_us, s_r
    if value then
        s_us, s_r = tat_of(value)
    end
    local e_us, e_r, tol_us, tol_r = gcra_spans(emission, capacity)
    local now_us, now_ms = gcra_now()
    local after_us, after_r, applied
    if delta > 0 then
        -- The debt starts from the TAT, or now for a full bucket.
        local t_us, t_r = now_us, 0
        if s_us and cmp(s_us, s_r, now_us, 0) > 0 then
            t_us, t_r = s_us, s_r
        end
        if (e_us + 1) * delta > EXACT then
            fail(BEYOND)
        end
        local i_us, i_r = mul(e_us, e_r, delta)
        after_us, after_r = norm(t_us + i_us, t_r + i_r)
        if after_us > EXACT then
            fail(BEYOND)
        end
        gcra_store(key, after_us, after_r, now_ms)
        applied = delta
    else
        local given
        after_us, after_r, given = gcra_give_back(key, s_us, s_r, -delta, now_us, now_ms, e_us, e_r, emission)
        applied = -given
    end
    local remaining, full = gcra_fields(after_us, after_r, now_us, tol_us, tol_r, e_us, e_r, emission)
    return { 0, capacity, remaining, -1, full, applied }
end

local adapt_read, settle_adapt -- with the adaptive limit, below

-- One key's settle with `used`, of a reservation entry read by `reservation_of`.
local function settle_one(key, used, kind, f, zone)
    local a, b, c, d = f[1], f[2], f[3], f[4]
    if kind == 'd' then
        return settle_adapt(key, f, used)
    elseif kind == 'a' or kind == 'c' then
        -- An overage after the reserved window ended counts in the one laid now.
        local now = now_ms()
        local window = window_left(kind == 'c' and UNIT_OF_CODE[b] or b, kind == 'a', reserved_zone(zone), now)
        return settle_hit(key, a, window, c, used - d, now + window)
    elseif kind == 'h' then
        return settle_hit(key, a, b, c, used - d)
    elseif kind == 's' then
        return settle_slide(key, a, b, c, used - d)
    end
    return settle_gcra(key, a, b, used - c)
end

-- What a reservation was of, which ends SETTLE's reply (the module's commands/settle.rs Shape): the
-- limiter, its limit (a bucket's capacity, an adaptive limit's learned one: the reply's second
-- number), its window in ms (-1: a calendar window, a bucket).
local function shape_of(kind, a, b, reply, f)
    if kind == 'd' then
        return 'adaptive', reply[2], f[4]
    elseif kind == 'h' or kind == 'a' then
        return 'fixed', a, b
    elseif kind == 'c' then
        return 'fixed', a, -1
    elseif kind == 's' then
        return 'sliding', a, b
    end
    return 'bucket', a, -1
end

-- One key's settle of a reservation entry read as { kind, numbers, zone, id, first, marks }
-- (`first`: what a settle of it applied before, or false; `marks`: the key's marks' name):
-- settled before, it is decided as if exactly what was reserved was used, which changes no count,
-- and answered with what the first applied.
local function settle_marked(key, used, e)
    local kind, f, zone, id, first, marks = e[1], e[2], e[3], e[4], e[5], e[6]
    local amount = f[#f]
    local reply = settle_one(key, first and amount or used, kind, f, zone)
    if first then
        reply[#reply] = first
    elseif id then
        mark_settled(key, kind, marks, id, reply[#reply], counts_until(kind, f))
    end
    local limiter, limit, window = shape_of(kind, f[1], f[2], reply, f)
    reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = limiter, limit, window
    return reply
end

local function settle_reservation(keys, args)
    if #keys < 1 or #keys + #args < 3 then
        fail("ERR wrong number of arguments for 'ratelimit.settle' command")
    end
    -- The module's command takes every argument but the last two as keys; here they are FCALL's.
    local used = argument(args[#args])
    if used == nil or used == BIG_NEGATIVE or (used ~= BIG and used < 0) then
        fail('ERR used must be an integer >= 0')
    end
    local entries = {}
    for entry in string.gmatch(args[#args - 1] .. ',', '([^,]*),') do
        entries[#entries + 1] = entry
    end
    if #entries ~= #keys + #args - 2 then
        fail('ERR the reservation is for ' .. #entries .. ' keys')
    end
    if #args ~= 2 then
        fail("ERR ratelimit library: SETTLE's keys are FCALL's keys (numkeys), not its arguments")
    end
    if #keys == 1 then
        local kind, f, zone, id = reservation_of(entries[1], keys[1])
        local marks = id and marks_of(keys[1])
        local first = id and settled_before(marks, id)
        if used == BIG then
            fail(BEYOND)
        end
        return settle_marked(keys[1], used, { kind, f, zone, id, first, marks })
    end
    refuse_repeated_keys(keys)
    -- Every entry and key checked before anything is written: the reservation's fields, the
    -- key's type, a sliding window's length; an error on one changes none.
    local read_entries = {}
    for i = 1, #keys do
        local kind, f, zone, id = reservation_of(entries[i], keys[i])
        local marks = id and marks_of(keys[i])
        read_entries[i] = { kind, f, zone, id, id and settled_before(marks, id), marks }
        if kind == 'c' then
            reserved_zone(zone)
        end
        if kind == 's' then
            local counts = slide_read(keys[i])
            if counts and counts[1] ~= f[2] then
                fail(WINDOW_DIFFERS)
            end
        elseif kind == 'd' then
            local state = adapt_read(keys[i])
            if state and state.window ~= f[4] then
                fail(WINDOW_DIFFERS)
            end
        elseif kind == 'g' then
            get(keys[i])
        else
            read(keys[i])
        end
    end
    if used == BIG then
        fail(BEYOND)
    end
    local reply = {}
    for i = 1, #keys do
        reply[i] = settle_marked(keys[i], used, read_entries[i])
    end
    return reply
end

-- The adaptive limit (the module's core/adaptive.rs): a bucket at the learned rate, its state one
-- text `adapt:` and 16 integers (15 in a state written before `cut_at` was kept). Every number
-- stays within 2^50 (the arguments are bounded so), so the doubles here are exact; divisions go
-- through `idiv` and `ceil_div`.
local ADAPT_FIELDS = { 'window', 'floor', 'ceiling', 'limit', 'wmax', 'earned', 'epoch_start', 'used', 'cut',
    'level', 'at', 'bound_left', 'bound_until', 'stated', 'queue_until', 'cut_at' }
local NOT_ADAPTIVE = 'ERR value is not a ratelimit adaptive limit'
local MAX_SCALED = 2 ^ 50
local MAX_SPAN_MS = 2 ^ 40
local ADAPT_OPTIONS = {
    { name = 'COST', valued = true }, { name = 'MS' }, { name = 'PARTIAL' }, { name = 'RESERVE' }, { name = 'TURN' },
}
local REPORT_OPTIONS = {
    { name = 'RETRY', valued = true },
    { name = 'LIMIT', valued = true },
    { name = 'REMAINING', valued = true },
    { name = 'RESET', valued = true },
    { name = 'AGE', valued = true },
}

-- The state at `key`, nil if missing; NOT_ADAPTIVE for a string that is not one.
adapt_read = function(key)
    local text = get(key)
    if not text then
        return nil
    end
    if sub(text, 1, 6) ~= 'adapt:' then
        fail(NOT_ADAPTIVE)
    end
    local s, n, from = {}, 0, 7
    while true do
        local stop = find(text, ':', from, true)
        n = n + 1
        local v = n <= #ADAPT_FIELDS and integer(sub(text, from, stop and stop - 1 or #text))
        if not v or v == BIG or v == BIG_NEGATIVE then
            fail(NOT_ADAPTIVE)
        end
        s[ADAPT_FIELDS[n]] = v
        if not stop then
            break
        end
        from = stop + 1
    end
    local function within(v, lo, hi)
        return v >= lo and v <= hi
    end
    if n == #ADAPT_FIELDS - 1 then
        -- Written before the cut's time was kept: a cut in its epoch as made at the epoch's end.
        s.cut_at, n = s.cut == 1 and MAX_SCALED or 0, n + 1
    end
    local valid = n == #ADAPT_FIELDS and within(s.window, 1, MAX_SPAN_MS) and s.floor >= 1
        and s.floor <= s.limit and s.limit <= s.ceiling and s.ceiling * s.window <= MAX_SCALED
        and within(s.wmax, 1, MAX_SCALED) and within(s.earned, 0, 15) and within(s.used, 0, MAX_SCALED)
        and within(s.cut, 0, 1) and within(s.level, -MAX_SCALED, MAX_SCALED)
        and within(s.bound_left, -1, MAX_SCALED) and within(s.stated, 0, MAX_SCALED)
        and within(s.epoch_start, 0, MAX_SCALED) and within(s.at, 0, MAX_SCALED)
        and within(s.bound_until, 0, MAX_SCALED) and within(s.queue_until, 0, MAX_SCALED)
        and within(s.cut_at, 0, MAX_SCALED)
    if not valid then
        fail(NOT_ADAPTIVE)
    end
    return s
end

-- The state stored with its expiry: kept 10 windows past its last call, its hold, its provider's
-- reset, its last denied caller's turn.
local function adapt_store(key, s, now)
    local f = {}
    for i = 1, #ADAPT_FIELDS do
        f[i] = format('%d', s[ADAPT_FIELDS[i]])
    end
    local expires = max(s.at, now, s.bound_until, s.queue_until) + 10 * s.window
    redis_call('SET', key, 'adapt:' .. concat(f, ':'), 'PXAT', format('%d', expires))
end

local function adapt_capacity(s)
    return max(idiv(s.limit, 6), 1) * s.window
end

-- A new limit at `start`, its bucket full, as if it had just recovered to `start`.
local function adapt_new(floor_, start, ceiling, w, now)
    local s = { window = w, floor = floor_, ceiling = ceiling, limit = start, wmax = start, earned = 4, epoch_start = now, used = 0, cut = 0, cut_at = 0, at = now,
        bound_left = -1, bound_until = 0, stated = 0, queue_until = 0 }
    s.level = adapt_capacity(s)
    return s
end

local function adapt_cap(s)
    if s.stated == 0 then
        return s.ceiling
    end
    return max(min(s.ceiling, s.stated), s.floor)
end

-- CUBIC in earned epochs: wmax * (1 + 0.3 * ((t - 4) / 4)^3), floored, wmax split by 640 to stay exact.
local function adapt_cubic(s)
    local d = s.earned - 4
    local k = 3 * d * d * d
    local q = idiv(s.wmax, 640)
    local r = s.wmax - 640 * q
    return min(max(s.wmax + q * k + floor(r * k / 640), 1), MAX_SCALED)
end

-- An epoch: a sixth of the window.
local function adapt_epoch(s)
    return max(idiv(s.window, 6), 1)
end

-- Ends the epochs `now` is past (growth when earned); whether the limit grew.
local function adapt_roll(s, now)
    local e = adapt_epoch(s)
    if now < s.epoch_start + e then
        return false
    end
    local before = s.limit
    local rate = s.used * 6
    if s.cut == 0 and rate * 2 >= s.limit then
        s.earned = min(s.earned + 1, 15)
        local target = adapt_cubic(s)
        if s.stated > s.limit then
            target = max(target, s.limit + idiv(s.stated - s.limit, 2))
        end
        s.limit = max(s.limit, min(target, rate * 2, adapt_cap(s)))
        if s.earned == 15 then
            s.wmax = s.limit
        end
    end
    s.epoch_start = s.epoch_start + idiv(now - s.epoch_start, e) * e
    s.used, s.cut = 0, 0
    s.level = min(s.level, adapt_capacity(s))
    return s.limit > before
end

local function adapt_refill(s, now)
    if now <= s.at then
        return
    end
    local full = adapt_capacity(s)
    if s.level >= full or now - s.at >= ceil_div(full - s.level, s.limit) then
        s.level = full
    else
        s.level = s.level + (now - s.at) * s.limit
    end
    s.at = now
end

local function adapt_bounded(s)
    local cap = adapt_cap(s)
    s.limit = max(s.floor, min(s.limit, cap))
    s.wmax = max(min(s.wmax, cap), 1)
    s.level = min(s.level, adapt_capacity(s))
end

local function adapt_bound(s, now)
    if s.bound_left >= 0 and now < s.bound_until then
        return s.bound_left
    end
end

local function adapt_wait(s, need, now)
    return max(s.at, now) - now + ceil_div(max(need - s.level, 0), s.limit)
end

-- Whole tokens in the bucket at `now` (none while held).
local function adapt_whole(s, now)
    if now < s.at or s.level < 0 then
        return 0
    end
    return idiv(s.level, s.window)
end

-- A bound's value by its text: exact up to 2^53, the double nearest beyond (BIG's).
local function approx(text, value)
    return value == BIG and tonumber(text) or value
end

local function adapt(keys, args)
    if #args < 4 then
        fail("ERR wrong number of arguments for 'ratelimit.adapt' command")
    end
    local floor_, start, ceiling = positive(args[1], 'floor'), positive(args[2], 'start'), positive(args[3], 'ceiling')
    local opts = options(args, 5, ADAPT_OPTIONS, 'COST, MS, PARTIAL, RESERVE or TURN')
    local cost = opts.COST and positive(opts.COST, 'COST') or 1
    local w = window_ms(args[4], opts.MS)
    if w == BIG or w > MAX_SPAN_MS then
        fail('ERR window is too large')
    end
    floor_, start, ceiling = approx(args[1], floor_), approx(args[2], start), approx(args[3], ceiling)
    if not (floor_ <= start and start <= ceiling) then
        fail('ERR floor <= start <= ceiling must hold')
    end
    if ceiling * w > MAX_SCALED then
        fail('ERR ceiling * window is too large')
    end
    cost = approx(opts.COST, cost)
    if cost * w > MAX_SCALED then
        fail('ERR COST * window is too large')
    end
    local partial = opts.PARTIAL ~= nil
    local now = now_ms()
    local s = adapt_read(keys[1])
    if not s or s.window ~= w then
        s = adapt_new(floor_, start, ceiling, w, now)
    end
    s.floor, s.ceiling = floor_, ceiling
    adapt_bounded(s)
    local increased = adapt_roll(s, now)
    adapt_refill(s, now)
    local burst = adapt_capacity(s) / w
    local bound = adapt_bound(s, now)
    local whole = adapt_whole(s, now)
    if bound then
        whole = min(whole, bound)
    end
    -- Back at its turn (TURN), admitted on a bucket not in debt: what it lacks, a debt.
    local turn = opts.TURN and s.level >= 0 and now >= s.at
    local granted = 0
    if partial then
        if whole >= 1 then
            granted = min(cost, whole)
        elseif turn and (not bound or bound >= 1) then
            granted = 1
        end
    elseif (s.level >= min(cost, burst) * w or turn) and now >= s.at and (not bound or cost <= bound) then
        granted = cost
    end
    local retry = -1
    if granted == 0 then
        local need = partial and 1 or min(cost, burst)
        retry = adapt_wait(s, need * w, now)
        if bound and bound < (partial and 1 or cost) then
            retry = max(retry, s.bound_until - now)
        end
        -- After those told to come back before it, then its tokens' time for the next one; the
        -- line never reaches past the state's keeping.
        retry = max(retry, s.queue_until - now)
        s.queue_until = min(now + retry + ceil_div(need * w, s.limit), now + 10 * w)
    else
        s.level = max(s.level - granted * w, -MAX_SCALED)
        s.used = min(s.used + granted, MAX_SCALED)
        if bound then
            s.bound_left = max(s.bound_left - granted, 0)
        end
    end
    local remaining = adapt_whole(s, now)
    bound = adapt_bound(s, now)
    if bound then
        remaining = min(remaining, bound)
    end
    local reply = { granted > 0 and 1 or 0, s.limit, remaining, retry, adapt_wait(s, adapt_capacity(s), now) }
    if partial then
        reply[6] = granted
    end
    if opts.RESERVE then
        reply[#reply + 1] = granted > 0
            and format('d:%d:%d:%d:%d:%d:%d:%s', floor_, start, ceiling, w, s.epoch_start, granted, reservation_key(keys[1]))
    end
    adapt_store(keys[1], s, now)
    return reply
end

-- ADAPT's settle (the module's adaptive::settle_reserved): `used` of what was reserved (f[6]) on a
-- limit of floor f[1], start f[2], ceiling f[3] and window f[4], in the epoch from f[5]. The unused
-- part back to the bucket (never past full, never while held) and out of that epoch's use; more
-- than reserved charged; a forgotten state started again when there is something to charge.
settle_adapt = function(key, f, used)
    local w, now = f[4], now_ms()
    local s = adapt_read(key)
    local present = s ~= nil
    if s and s.window ~= w then
        fail(WINDOW_DIFFERS)
    end
    s = s or adapt_new(f[1], f[2], f[3], w, now)
    adapt_roll(s, now)
    adapt_refill(s, now)
    local delta, applied = used - f[6], 0
    if delta > 0 then
        s.level = max(s.level - delta * w, -MAX_SCALED)
        s.used = min(s.used + delta, MAX_SCALED)
        if adapt_bound(s, now) then
            s.bound_left = max(s.bound_left - delta, 0)
        end
        applied = delta
    elseif delta < 0 then
        if s.epoch_start == f[5] then
            s.used = max(s.used + delta, 0)
        end
        local room = 0
        if now >= s.at then
            room = max(adapt_capacity(s) - s.level, 0)
        end
        local given = min(-delta * w, room)
        s.level = s.level + given
        applied = -ceil_div(given, w)
    end
    local remaining = adapt_whole(s, now)
    local bound = adapt_bound(s, now)
    if bound then
        remaining = min(remaining, bound)
    end
    if present or applied > 0 then
        adapt_store(key, s, now)
    end
    return { 1, s.limit, remaining, -1, adapt_wait(s, adapt_capacity(s), now), applied }
end

-- An integer from `least` to `most` named `name`, or the module's error for it.
local function report_value(text, name, least, most)
    local value = argument(text)
    if value == nil or value == BIG_NEGATIVE or (value ~= BIG and value < least) then
        fail('ERR ' .. name .. (least == 0 and ' must be an integer >= 0' or ' must be an integer >= 1'))
    end
    if value == BIG or value > most then
        fail('ERR ' .. name .. ' is too large')
    end
    return value
end

local function report(keys, args)
    if #args < 1 then
        fail("ERR wrong number of arguments for 'ratelimit.report' command")
    end
    local outcome = upper(args[1])
    if outcome ~= 'OK' and outcome ~= 'THROTTLED' then
        fail('ERR outcome must be OK or THROTTLED')
    end
    local opts = options(args, 2, REPORT_OPTIONS, 'RETRY, LIMIT, REMAINING, RESET or AGE')
    local retry = opts.RETRY and report_value(opts.RETRY, 'RETRY', 0, MAX_SPAN_MS)
    local limit = opts.LIMIT and report_value(opts.LIMIT, 'LIMIT', 1, MAX_SCALED)
    local remaining = opts.REMAINING and report_value(opts.REMAINING, 'REMAINING', 0, MAX_SCALED)
    local reset = opts.RESET and report_value(opts.RESET, 'RESET', 0, MAX_SPAN_MS)
    local age = opts.AGE and report_value(opts.AGE, 'AGE', 0, MAX_SPAN_MS)
    if remaining and not reset then
        fail('ERR syntax error: REMAINING needs RESET')
    elseif reset and not remaining then
        fail('ERR syntax error: RESET needs REMAINING')
    end
    if retry and outcome == 'OK' then
        fail('ERR syntax error: RETRY needs THROTTLED')
    end
    local s = adapt_read(keys[1])
    if not s then
        return false
    end
    local now = now_ms()
    adapt_roll(s, now)
    adapt_refill(s, now)
    if limit then
        s.stated = limit
        adapt_bounded(s)
    end
    if remaining then
        -- Until the provider's next token, its reset, or the epoch's end: whichever is first.
        local next_token = reset
        if s.stated > remaining then
            next_token = ceil_div(reset, s.stated - remaining)
        end
        s.bound_left, s.bound_until = remaining, now + min(reset, adapt_epoch(s), next_token)
    end
    local decreased = 0
    if outcome == 'THROTTLED' or remaining == 0 then
        -- Once per epoch for the burst that many saw; again for a call the last cut admitted and
        -- a provider that states nothing throttled: one that states what remains bounds the fleet.
        if s.cut == 0 or (outcome == 'THROTTLED' and not remaining and age and now - age > s.cut_at) then
            s.wmax = s.limit
            s.limit = max(idiv(s.limit * 7, 10), s.floor)
            s.earned, s.cut, s.cut_at, decreased = 0, 1, now, 1
        end
        s.level = min(s.level, 0)
    end
    if outcome == 'THROTTLED' and retry and now + retry > s.at then
        s.at = now + retry
    end
    adapt_store(keys[1], s, now)
    return { s.limit, decreased, max(s.at - now, 0) }
end


redis.register_function('ratelimit_hit', command(hit))
redis.register_function { function_name = 'ratelimit_peek', callback = command(peek), flags = { 'no-writes' } }
redis.register_function('ratelimit_hitall', command(hitall))
redis.register_function('ratelimit_slide', command(slide))
redis.register_function('ratelimit_acquire', command(acquire))
redis.register_function('ratelimit_release', command(release))
redis.register_function('ratelimit_renew', command(renew))
redis.register_function('ratelimit_gcra', command(gcra))
redis.register_function('ratelimit_settle', command(settle_reservation))
redis.register_function('ratelimit_adapt', command(adapt))
redis.register_function('ratelimit_report', command(report))
