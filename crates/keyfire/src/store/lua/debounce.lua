-- No allow-oom: a replace may grow the task's spec. At maxmemory Redis refuses it at its first
-- write, before it wrote anything (507 redis_full); a compact task's expansion is that write.
-- A duplicate of a one-shot task: the enqueue of a task with a dedup key found the key naming
-- another task (`holder`) and `on_duplicate` is not `keep`. In one step: check that the key
-- still names it and that it is still pending (active, its instant still to come: not claimed;
-- a compact task is expanded first, as upsert.lua does before a change), then:
--   replace: its spec becomes the duplicate's (params, handler, timeout, …) under its own id
--     and instant;
--   extend: its instant moves to the duplicate's first firing when that is later (its due
--     entry, `next`, the spec's `at`, its sentinel key);
--   replace_extend: both.
-- A change raises the job's version (a node holding the old spec cannot claim with it) and is
-- announced on the change channel as an upsert; the key's window is renewed. A paused task is
-- left as it is.
-- The spec JSON starts `{"id":"…","at":"…"` (serde writes fields in order; a task has no
-- cron, tz or every before `at`), which is how `at` is swapped without decoding the JSON.
-- KEYS[1] the dedup key   KEYS[2] the holder's job hash   KEYS[3] its compact bucket hash
-- KEYS[4] due zset   KEYS[5] running zset   KEYS[6] its run history list   KEYS[7] jobs index
-- KEYS[8] compact task counter   KEYS[9] the sentinel key of its instant as the caller read it
-- KEYS[10] the sentinel key of the duplicate's instant
-- ARGV[1] holder id   ARGV[2] 'replace' | 'extend' | 'replace_extend'   ARGV[3] window ms
-- ARGV[4] the duplicate's spec JSON (its own id)   ARGV[5] its first firing ms
-- ARGV[6] change channel   ARGV[7] sentinel horizon ms
-- Reply: {what}: 'moved' (the key names another task now, or none), 'gone' (the holder is no
-- longer pending: the caller creates a new task that takes the key over), or 'kept' |
-- 'replaced' | 'extended' | 'replaced_extended'.
assert(#KEYS == 10 and #ARGV == 7, 'debounce: wrong arity')
local id, mode = ARGV[1], ARGV[2]
if redis.call('GET', KEYS[1]) ~= id then return {'moved'} end
expand_task(KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], id)
local f = redis.call('HMGET', KEYS[2], 'status', 'next', 'spec', 'version')
if not f[1] then return {'gone'} end
if f[1] == 'paused' then return {'kept'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nxt = tonumber(f[2] or '')
if f[1] ~= 'active' or not nxt or nxt <= now then return {'gone'} end
local shape = '^{"id":"[^"]*","at":"([^"]*)"(.*)$'
local held_at, held_rest = string.match(f[3], shape)
local new_at, new_rest = string.match(ARGV[4], shape)
local window = ARGV[3]
if not held_at or not new_at then
  redis.call('SET', KEYS[1], id, 'PX', window)
  return {'kept'}
end
local new = tonumber(ARGV[5])
local replaced = mode == 'replace' or mode == 'replace_extend'
local extended = (mode == 'extend' or mode == 'replace_extend') and new > nxt
redis.call('SET', KEYS[1], id, 'PX', window)
if not replaced and not extended then return {'kept'} end
local at, rest = held_at, held_rest
if extended then at = new_at end
if replaced then rest = new_rest end
local version = tonumber(f[4] or '0') + 1
if extended then
  redis.call('DEL', KEYS[9])
  nxt = new
  redis.call('ZADD', KEYS[4], nxt, id)
  if nxt <= now + tonumber(ARGV[7]) then redis.call('SET', KEYS[10], '1', 'PXAT', nxt) end
end
local next_s = string.format('%d', nxt)
redis.call('HSET', KEYS[2], 'spec', '{"id":"' .. id .. '","at":"' .. at .. '"' .. rest,
  'version', version, 'next', next_s, 'updated', now)
redis.call('SPUBLISH', ARGV[6], cjson.encode({op = 'upsert', id = id, version = version, next = next_s}))
local what = 'replaced'
if replaced and extended then what = 'replaced_extended' elseif extended then what = 'extended' end
return {what}
