#!lua flags=allow-oom
-- allow-oom: a cancel stops work; what it adds is bounded: one flag per running firing (removed
-- with the run's outcome, or by the next cancel once the run is gone), history records of the
-- firings it cancels before they ran (as many as it removes queued attempts and instants; the
-- next outcome recorded trims the history to its cap).
-- Cancel what a job has in progress, atomically:
-- - each running firing (a lease in the running ZSET) is flagged in the cancels hash (firing
--   id -> its lease member) and announced on the change channel ({"op":"cancel","firing",
--   "why":"request"}): the node running it stops it and records it `cancelled`
--   (complete.lua records any outcome but a success of a flagged firing as `cancelled`, with
--   no further attempt; recover.lua takes a flagged run of a dead node over as `cancelled`,
--   and does not run it again);
-- - each queued attempt (a retry, a trigger, a takeover or a replay waiting in the retry
--   ZSET) is removed and recorded `cancelled` (fate done);
-- - a one-shot job's pending instant (its due entry) is removed and recorded `cancelled`;
--   the job is then finished, its `last` that instant (so declaring it again with that
--   instant never runs it: G1).
-- A recurring job's next scheduled firing is left alone (pause the job to stop it).
-- A compact task is expanded into its job hash first (task_lib.lua). A task created with
-- `after_task` that still waits is cancelled too; a task cancelled before it ran ends its part
-- of a batch and of the tasks waiting on it (fanin_lib.lua).
-- KEYS[1] job hash   KEYS[2] its compact bucket hash   KEYS[3] due zset   KEYS[4] jobs index
-- KEYS[5] compact task counter   KEYS[6] running zset   KEYS[7] its run history list
-- KEYS[8] retry zset   KEYS[9] attempts hash   KEYS[10] cancels hash
-- ARGV[1] job id   ARGV[2] change channel
-- Reply: {'missing'} no such job | {'none'} nothing to cancel |
--   {'ok', {firings told to stop}, {firings cancelled before they ran}}
assert(#KEYS == 10 and #ARGV == 2, 'cancel: wrong arity')
local id = ARGV[1]
expand_task(KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[7], KEYS[4], KEYS[5], id)
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Flags of runs that ended without recording an outcome here (taken over, deleted with their
-- job) are dropped: a flag's value is the lease it stops.
local flags = redis.call('HGETALL', KEYS[10])
for i = 1, #flags, 2 do
  if not redis.call('ZSCORE', KEYS[6], flags[i + 1]) then redis.call('HDEL', KEYS[10], flags[i]) end
end

-- Firing ids are "<job id>:<instant>" (job ids hold no ':' and no glob character); a lease
-- is "<firing id>|<attempt>|<claimed ms>|<node>".
local prefix = id .. ':'
local function each(set, f)
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', set, cursor, 'MATCH', prefix .. '*', 'COUNT', 1000)
    cursor = page[1]
    for i = 1, #page[2], 2 do f(page[2][i]) end
  until cursor == '0'
end

local stopping, cancelled = {}, {}
each(KEYS[6], function(member)
  local fid = string.match(member, '^([^|]*)|%d+|')
  if fid and string.match(string.sub(fid, #prefix + 1), '^%d+$') then
    redis.call('HSET', KEYS[10], fid, member)
    redis.call('SPUBLISH', ARGV[2], cjson.encode({op = 'cancel', id = id, firing = fid, why = 'request'}))
    stopping[#stopping + 1] = fid
  end
end)

local function record(fid, at, attempt, error)
  redis.call('LPUSH', KEYS[7], cjson.encode({
    firing_id = fid, scheduled_ms = at, attempt = attempt, node = '', claimed_ms = 0,
    started_ms = 0, outcome = 'cancelled', error = error, finished_ms = now, fate = 'done'}))
  cancelled[#cancelled + 1] = fid
end

local queued = {}
each(KEYS[8], function(member)
  local at = string.match(string.sub(member, #prefix + 1), '^(%d+)$')
  if at then queued[#queued + 1] = {member, tonumber(at)} end
end)
for _, q in ipairs(queued) do
  local fid, at = q[1], q[2]
  local attempt = tonumber(string.match(redis.call('HGET', KEYS[9], fid) or '', '^(%d+)')) or 1
  redis.call('ZREM', KEYS[8], fid)
  redis.call('HDEL', KEYS[9], fid)
  record(fid, at, attempt, 'cancelled on request before its attempt ran')
end

local f = redis.call('HMGET', KEYS[1], 'status', 'once', 'next')
if f[1] == 'active' and f[2] == '1' and f[3] and f[3] ~= '' then
  -- `next` mirrors the due entry (claim.lua's compare-and-set reads it): with both gone, no
  -- claim of that instant can succeed; its sentinel key expires to a refused claim.
  redis.call('ZREM', KEYS[3], id)
  redis.call('HSET', KEYS[1], 'status', 'finished', 'next', '', 'last', f[3], 'updated', now)
  record(prefix .. f[3], tonumber(f[3]), 1, 'cancelled on request before it ran')
end
if f[1] == 'waiting' then
  -- Created with `after_task`, not yet released (fanin_lib.lua): it never runs.
  redis.call('HSET', KEYS[1], 'status', 'finished', 'next', '', 'updated', now)
  redis.call('HDEL', KEYS[1], 'wait_for', 'wait_ms')
  record(prefix .. string.format('%d', now), now, 0, 'cancelled on request while it waited for its after_task')
end
-- A one-shot task cancelled before it ran has ended: its batch and the tasks waiting on it
-- learn it (one still running ends with its outcome, in complete.lua).
if f[2] == '1' and #cancelled > 0 then
  local tag = fanin_tag(KEYS[1])
  local bid = spec_batch(redis.call('HGET', KEYS[1], 'spec'))
  if bid ~= '' or fanin_waiting(tag) then task_ended(tag, id, bid, 'cancelled', now, ARGV[2]) end
end
if #stopping == 0 and #cancelled == 0 then return {'none'} end
return {'ok', stopping, cancelled}
