-- Hold back claimed firings that their limit key denied: queue the same attempt again in
-- the retry zset, due when the limiter suggested, without counting a run or a failure.
-- Fenced like complete.lua: the lease record must name this node and attempt. Only the
-- lease is given up; the firing keeps its place in the limit key's line (its waiters zset).
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] retry zset
-- then per firing i: KEYS[3+i] its job hash
-- ARGV[1] node id   then per firing i (base a = 1 + 3 * (i - 1)):
--   ARGV[a+1] firing id   ARGV[a+2] attempt   ARGV[a+3] wait ms
-- Reply: per firing, the instant its attempt is due (held), or 0 (fenced: the run is no
-- longer this node's)
local n = #KEYS - 3
assert(n >= 1 and #ARGV == 1 + 3 * n, 'limit_hold: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function hold(job, fid, attempt, wait)
  local cur = redis.call('HGET', KEYS[2], fid)
  if not cur then return 0 end
  local held, node = string.match(cur, '^(%d+):%d+:(.*)$')
  if held ~= attempt or node ~= ARGV[1] then return 0 end
  if redis.call('ZREM', KEYS[1], fid) == 0 then return 0 end
  local due = now + math.max(tonumber(wait), 0)
  redis.call('HSET', KEYS[2], fid, attempt)
  redis.call('ZADD', KEYS[3], due, fid)
  if redis.call('HGET', job, 'active') == fid then redis.call('HDEL', job, 'active') end
  return due
end

local reply = {}
for i = 1, n do
  local a = 1 + 3 * (i - 1)
  reply[i] = hold(KEYS[3 + i], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
end
return reply
