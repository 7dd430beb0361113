#!lua flags=allow-oom
-- allow-oom: gives a run's lease back and queues the same attempt (a retry entry and an attempt
-- number for the lease it removes); a compact task is expanded once.
-- Hold back claimed firings that their limit key denied: queue the same attempt again in
-- the retry zset, due when the limiter suggested, without counting a run or a failure (the
-- claim counted a run: it is taken back, the next claim counts it again). Fenced by the
-- lease like complete.lua: the running zset's member "<firing id>|<attempt>|<claimed
-- ms>|<node>" (see claim.lua) must be this node's. Only the lease is given up; the firing
-- keeps its place in the limit key's line (its waiters zset).
-- A compact task is expanded into its job hash first (task_lib.lua): the queued attempt's
-- claim (claim_retry.lua) works on job hashes.
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] retry zset   KEYS[4] due zset
-- KEYS[5] jobs index   KEYS[6] compact task counter
-- then per firing i (base b = 6 + 3 * (i - 1)): KEYS[b+1] its job hash
--   KEYS[b+2] its compact bucket hash   KEYS[b+3] its run history list
-- ARGV[1] node id   then per firing i (base a = 1 + 5 * (i - 1)):
--   ARGV[a+1] job id   ARGV[a+2] firing id   ARGV[a+3] attempt   ARGV[a+4] claimed ms
--   ARGV[a+5] wait ms
-- Reply: per firing, the instant its attempt is due (held), or 0 (fenced: the run is no
-- longer this node's)
local n = (#KEYS - 6) / 3
assert(n >= 1 and n == math.floor(n) and #ARGV == 1 + 5 * n, 'limit_hold: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function hold(job, bucket, runs, id, fid, attempt, claimed, wait)
  local member = fid .. '|' .. attempt .. '|' .. claimed .. '|' .. ARGV[1]
  -- Expanded while its lease is still there (the expansion names its run).
  expand_task(job, bucket, KEYS[4], KEYS[1], runs, KEYS[5], KEYS[6], id)
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
  local b = 6 + 3 * (i - 1)
  local a = 1 + 5 * (i - 1)
  reply[i] = hold(KEYS[b + 1], KEYS[b + 2], KEYS[b + 3], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3],
    ARGV[a + 4], ARGV[a + 5])
end
return reply
