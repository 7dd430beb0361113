#!lua flags=allow-oom
-- allow-oom: it drops expired slots, stale waiters and grants older than the window before it adds;
-- slots are capped by in_flight, grants by rate, and waiters are the firings claimed and held back
-- for this key (each dropped after its grace).
-- Ask a limit key for a slot before a firing runs. Bounds, for the whole cluster:
-- - rate: at most `rate` grants in any window of 1,000 ms (a sliding log of grant instants),
--   paced: at most `burst` at once (default: a tenth of `rate`), then one every 1000 / rate
--   ms (a GCRA: `tat` is the theoretical time of the next grant), so a long line reaches
--   its target evenly;
-- - in_flight: at most `in_flight` slots held at once (a ZSET of firing ids scored by the
--   slot's expiry: a dead node's slots come back after its lease, or at once when its run
--   is taken over or completed, see limit_release.lua).
-- All keys share the limit key's own hash tag, so this works on Redis Cluster.
-- Place in line: firings waiting for a key are ordered by their scheduled instant (the
-- waiters ZSET, scored by the instant in ms since 2020-09-13, 1.6e12 ms after the epoch, so
-- that a double keeps a fraction to 1e-4), and firings of the same instant by when they
-- first asked (the fraction: ms late when joining, up to 8,999, / 10,000); a firing is
-- granted only if fewer firings wait
-- ahead of it than there are free slots, so a firing held back keeps its place and one
-- that came later cannot overtake it. A denied firing is given its turn (when, by the
-- line, a slot should be free for it); once its turn has come, a free slot is its own even
-- if firings ahead of it in line have not come back yet (they are late for their turns,
-- and take the next slots when they come): one late waiter does not hold up the line.
-- A waiter that does not come back within its grace past its turn is dropped from the line
-- (its firing is not lost: it is still queued on its own shard; it takes its place again
-- when it asks).
-- KEYS[1] conf hash (rate, burst, in_flight, avg, tat)   KEYS[2] in-flight zset
-- KEYS[3] grant log zset   KEYS[4] waiters zset (firing id -> scheduled ms)
-- KEYS[5] waiters' turns zset (ms)
-- ARGV[1] slot lease ms   ARGV[2] grace ms: how long past its turn a waiter keeps its place
-- then per firing asking, in order: ARGV[2i+1] firing id   ARGV[2i+2] scheduled instant ms
-- Reply: five values per firing:
--        {1, in flight, held, 0, ''} granted | {2, 0, 0, 0, ''} the key has no limit
--        (nothing tracked) | {0, wait ms, in flight, held, reason ('rate' | 'in_flight')}
--        denied: ask again after wait ms
assert(#KEYS == 5 and #ARGV >= 4 and #ARGV % 2 == 0, 'limit_acquire: wrong arity')
local n = (#ARGV - 2) / 2
local conf = redis.call('HMGET', KEYS[1], 'rate', 'in_flight', 'avg', 'burst', 'tat')
local rate, cap = tonumber(conf[1]) or 0, tonumber(conf[2]) or 0
local reply = {}
if rate <= 0 and cap <= 0 then
  for _ = 1, n do
    for _, v in ipairs({2, 0, 0, 0, ''}) do reply[#reply + 1] = v end
  end
  return reply
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease, grace = tonumber(ARGV[1]), tonumber(ARGV[2])

-- Slots whose lease ran out (their node died or hung) and waiters that did not come back.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - grace, 'LIMIT', 0, 100)
if #gone > 0 then
  redis.call('ZREM', KEYS[4], unpack(gone))
  redis.call('ZREM', KEYS[5], unpack(gone))
end

local huge = 1e15
local used, busy = 0, redis.call('ZCARD', KEYS[2])
local held = redis.call('ZCARD', KEYS[4])
-- Pacing: one grant every `gap` ms; `burst` may go at once (up to `tol` ms ahead of `tat`).
local gap, tol, tat, burst = 0, 0, now, 0
if rate > 0 then
  -- A grant at t counts while t > now - 1000.
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 1000)
  used = redis.call('ZCARD', KEYS[3])
  -- By default a tenth of a second's grants may go at once.
  burst = math.min(tonumber(conf[4]) or math.max(1, math.ceil(rate / 10)), rate)
  gap = 1000 / rate
  tol = (burst - 1) * gap
  tat = math.max(tonumber(conf[5]) or now, now)
end
local avg = math.max(tonumber(conf[3]) or 20, 2)
local granted_any = false

local function ask(fid, sched)
  -- Asking again for a slot it holds (the same firing): keep it, renewed.
  if redis.call('ZSCORE', KEYS[2], fid) then
    redis.call('ZADD', KEYS[2], now + lease, fid)
    held = held - redis.call('ZREM', KEYS[4], fid)
    redis.call('ZREM', KEYS[5], fid)
    return {1, busy, held, 0, ''}
  end
  local free_rate, free_cap = huge, huge
  if rate > 0 then
    -- Grants the pacing allows now: one for each `gap` that `tat - tol` is behind now.
    local paced = math.floor((now + tol - tat) / gap) + 1
    free_rate = math.max(math.min(rate - used, paced, burst), 0)
  end
  if cap > 0 then free_cap = math.max(cap - busy, 0) end
  local free = math.min(free_rate, free_cap)

  -- NX: a firing asking again keeps the place it took when it first asked.
  local late = math.min(math.max(now - sched, 0), 8999)
  held = held + redis.call('ZADD', KEYS[4], 'NX', sched - 1.6e12 + late / 10000, fid)
  local rank = redis.call('ZRANK', KEYS[4], fid)
  local turn = tonumber(redis.call('ZSCORE', KEYS[5], fid) or '')
  if rank < free or (free > 0 and turn and turn <= now) then
    held = held - redis.call('ZREM', KEYS[4], fid)
    redis.call('ZREM', KEYS[5], fid)
    redis.call('ZADD', KEYS[2], now + lease, fid)
    busy = busy + 1
    if rate > 0 then
      redis.call('ZADD', KEYS[3], now, now .. ':' .. fid)
      used = used + 1
      tat = tat + gap
      granted_any = true
    end
    return {1, busy, held, 0, ''}
  end

  -- Denied: suggest when this waiter's turn should come, so that a long line is asked
  -- again about once per waiter rather than polled. The i-th waiter in line (0 first):
  -- - in flight: slots open as runs end, about one average run per `in_flight` waiters:
  --   not before now + avg * (floor((i - free_cap) / cap) + 1);
  -- - rate, paced: the i-th next grant is at tat - tol + i * gap;
  -- - rate, window: the first `rate` waiters take, in order, the free slots (now) and then
  --   the slots of the logged grants as they leave the window (oldest first); waiter
  --   i + rate takes the slot that waiter i's grant frees a second after it.
  local at, reason = now + 1, 'in_flight'
  if cap > 0 and rank >= free_cap then
    at = now + math.ceil(avg * (math.floor((rank - free_cap) / cap) + 1))
  end
  if rate > 0 and rank >= free_rate then
    local by_rate = math.ceil(tat - tol + rank * gap)
    local idx, round = rank % rate, math.floor(rank / rate)
    local slot = now
    if idx >= rate - used then
      local i = idx - (rate - used)
      local e = redis.call('ZRANGE', KEYS[3], i, i, 'WITHSCORES')
      if e[2] then slot = tonumber(e[2]) + 1000 end
    end
    by_rate = math.max(by_rate, slot + 1000 * round)
    if by_rate >= at then at, reason = by_rate, 'rate' end
  end
  at = math.max(at, now + 1)
  redis.call('ZADD', KEYS[5], at, fid)
  return {0, at - now, busy, held, reason}
end

for i = 1, n do
  local r = ask(ARGV[2 * i + 1], tonumber(ARGV[2 * i + 2]))
  for _, v in ipairs(r) do reply[#reply + 1] = v end
end
if granted_any then redis.call('HSET', KEYS[1], 'tat', string.format('%.3f', tat)) end
return reply
