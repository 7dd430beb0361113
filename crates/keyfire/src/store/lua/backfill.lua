-- No allow-oom: it queues firings. At maxmemory Redis refuses it at its first write, before it
-- wrote anything (507 redis_full).
-- Backfill: queue past instants of a job's schedule, each as attempt 1 of its own firing
-- (`<job id>:<instant>`, the nominal instant), in the retry ZSET (as a trigger queues one),
-- spread `interval` ms apart from Redis's now, or from the job's last backfilled firing if
-- that is later (`backfill` field): a job's backfills run one after the other at the rate,
-- whichever node runs them, and survive any node. Nothing polls: the sweeps read what is due
-- within their horizon, and the owner arms timers.
-- An instant is skipped, as already run (or running), when:
-- - a firing of it ran, runs or waits: its run history, its dead letters, a lease in the
--   running ZSET, a queued attempt (attempts hash);
-- - an earlier backfill queued it (the job's backfill record, `<generation>:<instant>` ->
--   when; kept `max age` ms, as the run history);
-- - the schedule reached it: from the job's creation to its last claimed firing (`last`), an
--   instant that its ledger does not name as skipped (misfire, pause, overlap, ...) was run;
-- - it is the pending firing or later (`next`): the schedule runs it.
-- KEYS[1] job hash   KEYS[2] retry zset   KEYS[3] attempts hash   KEYS[4] running zset
-- KEYS[5] run history list   KEYS[6] dead letters list   KEYS[7] ledger list
-- KEYS[8] backfill record zset
-- ARGV[1] job id   ARGV[2] "<generation>.<version>" the instants were computed with
-- ARGV[3] interval ms between two runs   ARGV[4] change channel   ARGV[5] record max age ms
-- ARGV[6..] the instants (ms), ascending
-- Reply: {'ok', queued, skipped, first due ms, last due ms} (dues 0 when none was queued) |
--   {'missing'} | {'changed'} (another version: compute again) | {'paused'}
assert(#KEYS == 8 and #ARGV >= 5, 'backfill: wrong arity')
local id = ARGV[1]
local f = redis.call('HMGET', KEYS[1], 'status', 'gen', 'version', 'created', 'last', 'next',
  'backfill')
if not f[1] then return {'missing'} end
if (f[2] or '0') .. '.' .. (f[3] or '0') ~= ARGV[2] then return {'changed'} end
if f[1] == 'paused' then return {'paused'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval, max_age = tonumber(ARGV[3]), tonumber(ARGV[5])
local created, last = tonumber(f[4] or '0'), tonumber(f[5] or '')
local nxt = tonumber(f[6] or '')
local gen = f[2] or '0'

-- Instants of firings that ran, run or wait.
local ran = {}
local function firings_of(list)
  for _, raw in ipairs(redis.call('LRANGE', list, 0, -1)) do
    local ms = string.match(raw, '"firing_id":"[^":]*:(%d+)"')
    if ms then ran[ms] = true end
  end
end
firings_of(KEYS[5])
firings_of(KEYS[6])
local cursor = '0'
repeat
  local page = redis.call('ZSCAN', KEYS[4], cursor, 'MATCH', id .. ':*', 'COUNT', 1000)
  cursor = page[1]
  for i = 1, #page[2], 2 do
    local ms = string.match(page[2][i], '^[^|:]*:(%d+)|')
    if ms then ran[ms] = true end
  end
until cursor == '0'
-- Ranges of instants the ledger names as not run.
local skipped = {}
for _, raw in ipairs(redis.call('LRANGE', KEYS[7], 0, -1)) do
  local a, b = string.match(raw, '"first_ms":(%d+),"last_ms":(%d+)')
  if a then skipped[#skipped + 1] = {tonumber(a), tonumber(b)} end
end
local function not_run(ms)
  for _, r in ipairs(skipped) do
    if ms >= r[1] and ms <= r[2] then return true end
  end
  return false
end
redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', now - max_age)

local due = math.max(now, tonumber(f[7] or '0') + interval)
local first, last_due = 0, 0
local retry_add, attempt_set, record_add = {}, {}, {}
local queued, passed = 0, 0
for i = 6, #ARGV do
  local at = ARGV[i]
  local ms = tonumber(at)
  local fid = id .. ':' .. at
  local member = gen .. ':' .. at
  if ran[at] or (nxt and ms >= nxt)
      or (last and ms >= created and ms <= last and not not_run(ms))
      or redis.call('HEXISTS', KEYS[3], fid) == 1
      or redis.call('ZSCORE', KEYS[8], member) then
    passed = passed + 1
  else
    queued = queued + 1
    local due_s = string.format('%d', due)
    retry_add[#retry_add + 1] = due_s
    retry_add[#retry_add + 1] = fid
    attempt_set[#attempt_set + 1] = fid
    attempt_set[#attempt_set + 1] = '1'
    record_add[#record_add + 1] = now
    record_add[#record_add + 1] = member
    if first == 0 then first = due end
    last_due = due
    due = due + interval
  end
end
if queued > 0 then
  redis.call('ZADD', KEYS[2], unpack(retry_add))
  redis.call('HSET', KEYS[3], unpack(attempt_set))
  redis.call('ZADD', KEYS[8], unpack(record_add))
  redis.call('PEXPIRE', KEYS[8], max_age)
  redis.call('HSET', KEYS[1], 'backfill', string.format('%d', last_due))
  -- The first is announced (its owner arms a timer); the sweeps' read-ahead finds the rest.
  redis.call('SPUBLISH', ARGV[4], cjson.encode({op = 'retry', id = id, firing = retry_add[2],
    at = first}))
end
return {'ok', queued, passed, first, last_due}
