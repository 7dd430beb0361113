#!lua flags=allow-oom
-- allow-oom: it removes the lost run's lease before it records the run (history and dead letters
-- trimmed to their caps in the same step) and queues the next attempt: a takeover must not wait for
-- memory.
-- Take over a run that was lost: its lease expired (its node died, hung, or lost Redis), or
-- its node left the live set without a heartbeat for node_ttl (it fenced itself before
-- then: it cancelled its runs). Grant the next attempt and queue it for any node, or move
-- the firing to the dead letters when its attempts are used up. Fencing: the run's lease
-- (the running ZSET's member "<firing id>|<attempt>|<claimed ms>|<node>") is removed, so
-- the old run can neither renew nor record an outcome. The history names the node that
-- held the run and when it claimed it. Runs claimed by nodes of earlier layouts (running
-- entry: the firing id; lease record "<attempt>:<claimed ms>:<node>", or a bare attempt
-- number and a lock key, in the attempts hash) are taken over too.
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] retry zset   KEYS[4] job hash
-- KEYS[5] dead letters list   KEYS[6] lock of the firing (written only by nodes of an
--   earlier layout, whose lease records are a bare attempt number)   KEYS[7] run history list
-- KEYS[8] (optional) cancels hash: a run a cancel request flagged (cancel.lua) is recorded
--   `cancelled` and not run again
-- ARGV[1] firing id, or the run's lease member when the caller read it
-- ARGV[2] max attempts   ARGV[3] dead-letter limit   ARGV[4] dead-letter entry JSON
-- ARGV[5] history limit   ARGV[6] the firing's scheduled instant ms
-- ARGV[7] "" to take it only once its lease expired, or a node id: take it if that node
--   holds it, lease or not (the caller found the node gone from the live set)
-- ARGV[8] the error to record
-- ARGV[9] (with a node id in ARGV[7]) the lease's expiry ms as the caller read it, or "":
--   a lease renewed since (its expiry moved) is left alone, since its holder is alive after
--   all (the caller's view of the live set was older than the holder's last heartbeat)
-- A one-shot task's firing that ends here (dead, or cancelled) counts in its batch and
-- dead-letters the tasks waiting on it (fanin_lib.lua).
-- Reply: {0} nothing to do | {1, next attempt} queued | {2, attempts} dead |
--   {3, attempt} recorded `cancelled` (flagged by a cancel request)
assert((#KEYS == 7 or #KEYS == 8) and (#ARGV == 8 or #ARGV == 9), 'recover: wrong arity')
local fid = string.match(ARGV[1], '^[^|]*')
local member, score = nil, nil
if ARGV[1] ~= fid then
  member = ARGV[1]
  score = redis.call('ZSCORE', KEYS[1], member)
else
  -- The job's latest run, else a run of the earlier layout, else a scan of the runs in
  -- progress (an older run of a job whose runs overlap).
  local prefix = fid .. '|'
  local active = redis.call('HGET', KEYS[4], 'active')
  if active and string.sub(active, 1, #prefix) == prefix then
    score = redis.call('ZSCORE', KEYS[1], active)
    if score then member = active end
  end
  if not member then
    score = redis.call('ZSCORE', KEYS[1], fid)
    if score then member = fid end
  end
  if not member then
    -- Job ids and instants hold no glob character.
    local cursor = '0'
    repeat
      local page = redis.call('ZSCAN', KEYS[1], cursor, 'MATCH', prefix .. '*', 'COUNT', 1000)
      cursor = page[1]
      if #page[2] > 0 then member, score = page[2][1], page[2][2] end
    until cursor == '0' or member
  end
end
if not score then return {0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local attempt, claimed, node
local earlier = member == fid
if not earlier then
  attempt, claimed, node = string.match(member, '^[^|]*|(%d+)|(%d+)|(.*)$')
else
  local record = redis.call('HGET', KEYS[2], fid) or '1'
  attempt, claimed, node = string.match(record, '^(%d+):(%d+):(.*)$')
  if not attempt then
    -- Claimed by a node of the layout before: its lock names the holder while it lives.
    attempt, claimed = record, '0'
    node = string.match(redis.call('GET', KEYS[6]) or '', '^(.*):%d+$') or ''
  end
end
attempt = tonumber(attempt) or 1
if ARGV[7] == '' then
  if tonumber(score) > now then return {0} end
elseif node ~= ARGV[7] then
  return {0}
elseif (ARGV[9] or '') ~= '' and tonumber(score) ~= tonumber(ARGV[9]) then
  return {0}
end
redis.call('ZREM', KEYS[1], member)
if earlier and claimed == '0' then redis.call('DEL', KEYS[6]) end
if redis.call('EXISTS', KEYS[4]) == 0 then
  if earlier then redis.call('HDEL', KEYS[2], fid) end
  return {0}
end
-- The claim counted the run (one of an earlier layout did not).
if earlier then redis.call('HINCRBY', KEYS[4], 'runs', 1) end
redis.call('HINCRBY', KEYS[4], 'failures', 1)
-- A one-shot task ended: its batch and the tasks waiting on it learn how.
local function ended(result)
  local f = redis.call('HMGET', KEYS[4], 'once', 'spec')
  if f[1] == '1' then
    local tag = fanin_tag(KEYS[1])
    local bid = spec_batch(f[2])
    if bid ~= '' or fanin_waiting(tag) then task_ended(tag, string.match(fid, '^(.*):%d+$'), bid, result, now, nil) end
  end
end
if KEYS[8] and redis.call('HDEL', KEYS[8], fid) == 1 then
  redis.call('LPUSH', KEYS[7], cjson.encode({
    firing_id = fid, scheduled_ms = tonumber(ARGV[6]), attempt = attempt, node = node,
    claimed_ms = tonumber(claimed), started_ms = tonumber(claimed), outcome = 'cancelled',
    fate = 'done', finished_ms = now,
    error = ARGV[8] .. '; cancelled on request, so not run again'}))
  redis.call('LTRIM', KEYS[7], 0, tonumber(ARGV[5]) - 1)
  if earlier then redis.call('HDEL', KEYS[2], fid) end
  ended('cancelled')
  return {3, attempt}
end
local fate = 'retry'
if attempt >= tonumber(ARGV[2]) then fate = 'dead' end
local lost = {
  firing_id = fid, scheduled_ms = tonumber(ARGV[6]), attempt = attempt, node = node,
  claimed_ms = tonumber(claimed), started_ms = tonumber(claimed), outcome = 'lost', fate = fate,
  finished_ms = now, error = ARGV[8]}
if fate == 'retry' then lost.retry_at_ms = now end
redis.call('LPUSH', KEYS[7], cjson.encode(lost))
redis.call('LTRIM', KEYS[7], 0, tonumber(ARGV[5]) - 1)
if fate == 'dead' then
  local dead = cjson.decode(ARGV[4])
  dead.attempts = attempt
  dead.failed_ms = now
  redis.call('LPUSH', KEYS[5], cjson.encode(dead))
  redis.call('LTRIM', KEYS[5], 0, tonumber(ARGV[3]) - 1)
  redis.call('HINCRBY', KEYS[4], 'dead', 1)
  if earlier then redis.call('HDEL', KEYS[2], fid) end
  ended('dead')
  return {2, attempt}
end
redis.call('HSET', KEYS[2], fid, attempt + 1)
redis.call('ZADD', KEYS[3], now, fid)
return {1, attempt + 1}
