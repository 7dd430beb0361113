-- Claim the next attempt of a firing from the retry ZSET (a retry after a failure, a lease
-- takeover after a node died, a manual trigger, a dead-letter replay). Once: the ZREM is the
-- compare-and-set. The attempt number was granted when the entry was added (fencing); the
-- claim turns the queued attempt's record into the run's lease record,
-- "<attempt>:<claimed ms>:<node>" (see claim.lua).
-- KEYS[1] job hash   KEYS[2] retry zset   KEYS[3] running zset   KEYS[4] attempts hash
-- ARGV[1] firing id   ARGV[2] node id   ARGV[3] lease ms   ARGV[4] overlap policy   ARGV[5] change channel
-- ARGV[6] job id
-- Reply: {1, now, attempt} claimed | {0, 'stale'} | {2, ms} early by ms
--        {7, running firing} skipped (overlap forbid) | {8, status} dropped: job paused or deleted
assert(#KEYS == 4 and #ARGV == 6, 'claim_retry: wrong arity')
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score then return {0, 'stale'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(score) > now then return {2, tonumber(score) - now} end
local status = redis.call('HGET', KEYS[1], 'status')
if not status or status == 'paused' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[4], ARGV[1])
  return {8, status or 'deleted'}
end
local active = redis.call('HGET', KEYS[1], 'active')
local replaced = nil
if active and active ~= ARGV[1] then
  local lease = redis.call('ZSCORE', KEYS[3], active)
  if lease and tonumber(lease) > now then
    if ARGV[4] == 'forbid' then
      redis.call('ZREM', KEYS[2], ARGV[1])
      redis.call('HDEL', KEYS[4], ARGV[1])
      redis.call('HINCRBY', KEYS[1], 'skipped', 1)
      return {7, active}
    elseif ARGV[4] == 'replace' then
      replaced = active
    end
  end
end
-- The queued attempt's number (a bare number; a lease record's first field otherwise).
local queued = redis.call('HGET', KEYS[4], ARGV[1]) or '1'
local attempt = tonumber(string.match(queued, '^(%d+)')) or 1
redis.call('HSET', KEYS[4], ARGV[1], attempt .. ':' .. now .. ':' .. ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[1], 'active', ARGV[1])
if replaced then
  redis.call('PUBLISH', ARGV[5], cjson.encode({op = 'cancel', id = ARGV[6], firing = replaced}))
end
return {1, now, attempt}
