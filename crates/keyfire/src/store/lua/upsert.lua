-- No allow-oom: creating a job is refused at maxmemory at its first write (the dedup key's SET or
-- the generation's INCR), before it wrote anything (507 redis_full), and so is changing a compact
-- task (its expansion's HSET). Changing a job hash starts with the DEL of its sentinel key, and
-- Redis lets a script that wrote once finish: that change runs (it rewrites the job's fields).
-- Create or replace a job, and schedule its next firing, atomically (G4).
-- KEYS[1] job hash   KEYS[2] due zset   KEYS[3] jobs index
-- KEYS[4] sentinel of the next firing the caller read (deleted)   KEYS[5] sentinel of the new next firing
-- KEYS[6] generation counter: a job created again after a delete gets a new generation, so a
--         node holding the deleted job's spec (it missed the delete) cannot claim with it
-- KEYS[7] the job's compact bucket hash   KEYS[8] compact task counter
--   A new pending one-shot task is written compact (see insert.lua); a compact task that is
--   changed is expanded into its job hash first (version 1; see task_lib.lua), then changed
--   as any job.
-- KEYS[9] running zset   KEYS[10] the job's run history list (where an expanded task's run is)
-- KEYS[11] the job's ledger (skip records): a change that moves the schedule off an instant
--   that was due and not yet claimed records it there as `updated` (see ledger_lib.lua)
-- ARGV[1] job id   ARGV[2] spec JSON   ARGV[3] expected version ("0": must not exist)
-- ARGV[4] next firing ms or ""   ARGV[5] change channel
-- ARGV[6] creation instant ms the caller computed the schedule with (kept when the job exists:
--         it is the phase of an `every` job without start_at)
-- ARGV[7] "1" when the job is one-shot (cleaned up a retention period after it succeeded)
-- ARGV[8] sentinel horizon ms: only a firing due within it gets its sentinel key now
-- ARGV[9] the ledger's bounds "<limit>|<max age ms>"
-- Deduplication, only when a task with a dedup key is enqueued (creates; ARGV[3] is "0"):
-- KEYS[12] dedup key (same slot as the job: the job's id was picked on the key's shard)
-- ARGV[10] dedup window ms: the key names the created task and expires with the window
-- ARGV[11] id of a task the caller found deleted although the key named it, or "": a deleted
--          task does not hold its key (the caller retries with its id to take the key over)
-- Reply: {version, status, next, now}, or {-1, current version} when the version moved on,
-- or {-2, id} when the dedup key names a task enqueued within its window (nothing written).
assert((#KEYS == 11 and #ARGV == 9) or (#KEYS == 12 and #ARGV == 11), 'upsert: wrong arity')
-- A table lookup, not a Redis call: tasks without a dedup key cost no command more.
local dedup = KEYS[12]
if dedup then
  local holder = redis.call('GET', dedup)
  if holder and holder ~= ARGV[11] then return {-2, holder} end
end
local cur = redis.call('HGET', KEYS[1], 'version') or '0'
if cur == '0' and redis.call('HEXISTS', KEYS[7], ARGV[1]) == 1 then
  -- A compact task is at version 1: expanded when that is the version expected.
  if ARGV[3] ~= '1' then return {-1, '1'} end
  expand_task(KEYS[1], KEYS[7], KEYS[2], KEYS[9], KEYS[10], KEYS[3], KEYS[8], ARGV[1])
  cur = '1'
end
if cur ~= ARGV[3] then return {-1, cur} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local version = tonumber(cur) + 1
if dedup then redis.call('SET', dedup, ARGV[1], 'PX', ARGV[10]) end
local status, was = unpack(redis.call('HMGET', KEYS[1], 'status', 'next'))
local gen = nil
if not status then gen = redis.call('INCR', KEYS[6]) end
redis.call('DEL', KEYS[4])
local nxt = ARGV[4]
-- A firing is claimed once, ever (G1): never schedule an instant at or before the last claimed one
-- (re-declaring a one-shot job that already ran must not run it again).
local last = redis.call('HGET', KEYS[1], 'last')
if nxt ~= '' and last and tonumber(nxt) <= tonumber(last) then nxt = '' end
-- The instant that was due and not claimed yet, dropped by this change: its ledger record.
if was and was ~= '' and was ~= nxt and tonumber(was) <= now then
  local now_s = string.format('%d', now)
  ledger_skip(KEYS[11], 'updated', was, was, '1', '', now_s, ARGV[9])
end
if status == 'paused' then
  nxt = ''
elseif nxt == '' then
  status = 'finished'
else
  status = 'active'
end
-- The spec JSON starts with its id (serde writes fields in order; ids hold no character
-- JSON escapes): the compact form leaves it out.
local head = '{"id":"' .. ARGV[1] .. '",'
if gen and ARGV[7] == '1' and nxt ~= '' and string.sub(ARGV[2], 1, #head) == head then
  redis.call('HSET', KEYS[7], ARGV[1], gen .. '|' .. ARGV[6] .. '|{' .. string.sub(ARGV[2], #head + 1))
  redis.call('INCR', KEYS[8])
else
  if gen then redis.call('HSET', KEYS[1], 'created', ARGV[6], 'gen', gen) end
  -- `next` mirrors the due entry written below (claim.lua's compare-and-set reads it).
  redis.call('HSET', KEYS[1], 'spec', ARGV[2], 'version', version, 'status', status, 'next', nxt, 'updated', now, 'once', ARGV[7])
  -- Run limits stopped it (`stopped`): a change that schedules it again says no longer so.
  if status ~= 'paused' then redis.call('HDEL', KEYS[1], 'stopped') end
  redis.call('ZADD', KEYS[3], 0, ARGV[1])
end
if nxt == '' then
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], nxt, ARGV[1])
  -- A TTL in the past would give `del`, not `expired`: past instants are claimed directly
  -- by the nodes that read the change message below.
  -- Later firings are given their sentinel by promote.lua as they come within the horizon.
  if tonumber(nxt) > now and tonumber(nxt) <= now + tonumber(ARGV[8]) then
    redis.call('SET', KEYS[5], '1', 'PXAT', nxt)
  end
end
redis.call('SPUBLISH', ARGV[5], cjson.encode({op = 'upsert', id = ARGV[1], version = version, next = nxt}))
return {version, status, nxt, now}
