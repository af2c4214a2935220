#!lua name=ratelimit

-- The module's fixed-window commands as a Redis Functions library, for servers where no module can
-- be loaded (managed Redis and Valkey): the same arguments, replies, error texts and stored values
-- as RATELIMIT.HIT, RATELIMIT.PEEK and RATELIMIT.HITALL, proven by tests/functions.rs.
--
--   FCALL ratelimit_hit 1 key limit window [COST cost] [MS]
--   FCALL_RO ratelimit_peek 1 key limit [COST cost]
--   FCALL ratelimit_hitall numkeys key [key ...] limit window [limit window ...] [COST cost] [MS]
--
-- Lua numbers are doubles, exact only up to 2^53: arguments are validated on their text as the
-- module validates them, and a valid value the library cannot compute exactly gets one error of its
-- own (BEYOND) instead of a wrong number.

local EXACT = 2 ^ 53 - 1
local MAX_WINDOW_MS = '4611686018427387903' -- i64::MAX / 2, the module's bound
local BEYOND = 'ERR ratelimit library: a number above 2^53 cannot be computed exactly here; use the module'
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local NOT_INTEGER = 'ERR value is not an integer or out of range'

-- Stands for a valid integer beyond EXACT: the module accepts it, the library cannot compute it.
local BIG = {}

-- Errors meant for the caller are raised as { reply = text } and answered by `command` below; any
-- other error (a failed redis.call) goes on as it is.
local function fail(text)
    error({ reply = text })
end

-- `value`, or the caller's error `text` when the check before failed.
local function must(value, text)
    if value == nil then
        fail(text)
    end
    return value
end

-- A registered function's body, its caller errors turned into error replies.
local function command(body)
    return function(keys, args)
        local ok, result = pcall(body, keys, args)
        if ok then
            return result
        end
        if type(result) == 'table' and result.reply then
            return redis.error_reply(result.reply)
        end
        error(result)
    end
end

-- A decimal integer as Redis reads one (string2ll: '-', digits, no '+', no leading zero, 64-bit):
-- its value, BIG (negative flagged) beyond EXACT, or nil.
local function integer(text)
    if text == '0' then
        return 0
    end
    local sign, digits = string.match(text, '^(%-?)([1-9]%d*)$')
    if not digits or #digits > 19 then
        return nil
    end
    if #digits == 19 and digits > (sign == '-' and '9223372036854775808' or '9223372036854775807') then
        return nil
    end
    local value = tonumber(text)
    if math.abs(value) > EXACT then
        return sign == '-' and -math.huge or BIG
    end
    return value
end

-- An integer >= 1 (BIG allowed); else the module's error for `name`.
local function positive(text, name)
    local value = integer(text)
    if value == nil or (value ~= BIG and value < 1) then
        fail('ERR ' .. name .. ' must be an integer >= 1')
    end
    return value
end

-- COST from the options: 1 by default, else an integer >= 1 (BIG allowed).
local function cost_of(opts)
    return opts.COST and positive(opts.COST, 'COST') or 1
end

-- The options after the positional arguments, as the module reads them: names in any case, in any
-- order, each at most once; `valued` ones take the next argument.
local function options(args, from, spec, known)
    local found = {}
    local i = from
    while i <= #args do
        local word = string.upper(args[i])
        local opt
        for _, o in ipairs(spec) do
            if word == o.name then
                opt = o
            end
        end
        if not opt then
            fail('ERR syntax error: unknown option (expected ' .. known .. ')')
        end
        if found[opt.name] ~= nil then
            fail('ERR syntax error: ' .. opt.name .. ' given more than once')
        end
        if opt.valued then
            i = i + 1
            if i > #args then
                fail('ERR syntax error: ' .. opt.name .. ' needs a value')
            end
            found[opt.name] = args[i]
        else
            found[opt.name] = true
        end
        i = i + 1
    end
    return found
end

-- A window in ms from its text, as the module bounds it (2^62 ms); BIG where the module accepts a
-- window the library cannot add to the clock exactly.
local function window_ms(text, in_ms)
    local window = positive(text, 'window')
    if window == BIG then
        -- Beyond 2^53 seconds is beyond 2^62 ms; in ms compare the text with the bound.
        if not in_ms or #text > #MAX_WINDOW_MS or (#text == #MAX_WINDOW_MS and text > MAX_WINDOW_MS) then
            fail('ERR window is too large')
        end
        return BIG
    end
    if not in_ms then
        if window > 4611686018427387 then
            fail('ERR window is too large')
        end
        window = window * 1000
    end
    return window > EXACT and BIG or window
end

local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The counter at `key`: count (0 if missing), whether it exists, its absolute expiry in ms (nil if
-- none).
local function read(key)
    local value = redis.pcall('GET', key)
    if type(value) == 'table' and value.err then
        fail(WRONGTYPE)
    end
    if not value then
        return 0, false, nil
    end
    local count = must(integer(value), NOT_INTEGER)
    if count == BIG or count == -math.huge then
        fail(BEYOND)
    end
    local expires_at = redis.call('PEXPIRETIME', key)
    return count, true, (expires_at >= 0 and expires_at or nil)
