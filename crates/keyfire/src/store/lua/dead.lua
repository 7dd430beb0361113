#!lua flags=allow-oom
-- allow-oom: a purge frees memory; a replay removes each dead letter before it queues its attempt
-- (a retry entry and an attempt number, smaller than the letter).
-- Replay or purge a job's dead letters (one by firing id, or all).
-- Replay queues each firing again as attempt 1 with the same firing id.
-- KEYS[1] dead letters list   KEYS[2] retry zset   KEYS[3] attempts hash   KEYS[4] job hash
-- ARGV[1] 'replay' | 'purge'   ARGV[2] firing id, or "" for all   ARGV[3] change channel   ARGV[4] job id
-- Reply: how many entries were replayed or purged; -1 when replaying for a job that is gone.
assert(#KEYS == 4 and #ARGV == 4, 'dead: wrong arity')
if ARGV[1] == 'replay' and redis.call('EXISTS', KEYS[4]) == 0 then return -1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for _, raw in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local ok, entry = pcall(cjson.decode, raw)
  local fid = ok and type(entry) == 'table' and entry.firing_id or nil
  if ARGV[2] == '' or fid == ARGV[2] then
    redis.call('LREM', KEYS[1], 1, raw)
    n = n + 1
    if ARGV[1] == 'replay' and fid and redis.call('HEXISTS', KEYS[3], fid) == 0 then
      redis.call('HSET', KEYS[3], fid, 1)
      redis.call('ZADD', KEYS[2], now, fid)
      redis.call('SPUBLISH', ARGV[3], cjson.encode({op = 'retry', id = ARGV[4], firing = fid, at = now}))
    end
  end
end
return n
