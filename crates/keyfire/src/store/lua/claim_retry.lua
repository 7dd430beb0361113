#!lua flags=allow-oom
-- allow-oom: turns a queued attempt (its retry entry and attempt number) into a run's lease: it
-- removes about what it adds.
-- Claim the next attempt of a firing from the retry ZSET (a retry after a failure, a lease
-- takeover after a node died, a manual trigger, a dead-letter replay). Once: the ZREM is the
-- compare-and-set. The attempt number was granted when the entry was added (fencing) and
-- waits in the attempts hash; the claim turns it into the run's lease, the running ZSET's
-- member "<firing id>|<attempt>|<claimed ms>|<node>" (see claim.lua), and counts the run.
-- KEYS[1] job hash   KEYS[2] retry zset   KEYS[3] running zset   KEYS[4] attempts hash
-- KEYS[5] the job's ledger (skip records): an attempt dropped because the job is paused, or
--   refused by overlap forbid, is recorded there (`paused`, `overlap`; see ledger_lib.lua)
-- ARGV[1] firing id   ARGV[2] node id   ARGV[3] lease ms   ARGV[4] overlap policy   ARGV[5] change channel
-- ARGV[6] job id
-- ARGV[7] "<generation>.<version>" of the job the caller will run it with, or "" (no check):
--   an attempt never runs a version older than the job's (G4), so a caller whose cached spec
--   is behind (a change message it missed) is told to read the job again
-- ARGV[8] the ledger's bounds "<limit>|<max age ms>"
-- Reply: {1, now, attempt} claimed | {0, 'stale'} | {2, ms} early by ms
--        {3, version} the job changed: read it again (nothing written)
--        {7, running firing} skipped (overlap forbid) | {8, status} dropped: job paused or deleted
assert(#KEYS == 5 and #ARGV == 8, 'claim_retry: wrong arity')
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score then return {0, 'stale'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(score) > now then return {2, tonumber(score) - now} end
local fields = redis.call('HMGET', KEYS[1], 'status', 'active', 'runs', 'version', 'gen')
local status = fields[1]
-- The firing's instant, and Redis's now, as the ledger writes them.
local at_s, now_s = string.match(ARGV[1], ':(%d+)$'), string.format('%d', now)
if not status or status == 'paused' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[4], ARGV[1])
  if status then ledger_skip(KEYS[5], 'paused', at_s, at_s, '1', '', now_s, ARGV[8]) end
  return {8, status or 'deleted'}
end
if ARGV[7] ~= '' and (fields[5] or '0') .. '.' .. (fields[4] or '0') ~= ARGV[7] then
  return {3, fields[4] or '0'}
end
local active = fields[2]
local replaced = nil
if active and active ~= '' and ARGV[4] ~= 'allow' then
  local running = string.match(active, '^[^|]*')
  local lease = running ~= ARGV[1] and redis.call('ZSCORE', KEYS[3], active)
  if lease and tonumber(lease) > now then
    if ARGV[4] == 'forbid' then
      redis.call('ZREM', KEYS[2], ARGV[1])
      redis.call('HDEL', KEYS[4], ARGV[1])
      redis.call('HINCRBY', KEYS[1], 'skipped', 1)
      ledger_skip(KEYS[5], 'overlap', at_s, at_s, '1', running, now_s, ARGV[8])
      return {7, running}
    elseif ARGV[4] == 'replace' then
      replaced = running
    end
  end
end
-- The queued attempt's number (a bare number; a lease record's first field otherwise).
local queued = redis.call('HGET', KEYS[4], ARGV[1]) or '1'
local attempt = tonumber(string.match(queued, '^(%d+)')) or 1
local member = ARGV[1] .. '|' .. attempt .. '|' .. now .. '|' .. ARGV[2]
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), member)
redis.call('HSET', KEYS[1], 'active', member, 'runs', (tonumber(fields[3]) or 0) + 1)
if replaced then
  redis.call('SPUBLISH', ARGV[5], cjson.encode({op = 'cancel', id = ARGV[6], firing = replaced}))
end
return {1, now, attempt}