end

local function fits(count, cost, limit)
    return count + cost <= limit
end

-- The module's `settle`: one counter's outcome and writes for a hit admitted (`admit`) or not.
local function settle(key, limit, window, cost, count, exists, expires_at, now, admit)
    local admitted = admit and fits(count, cost, limit)
    local final = admitted and count + cost or count
    local set_expiry = nil
    if expires_at == nil and (exists or admitted) then
        set_expiry = now + window
    end
    local final_expiry = expires_at or set_expiry
    if admitted and set_expiry then
        redis.call('SET', key, string.format('%d', final), 'PXAT', set_expiry)
    elseif admitted then
        redis.call('INCRBY', key, cost)
    elseif set_expiry then
        redis.call('PEXPIREAT', key, set_expiry)
    end
    local remaining = math.max(limit - final, 0)
    local reset = final_expiry and math.max(final_expiry - now, 0) or 0
    return admitted, final, remaining, reset
end

local function hit(keys, args)
    if #args < 2 then
        fail("ERR wrong number of arguments for 'ratelimit.hit' command")
    end
    local limit = positive(args[1], 'limit')
    local opts = options(args, 3, { { name = 'COST', valued = true }, { name = 'MS' } }, 'COST or MS')
    local window = window_ms(args[2], opts.MS)
    local cost = cost_of(opts)
    local count, exists, expires_at = read(keys[1])
    local now = now_ms()
    if limit == BIG or cost == BIG or window == BIG or now + window > EXACT then
        fail(BEYOND)
    end
    local admitted, final, remaining, reset = settle(keys[1], limit, window, cost, count, exists, expires_at, now, true)
    return { admitted and 1 or 0, final, remaining, reset }
end

local function peek(keys, args)
    if #args < 1 then
        fail("ERR wrong number of arguments for 'ratelimit.peek' command")
    end
    local limit = positive(args[1], 'limit')
    local cost = cost_of(options(args, 2, { { name = 'COST', valued = true } }, 'COST'))
    local count, exists, expires_at = read(keys[1])
    if limit == BIG or cost == BIG then
        fail(BEYOND)
    end
    local now = now_ms()
    local reset = 0
    if exists then
        reset = expires_at and math.max(expires_at - now, 0) or -1
    end
    return { fits(count, cost, limit) and 1 or 0, count, math.max(limit - count, 0), reset }
end

local function hitall(keys, args)
    -- The module's command has arity -5 (numkeys and three more), which Redis checks first.
    if #keys + #args < 3 then
        fail("ERR wrong number of arguments for 'ratelimit.hitall' command")
    end
    if #keys < 1 then
        fail('ERR numkeys must be an integer >= 1')
    end
    local seen = {}
    for _, key in ipairs(keys) do
        if seen[key] then
            fail('ERR each key may be given only once')
        end
        seen[key] = true
    end
    local limits = {}
    for i = 1, #keys do
        if not args[2 * i - 1] or not args[2 * i] then
            fail("ERR wrong number of arguments for 'ratelimit.hitall' command")
        end
        limits[i] = { limit = positive(args[2 * i - 1], 'limit'), window_text = args[2 * i] }
    end
    local opts = options(args, 2 * #keys + 1, { { name = 'COST', valued = true }, { name = 'MS' } }, 'COST or MS')
    local cost = cost_of(opts)
    for _, l in ipairs(limits) do
        l.window = window_ms(l.window_text, opts.MS)
    end
    -- Every key is read before anything is written: an error on one changes none.
    local counters = {}
    for i, key in ipairs(keys) do
        local count, exists, expires_at = read(key)
        counters[i] = { count = count, exists = exists, expires_at = expires_at }
    end
    local now = now_ms()
    if cost == BIG then
        fail(BEYOND)
    end
    for _, l in ipairs(limits) do
        if l.limit == BIG or l.window == BIG or now + l.window > EXACT then
            fail(BEYOND)
        end
    end
    local admit = true
    for i, l in ipairs(limits) do
        admit = admit and fits(counters[i].count, cost, l.limit)
    end
    local reply = { admit and 1 or 0 }
    for i, key in ipairs(keys) do
        local c, l = counters[i], limits[i]
        local _, final, remaining, reset = settle(key, l.limit, l.window, cost, c.count, c.exists, c.expires_at, now, admit)
        reply[i + 1] = { final, remaining, reset }
    end
    return reply
end

redis.register_function('ratelimit_hit', command(hit))
redis.register_function { function_name = 'ratelimit_peek', callback = command(peek), flags = { 'no-writes' } }
redis.register_function('ratelimit_hitall', command(hitall))
