-- Ask a limit key for a slot before a firing runs: at most `rate` grants in any window of
-- 1,000 ms (a sliding log of grant instants) and at most `in_flight` slots held at once (a
-- ZSET of firing ids scored by the slot's expiry: a dead node's slots come back after its
-- lease, or at once when its run is taken over or completed, see limit_release.lua). All
-- keys share the limit key's own hash tag, so this works on Redis Cluster.
-- Place in line: firings waiting for a key are ordered by their scheduled instant (the
-- waiters ZSET); a firing is granted only if fewer firings wait ahead of it than there are
-- free slots, so a firing held back keeps its place and a later one cannot overtake it.
-- A waiter that does not come back within its grace is dropped from the line (its firing
-- is not lost: it is still queued on its own shard; it takes its place again when it asks).
-- KEYS[1] conf hash (rate, in_flight, avg)   KEYS[2] in-flight zset   KEYS[3] grant log zset
-- KEYS[4] waiters zset (firing id -> scheduled ms)   KEYS[5] waiters' deadlines zset
-- ARGV[1] firing id   ARGV[2] scheduled instant ms   ARGV[3] slot lease ms
-- ARGV[4] grace ms: how long past its suggested retry a waiter keeps its place
-- Reply: {1, in flight, held} granted | {2} the key has no limit (nothing tracked)
--        {0, wait ms, in flight, held, reason ('rate' | 'in_flight')} denied: ask again
--        after wait ms
assert(#KEYS == 5 and #ARGV == 4, 'limit_acquire: wrong arity')
local conf = redis.call('HMGET', KEYS[1], 'rate', 'in_flight', 'avg')
local rate, cap = tonumber(conf[1]) or 0, tonumber(conf[2]) or 0
if rate <= 0 and cap <= 0 then return {2} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fid, lease, grace = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])

-- Slots whose lease ran out (their node died or hung) and waiters that did not come back.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, 100)
if #gone > 0 then
  redis.call('ZREM', KEYS[4], unpack(gone))
  redis.call('ZREM', KEYS[5], unpack(gone))
end

-- Asking again for a slot it holds (the same firing): keep it, renewed.
if redis.call('ZSCORE', KEYS[2], fid) then
  redis.call('ZADD', KEYS[2], now + lease, fid)
  redis.call('ZREM', KEYS[4], fid)
  redis.call('ZREM', KEYS[5], fid)
  return {1, redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[4])}
end

local huge = 1e15
local used, busy = 0, redis.call('ZCARD', KEYS[2])
local free_rate, free_cap = huge, huge
if rate > 0 then
  -- A grant at t counts while t > now - 1000.
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 1000)
  used = redis.call('ZCARD', KEYS[3])
  free_rate = math.max(rate - used, 0)
end
if cap > 0 then free_cap = math.max(cap - busy, 0) end
local free = math.min(free_rate, free_cap)

redis.call('ZADD', KEYS[4], tonumber(ARGV[2]), fid)
local rank = redis.call('ZRANK', KEYS[4], fid)
if rank < free then
  redis.call('ZREM', KEYS[4], fid)
  redis.call('ZREM', KEYS[5], fid)
  redis.call('ZADD', KEYS[2], now + lease, fid)
  if rate > 0 then redis.call('ZADD', KEYS[3], now, now .. ':' .. fid) end
  return {1, busy + 1, redis.call('ZCARD', KEYS[4])}
end

-- Denied: suggest when this waiter's turn should come, so that a long line is asked again
-- about once per waiter rather than polled.
local at, reason = now + 1, 'in_flight'
if rank >= free_rate then
  -- Rate slots open in this order: the free ones now (taken by the first waiters), then
  -- one as each logged grant leaves the window (oldest first), then the same pattern a
  -- second later, and so on.
  reason = 'rate'
  local k = rank - free_rate
  local idx, round = k % rate, math.floor(k / rate)
  local base = now + 1000
  if idx < used then
    local e = redis.call('ZRANGE', KEYS[3], idx, idx, 'WITHSCORES')
    if e[2] then base = tonumber(e[2]) + 1000 end
  end
  at = base + 1000 * round
end
if cap > 0 and rank >= free_cap then
  -- In-flight slots open as runs end: about one average run per `in_flight` waiters ahead.
  local avg = tonumber(conf[3]) or 20
  local turn = now + math.ceil(math.max(avg, 2) * (math.floor((rank - free_cap) / cap) + 1))
  if turn > at then at, reason = turn, 'in_flight' end
end
redis.call('ZADD', KEYS[5], at + grace, fid)
return {0, at - now, busy, redis.call('ZCARD', KEYS[4]), reason}
