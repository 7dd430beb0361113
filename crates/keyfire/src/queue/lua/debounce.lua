-- No allow-oom: a replace may grow a task's record (a larger payload). At maxmemory Redis refuses
-- it at its first write, before it wrote anything (507 redis_full).
-- A duplicate of a topic task: the add of a task with a dedup key found the key naming another
-- task (`holder`). In one step: check the key still names it and that it is still pending
-- (delayed or ready: in the lane's delayed or ready set), then, by `mode`:
--   keep: nothing (the holder counts as gone only when its record is missing or deleted);
--   replace: the task takes the duplicate's payload, ttr, max deliveries and priority (moved
--     to its level in the set it is in);
--   extend: its due instant moves to the duplicate's (now + delay, or the instant), when that
--     is later; a ready task goes back to the delayed set (the due index, the tag's sentinel
--     key and a `wake` message as for an add);
--   replace_extend: both.
-- A replace or an extend renews the key's window.
-- KEYS[1] the dedup key   KEYS[2] the holder's task hash   KEYS[3] delayed zset   KEYS[4] ready zset
-- KEYS[5] lane stats hash (the flag `prio`, as add.lua sets it)   KEYS[6] the tag's sentinel key
-- KEYS[7] the tag's due index
-- ARGV[1] holder id   ARGV[2] 'keep' | 'replace' | 'extend' | 'replace_extend'   ARGV[3] window ms
-- ARGV[4] payload JSON   ARGV[5] ttr ms ('' default)   ARGV[6] max deliveries ('' default)
-- ARGV[7] priority ('' for 0)   ARGV[8] 'delay' | 'at'   ARGV[9] the delay ms or the instant ms
-- ARGV[10] the lane's shard change channel   ARGV[11] the lane's id in the due index
-- Reply: {what, due}: what is 'moved' (the key names another task now, or none), 'gone' (the
-- holder is no longer pending: the caller creates a new task that takes the key over), or
-- 'kept' | 'replaced' | 'extended' | 'replaced_extended'; due the holder's due instant.
assert(#KEYS == 7 and #ARGV == 11, 'debounce: wrong arity')
local step = 17592186044416
local id, mode = ARGV[1], ARGV[2]
if redis.call('GET', KEYS[1]) ~= id then return {'moved', 0} end
local f = redis.call('HMGET', KEYS[2], 'state', 'due', 'pri', 'c')
local due = tonumber(f[2]) or 0
if mode == 'keep' then
  if not f[1] or f[1] == 'deleted' then return {'gone', 0} end
  return {'kept', due}
end
local dscore = redis.call('ZSCORE', KEYS[3], id)
local rscore = redis.call('ZSCORE', KEYS[4], id)
if (f[1] ~= 'delayed' and f[1] ~= 'ready') or (not dscore and not rscore) then
  return {'gone', 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local pri = tonumber(f[3]) or 0
local replaced, extended = false, false
if mode == 'replace' or mode == 'replace_extend' then
  replaced = true
  local set, del = {'payload', ARGV[4]}, {}
  for _, p in ipairs({{'ttr', ARGV[5]}, {'max', ARGV[6]}, {'pri', ARGV[7]}}) do
    if p[2] == '' then
      del[#del + 1] = p[1]
    else
      set[#set + 1] = p[1]
      set[#set + 1] = p[2]
    end
  end
  redis.call('HSET', KEYS[2], unpack(set))
  if #del > 0 then redis.call('HDEL', KEYS[2], unpack(del)) end
  local new = tonumber(ARGV[7]) or 0
  if new ~= pri then
    if dscore then
      redis.call('ZADD', KEYS[3], math.floor(tonumber(dscore)) + new / 16, id)
      if new > 0 then redis.call('HSET', KEYS[5], 'prio', 1) end
    else
      local s = tonumber(rscore)
      redis.call('ZADD', KEYS[4], s + pri * step - new * step, id)
    end
    pri = new
  end
end
if mode == 'extend' or mode == 'replace_extend' then
  local at = tonumber(ARGV[9])
  if ARGV[8] == 'delay' then at = now + at end
  if at > due and (dscore or at > now) then
    extended = true
    redis.call('HSET', KEYS[2], 'due', at, 'c', (tonumber(f[4]) or 0) + at - due)
    if rscore then
      -- Ready, and due again later: back to the delayed set, as an add of a delayed task.
      redis.call('ZREM', KEYS[4], id)
      redis.call('HSET', KEYS[2], 'state', 'delayed')
      redis.call('HDEL', KEYS[2], 'ready_at')
      local head = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
      if not head[2] or at < tonumber(head[2]) then
        redis.call('SPUBLISH', ARGV[10], cjson.encode({op = 'wake', id = ARGV[11], at = at}))
      end
      redis.call('ZADD', KEYS[7], 'LT', at, ARGV[11])
      local wake = tonumber(redis.call('GET', KEYS[6]))
      if not wake or at < wake then redis.call('SET', KEYS[6], at, 'PXAT', at) end
      if pri > 0 then redis.call('HSET', KEYS[5], 'prio', 1) end
    end
    -- Later than it was: the due index's entry may stay earlier (one visit corrects it).
    redis.call('ZADD', KEYS[3], at + pri / 16, id)
    due = at
  end
end
redis.call('SET', KEYS[1], id, 'PX', ARGV[3])
local what = 'kept'
if replaced and extended then what = 'replaced_extended'
elseif replaced then what = 'replaced'
elseif extended then what = 'extended' end
return {what, due}
