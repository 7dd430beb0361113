#!lua flags=allow-oom
-- allow-oom: a pause removes the job's due entry and sentinel; a resume writes them back, and
-- rewrites fields of a job that exists.
-- Pause or resume a job, atomically (G4). A paused job keeps its definition and has no
-- pending firing, so no claim can succeed for it.
-- A pause that finds the job's instant due and not yet claimed drops it (the resume schedules
-- from the pause on): the job's ledger records it `paused` (ledger_lib.lua), so that it is not
-- lost without a word.
-- KEYS[1] job hash   KEYS[2] due zset   KEYS[3] sentinel of the firing (pause: current, resume: new)
-- KEYS[4] the job's ledger
-- ARGV[1] job id   ARGV[2] 'pause' | 'resume'   ARGV[3] next firing ms on resume ("" none): the first
--         firing after the pause began, so the claim applies the job's misfire policy to the
--         firings the pause skipped
-- ARGV[4] change channel   ARGV[5] sentinel horizon ms   ARGV[6] the ledger's bounds
--   "<limit>|<max age ms>"
-- Reply: {changed (0|1), status after, next}; status 'missing' when there is no such job.
assert(#KEYS == 4 and #ARGV == 6, 'pause: wrong arity')
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {0, 'missing', ''} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[2] == 'pause' then
  if status ~= 'active' then return {0, status, ''} end
  -- `next` mirrors the due entry (claim.lua's compare-and-set reads it).
  local due = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if due and tonumber(due) <= now then
    local at = string.format('%d', tonumber(due))
    ledger_skip(KEYS[4], 'paused', at, at, '1', 'due when paused', string.format('%d', now), ARGV[6])
  end
  redis.call('HSET', KEYS[1], 'status', 'paused', 'next', '', 'updated', now, 'paused_at', now)
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('DEL', KEYS[3])
  redis.call('SPUBLISH', ARGV[4], cjson.encode({op = 'pause', id = ARGV[1]}))
  return {1, 'paused', ''}
end
if status ~= 'paused' then return {0, status, redis.call('HGET', KEYS[1], 'next') or ''} end
-- A resume starts the count of failed firings in a row (pause_after_failures) again.
redis.call('HDEL', KEYS[1], 'streak', 'stopped')
local nxt = ARGV[3]
if nxt == '' then
  redis.call('HSET', KEYS[1], 'status', 'finished', 'next', '', 'updated', now, 'resumed_at', now)
  redis.call('SPUBLISH', ARGV[4], cjson.encode({op = 'resume', id = ARGV[1]}))
  return {1, 'finished', ''}
end
-- `resumed_at`: claim.lua records the late firings from the pause to here as `paused` in the
-- job's ledger.
redis.call('HSET', KEYS[1], 'status', 'active', 'next', nxt, 'updated', now, 'resumed_at', now)
redis.call('ZADD', KEYS[2], nxt, ARGV[1])
if tonumber(nxt) > now and tonumber(nxt) <= now + tonumber(ARGV[5]) then
  redis.call('SET', KEYS[3], '1', 'PXAT', nxt)
end
local version = redis.call('HGET', KEYS[1], 'version')
redis.call('SPUBLISH', ARGV[4], cjson.encode({op = 'resume', id = ARGV[1], version = tonumber(version), next = nxt}))
return {1, 'active', nxt}
