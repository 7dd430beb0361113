-- Hold back claimed firings that their limit key denied: queue the same attempt again in
-- the retry zset, due when the limiter suggested, without counting a run or a failure (the
-- claim counted a run: it is taken back, the next claim counts it again). Fenced by the
-- lease like complete.lua: the running zset's member "<firing id>|<attempt>|<claimed
-- ms>|<node>" (see claim.lua) must be this node's. Only the lease is given up; the firing
-- keeps its place in the limit key's line (its waiters zset).
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] retry zset
-- then per firing i: KEYS[3+i] its job hash
-- ARGV[1] node id   then per firing i (base a = 1 + 4 * (i - 1)):
--   ARGV[a+1] firing id   ARGV[a+2] attempt   ARGV[a+3] claimed ms   ARGV[a+4] wait ms
-- Reply: per firing, the instant its attempt is due (held), or 0 (fenced: the run is no
-- longer this node's)
local n = #KEYS - 3
assert(n >= 1 and #ARGV == 1 + 4 * n, 'limit_hold: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function hold(job, fid, attempt, claimed, wait)
  local member = fid .. '|' .. attempt .. '|' .. claimed .. '|' .. ARGV[1]
  if redis.call('ZREM', KEYS[1], member) == 0 then return 0 end
  local due = now + math.max(tonumber(wait), 0)
  redis.call('HSET', KEYS[2], fid, attempt)
  redis.call('ZADD', KEYS[3], due, fid)
  local fields = redis.call('HMGET', job, 'active', 'runs')
  if fields[1] == member then redis.call('HDEL', job, 'active') end
  if tonumber(fields[2]) and tonumber(fields[2]) > 0 then
    redis.call('HINCRBY', job, 'runs', -1)
  end
  return due
end

local reply = {}
for i = 1, n do
  local a = 1 + 4 * (i - 1)
  reply[i] = hold(KEYS[3 + i], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4])
end
return reply
