-- Take over a run whose lease expired (its node died, hung, or lost Redis): grant the next
-- attempt and queue it for any node, or move the firing to the dead letters when its
-- attempts are used up. Fencing: the old attempt can no longer record an outcome.
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] retry zset   KEYS[4] job hash
-- KEYS[5] dead letters list   KEYS[6] lock   KEYS[7] run history list
-- ARGV[1] firing id   ARGV[2] max attempts   ARGV[3] dead-letter limit   ARGV[4] dead-letter entry JSON
-- ARGV[5] history limit   ARGV[6] the firing's scheduled instant ms
-- Reply: {0} nothing to do | {1, next attempt} queued | {2, attempts} dead
assert(#KEYS == 7 and #ARGV == 6, 'recover: wrong arity')
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return {0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(score) > now then return {0} end
redis.call('ZREM', KEYS[1], ARGV[1])
-- The lock holds "<node>:<attempt>" of the run that was lost (if it has not expired yet).
local holder = redis.call('GET', KEYS[6]) or ''
local node = string.match(holder, '^(.*):%d+$') or ''
redis.call('DEL', KEYS[6])
if redis.call('HGET', KEYS[4], 'active') == ARGV[1] then redis.call('HDEL', KEYS[4], 'active') end
local attempt = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '1')
if redis.call('EXISTS', KEYS[4]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return {0}
end
redis.call('HINCRBY', KEYS[4], 'runs', 1)
redis.call('HINCRBY', KEYS[4], 'failures', 1)
local fate = 'retry'
if attempt >= tonumber(ARGV[2]) then fate = 'dead' end
redis.call('LPUSH', KEYS[7], cjson.encode({
  firing_id = ARGV[1], scheduled_ms = tonumber(ARGV[6]), attempt = attempt, node = node,
  claimed_ms = 0, started_ms = 0, outcome = 'lost', fate = fate, finished_ms = now,
  error = 'lease expired: the node died, hung or lost Redis mid-run'}))
redis.call('LTRIM', KEYS[7], 0, tonumber(ARGV[5]) - 1)
if fate == 'dead' then
  local dead = cjson.decode(ARGV[4])
  dead.attempts = attempt
  dead.failed_ms = now
  redis.call('LPUSH', KEYS[5], cjson.encode(dead))
  redis.call('LTRIM', KEYS[5], 0, tonumber(ARGV[3]) - 1)
  redis.call('HINCRBY', KEYS[4], 'dead', 1)
  redis.call('HDEL', KEYS[2], ARGV[1])
  return {2, attempt}
end
redis.call('HSET', KEYS[2], ARGV[1], attempt + 1)
redis.call('ZADD', KEYS[3], now, ARGV[1])
return {1, attempt + 1}
