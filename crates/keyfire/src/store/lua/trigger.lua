-- No allow-oom: it queues a new firing. At maxmemory Redis refuses it at its first write, before it
-- wrote anything (507 redis_full).
-- Run a job once now, without moving its schedule: queue a firing at Redis's now as attempt 1.
-- Overlap policies apply to it like to any firing.
-- KEYS[1] job hash   KEYS[2] retry zset   KEYS[3] attempts hash   KEYS[4] due zset
-- ARGV[1] job id   ARGV[2] change channel
-- Reply: the firing id, or false when there is no such job.
assert(#KEYS == 4 and #ARGV == 2, 'trigger: wrong arity')
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local t = redis.call('TIME')
local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A firing id names one firing: step past any instant already in use for this job (its
-- pending firing, a queued attempt, the last firing claimed, the latest run's firing).
local due = redis.call('ZSCORE', KEYS[4], ARGV[1])
local job = redis.call('HMGET', KEYS[1], 'last', 'active')
local last = tonumber(job[1] or '0')
local running = string.match(job[2] or '', '^[^|]*')
while (due and tonumber(due) == at) or redis.call('HEXISTS', KEYS[3], ARGV[1] .. ':' .. at) == 1
    or last == at or running == ARGV[1] .. ':' .. at do
  at = at + 1
end
local fid = ARGV[1] .. ':' .. at
redis.call('HSET', KEYS[3], fid, 1)
redis.call('ZADD', KEYS[2], at, fid)
redis.call('HINCRBY', KEYS[1], 'triggered', 1)
redis.call('SPUBLISH', ARGV[2], cjson.encode({op = 'retry', id = ARGV[1], firing = fid, at = at}))
return fid
