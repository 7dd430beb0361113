#!lua flags=allow-oom
-- allow-oom: it only removes (a change message is not stored): deleting is how memory is freed.
-- Delete a job: definition, pending firing, index entries, history and dead letters, and its
-- queued attempts and leases, atomically (G4). Dropping the queued attempts and leases matters
-- when a job of the same id is created again: a retry (or a lease takeover) of the deleted
-- job must not run under the new one. A run of the deleted job still in progress can no
-- longer record its outcome (its attempt is gone: fenced).
-- KEYS[1] job hash   KEYS[2] due zset   KEYS[3] jobs index   KEYS[4] sentinel of the next firing
-- KEYS[5] run history list   KEYS[6] dead letters list   KEYS[7] done zset
-- KEYS[8] retry zset   KEYS[9] running zset   KEYS[10] attempts hash
-- KEYS[11] the job's compact bucket hash   KEYS[12] compact task counter
--   (a compact task has no job hash, index entry, dead letters or queued attempts: its
--   bucket field, then its due entry and sentinel, or its lease, or its history and done
--   entry, are all there is; see task_lib.lua)
-- KEYS[13] the job's ledger (skip records)
-- ARGV[1] job id   ARGV[2] change channel   ARGV[3] "1": only if finished (retention cleanup)
-- ARGV[4] the ledger's bounds "<limit>|<max age ms>"
-- The ledger goes with the job, unless an instant was due and not yet claimed: then it records
-- that instant as `deleted` and stays, for its maximum age (a job created again under the id
-- shows it), see ledger_lib.lua.
-- Reply: 1 deleted, 0 no such job (or not finished, with ARGV[3]).
-- Cost: a scan of the retry and running ZSETs (pending retries and runs in progress).
assert(#KEYS == 13 and #ARGV == 4, 'delete: wrong arity')
-- A one-shot task deleted before it ended (no final record in its history) ends here: its
-- batch counts it `cancelled` and the tasks waiting on it are dead-lettered (fanin_lib.lua).
local unended = nil
if ARGV[3] ~= '1' then
  local f = redis.call('HMGET', KEYS[1], 'once', 'spec', 'status')
  local spec = f[2] or redis.call('HGET', KEYS[11], ARGV[1])
  if spec and (f[1] == '1' or not f[2]) then
    local last = redis.call('LINDEX', KEYS[5], 0) or ''
    if f[3] == 'waiting' or not (string.find(last, '"fate":"done"', 1, true)
        or string.find(last, '"fate":"dead"', 1, true)) then
      unended = spec
    end
  end
end
redis.call('ZREM', KEYS[7], ARGV[1])
local compact = redis.call('EXISTS', KEYS[1]) == 0
if compact then
  if redis.call('HEXISTS', KEYS[11], ARGV[1]) == 0 then return 0 end
  -- Finished: its firing was claimed (no due entry) and succeeded (its done entry, which the
  -- retention cleanup found, came from that success). A compact task whose run failed was
  -- expanded by its outcome.
  if ARGV[3] == '1' and redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
  redis.call('HDEL', KEYS[11], ARGV[1])
  redis.call('DECR', KEYS[12])
elseif ARGV[3] == '1' and redis.call('HGET', KEYS[1], 'status') ~= 'finished' then
  return 0
end
local due = redis.call('ZSCORE', KEYS[2], ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[3] ~= '1' and due and tonumber(due) <= now then
  ledger_skip(KEYS[13], 'deleted', due, due, '1', '', string.format('%d', now), ARGV[4])
else
  redis.call('DEL', KEYS[13])
end
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[6])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if compact and ARGV[3] == '1' then
  -- A finished compact task has no lease or queued attempt left.
  redis.call('SPUBLISH', ARGV[2], cjson.encode({op = 'delete', id = ARGV[1]}))
  return 1
end
-- Firing ids are "<job id>:<instant>", and job ids hold no ':'; a lease in the running ZSET
-- is "<firing id>|<attempt>|<claimed ms>|<node>" (the bare firing id in the earlier layout).
local prefix = ARGV[1] .. ':'
for _, set in ipairs({KEYS[8], KEYS[9]}) do
  for _, member in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    local at = string.match(string.sub(member, #prefix + 1), '^(%d+)')
    if string.sub(member, 1, #prefix) == prefix and at then
      local rest = string.sub(member, #prefix + #at + 1)
      if rest == '' or string.sub(rest, 1, 1) == '|' then
        redis.call('ZREM', set, member)
        redis.call('HDEL', KEYS[10], prefix .. at)
      end
    end
  end
end
if unended then
  local tag = fanin_tag(KEYS[2])
  local bid = spec_batch(unended)
  if bid ~= '' or fanin_waiting(tag) then task_ended(tag, ARGV[1], bid, 'cancelled', now, ARGV[2]) end
end
redis.call('SPUBLISH', ARGV[2], cjson.encode({op = 'delete', id = ARGV[1]}))
return 1
