-- No allow-oom: it creates tasks. At maxmemory Redis refuses it at its first write, before it wrote
-- anything (507 redis_full).
-- Add delay-queue tasks to one topic, in one call. Each new task gets its record; one due
-- later goes into the topic's delayed set (the topic's promotion makes it ready), one already
-- due (by Redis's clock) into the ready set at once. When the adds bring the topic's earliest
-- due instant forward, a `wake` message on the change channel tells the topic's owner to arm its
-- precision timer. The lane's entry in the due index is lowered to its earliest delayed instant
-- (never raised), and the tag's sentinel key brought forward to it when it is earlier: the key
-- expires at the index's head, and its `expired` event asks every node for the lanes due.
-- Idempotent by id: an id that exists, in any state, is left as it is.
-- All of one lane of the topic (a partition, or the topic's keys under the meta tag); the
-- caller put the topic into the topic set first (a meta key: another slot).
-- KEYS[1] delayed zset   KEYS[2] ready zset   KEYS[3] notify list
-- KEYS[4] lane stats hash (written only to set the flag `prio`: a topic's count of tasks added
--   is derived from its sets and its other counters, so a topic holding only delayed tasks of
--   priority 0 has no stats hash)
-- KEYS[5] the tag's sentinel key   KEYS[6] the tag's due index
-- KEYS[7..] task hashes, one per task
-- ARGV[1] topic   ARGV[2] most wake-up tokens kept   ARGV[3] the lane's shard change channel
--   (its tag is the lane's, so SPUBLISH stays in the script's slot)
-- ARGV[4] the lane's name in `wake` messages (the topic, or `<topic>:<partition>`)
-- ARGV[5..] eight per task: id, payload JSON, ttr ms, max deliveries (each '' for the default:
--           not stored), 'delay' | 'at', the delay ms or the instant ms, the priority (1 to 9,
--           '' for 0: not stored), the add's W3C traceparent ('' for none: not stored; a pop's
--           span links to it)
-- A task of priority p is scored `due + p/16` in the delayed set and `ready - p * 2^44` in the
-- ready set (see priority.rs), and its record holds `pri`; a delayed one sets the flag `prio`
-- in the lane's stats hash (its promotion then reads the priorities of what it moves).
-- Deduplication (one task per call): KEYS[8] the dedup key (under the lane's tag), and after
-- the task's arguments ARGV: the window ms, then the id of the task the key named that the
-- caller found not pending ('' for none: it is taken over). Then a key naming another task
-- answers {now, -2, holder id, 0} and nothing is written; a task created sets the key.
-- A record holds state, topic, payload, due, `ttr` and `max` only when not the default, and
-- `c`, the due instant minus the add's (when not 0), for its creation instant; deliveries are
-- written by the first pop (with the default ttr and max when the record has none). (Records of earlier versions hold `created` and `deliveries`, and always `max`:
-- readers take both.)
-- A batch with a completion callback (fanin_lib.lua): after the tasks' arguments ARGV: the
-- batch id, its callback as the outbox keeps it (JSON), its retention ms. Each task created
-- holds `batch` (the id), and the batch's hash `{tag}:batch:<id>` (the lane's tag) is written
-- with `total` the tasks created; the scripts that end a task count it there.
-- Reply: {now, then per task: added (1|0), state, due}; an existing id answers 0 and its
--        stored state and due, having written nothing
local dedup, batch
if #KEYS == 8 and #ARGV == 14 then
  dedup = KEYS[8]
elseif #KEYS >= 7 and #ARGV == 7 + 8 * (#KEYS - 6) then
  batch = ARGV[#ARGV - 2]
end
assert(dedup or batch or (#KEYS >= 7 and #ARGV == 4 + 8 * (#KEYS - 6)), 'add: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local topic = ARGV[1]
local reply = {now}
-- Numbers written per task go through `text` (text_lib.lua, prepended).
if dedup then
  local holder = redis.call('GET', dedup)
  if holder and holder ~= ARGV[14] then return {now, -2, holder, 0} end
  redis.call('SET', dedup, ARGV[5], 'PX', ARGV[13])
end
local delayed, ready = {}, {}
local earliest, prio
local created = 0
local last = #KEYS
if dedup then last = 7 end
for i = 7, last do
  local a = 5 + 8 * (i - 7)
  local id = ARGV[a]
  local f = redis.call('HMGET', KEYS[i], 'state', 'due')
  if f[1] then
    reply[#reply + 1] = 0
    reply[#reply + 1] = f[1]
    reply[#reply + 1] = tonumber(f[2]) or 0
  else
    local due = tonumber(ARGV[a + 5])
    if ARGV[a + 4] == 'delay' then due = now + due end
    local record = {'state', 'delayed', 'topic', topic, 'payload', ARGV[a + 1], 'due', text(due)}
    if ARGV[a + 2] ~= '' then
      record[#record + 1] = 'ttr'
      record[#record + 1] = ARGV[a + 2]
    end
    if ARGV[a + 3] ~= '' then
      record[#record + 1] = 'max'
      record[#record + 1] = ARGV[a + 3]
    end
    local pri = tonumber(ARGV[a + 6]) or 0
    if pri > 0 then
      record[#record + 1] = 'pri'
      record[#record + 1] = pri
    end
    if ARGV[a + 7] ~= '' then
      record[#record + 1] = 'tp'
      record[#record + 1] = ARGV[a + 7]
    end
    if due ~= now then
      record[#record + 1] = 'c'
      record[#record + 1] = text(due - now)
    end
    if batch then
      record[#record + 1] = 'batch'
      record[#record + 1] = batch
    end
    created = created + 1
    if due > now then
      redis.call('HSET', KEYS[i], unpack(record))
      if pri > 0 then
        delayed[#delayed + 1] = text(due + pri / 16)
        prio = true
      else
        delayed[#delayed + 1] = text(due)
      end
      delayed[#delayed + 1] = id
      if not earliest or due < earliest then earliest = due end
      reply[#reply + 1] = 1
      reply[#reply + 1] = 'delayed'
    else
      record[2] = 'ready'
      record[#record + 1] = 'ready_at'
      record[#record + 1] = text(now)
      redis.call('HSET', KEYS[i], unpack(record))
      ready[#ready + 1] = text(now - pri * 17592186044416)
      ready[#ready + 1] = id
      reply[#reply + 1] = 1
      reply[#reply + 1] = 'ready'
    end
    reply[#reply + 1] = due
  end
end
if prio then redis.call('HSET', KEYS[4], 'prio', 1) end
if batch and created > 0 then
  redis.call('HSET', string.match(KEYS[7], '^(%b{})') .. ':batch:' .. batch, 'total', created,
    'ok', 0, 'dead', 0, 'cancelled', 0, 'cb', ARGV[#ARGV - 1], 'retention_ms', ARGV[#ARGV],
    'created', now)
end
if earliest then
  local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if not head[2] or earliest < tonumber(head[2]) then
    redis.call('SPUBLISH', ARGV[3], cjson.encode({op = 'wake', id = ARGV[4], at = earliest}))
  end
  for j = 1, #delayed, 1000 do
    redis.call('ZADD', KEYS[1], unpack(delayed, j, math.min(j + 999, #delayed)))
  end
  redis.call('ZADD', KEYS[6], 'LT', earliest, ARGV[4])
  local wake = tonumber(redis.call('GET', KEYS[5]))
  if not wake or earliest < wake then redis.call('SET', KEYS[5], earliest, 'PXAT', earliest) end
end
if #ready > 0 then
  for j = 1, #ready, 1000 do
    redis.call('ZADD', KEYS[2], unpack(ready, j, math.min(j + 999, #ready)))
  end
  local room = tonumber(ARGV[2]) - redis.call('LLEN', KEYS[3])
  local n = math.min(room, #ready / 2)
  if n > 0 then
    local tokens = {}
    for j = 1, n do tokens[j] = 1 end
    redis.call('RPUSH', KEYS[3], unpack(tokens))
  end
end
return reply
