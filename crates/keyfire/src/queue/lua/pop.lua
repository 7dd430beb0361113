#!lua flags=allow-oom
-- allow-oom: a reservation moves each task from the ready set to the reserved set and writes a few
-- fields of its record (token, deadline, deliveries); the wake-up list is capped. Consumers
-- draining the queue is what frees memory.
-- Reserve up to `max` ready tasks of a topic for one consumer: each moves from the ready set
-- to the reserved set scored by its deadline (Redis time now + its ttr), its delivery counted,
-- with a fresh token of its own that finish and touch must show (fencing).
-- The caller read the head of the ready set (the candidates) just before: the first `max`
-- candidates still ready are taken, so concurrent pops that read the same head each take
-- different tasks.
-- The lane's entry in the due index is lowered to its earliest reservation deadline, so the
-- promotion's sweep takes back a reservation nobody finishes.
-- KEYS[1] ready zset   KEYS[2] reserved zset   KEYS[3] notify list   KEYS[4] topic stats hash
-- KEYS[5] the tag's due index   KEYS[6..] task hashes of the candidates
-- ARGV[1] max   ARGV[2] the default max deliveries   ARGV[3] the default ttr ms (each written
-- into a record that stores none, for touch and for a node of the previous release)
-- ARGV[4] the lane's id in the due index
-- ARGV[5] the lowest priority taken (0: any; a pop across partitions takes no task of a level
--   below another partition's head)
-- ARGV[6..] pairs: candidate id (as KEYS[6..]), the token it gets if taken
-- The ready set's score holds a task's priority and the instant it became ready (see
-- priority.rs): `ready - p * 2^44`.
-- A paused lane (field `paused` of its stats hash) reserves nothing: the script answers at once,
-- taking nothing, and clears the notify list (its tokens announce nothing while paused; a resume
-- pushes them again).
-- Reply: {taken, now, ready left, earliest reservation deadline or -1, paused (1|0),
--         then per task taken: id, payload, deliveries, ttr, due, ready_at, deadline, token,
--         the add's traceparent or '', priority}
--        with nothing ready left the notify list is cleared (its tokens announce
--        nothing any more)
assert(#KEYS >= 5 and #ARGV == 5 + 2 * (#KEYS - 5), 'pop: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max = tonumber(ARGV[1])
local floor = tonumber(ARGV[5])
local step = 17592186044416
if redis.call('HEXISTS', KEYS[4], 'paused') == 1 then
  redis.call('DEL', KEYS[3])
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return {0, now, 0, tonumber(first[2]) or -1, 1}
end
-- Numbers written per task go through `text` (text_lib.lua, prepended).
-- The reply's head is filled in at the end; the tasks taken are written straight after it.
local reply = {0, now, 0, -1, 0}
local taken = 0
if #KEYS > 5 then
  local ids = {}
  for i = 6, #KEYS do ids[#ids + 1] = ARGV[2 * (i - 5) + 4] end
  local scores = redis.call('ZMSCORE', KEYS[1], unpack(ids))
  local chosen, reserved = {}, {}
  for i = 1, #ids do
    if taken >= max then break end
    local score = tonumber(scores[i])
    local level, ready_at = 0, score
    if score and score < 0 then
      level = math.ceil(-score / step)
      ready_at = score + level * step
      -- Sorted by score: the rest are of this level or lower.
      if level < floor then break end
    elseif score and floor > 0 then
      break
    end
    if score then
      local key = KEYS[i + 5]
      chosen[#chosen + 1] = ids[i]
      local f = redis.call('HMGET', key, 'state', 'ttr', 'payload', 'due', 'deliveries', 'max', 'tp')
      -- An entry whose record is not waiting (gone with its retention) is only dropped.
      if f[1] == 'ready' or f[1] == 'delayed' then
        local deliveries = (tonumber(f[5]) or 0) + 1
        local ttr = tonumber(f[2]) or tonumber(ARGV[3])
        local deadline = now + ttr
        local token = ARGV[2 * i + 5]
        local now_s, deadline_s, deliveries_s, ready_s = text(now), text(deadline),
          text(deliveries), text(ready_at)
        -- A record that stores both its max deliveries and ttr, or neither (an add writes them
        -- only when given): one call, with no table of fields.
        if f[6] and f[2] then
          redis.call('HSET', key, 'state', 'reserved', 'token', token, 'reserved_at', now_s,
            'deadline', deadline_s, 'deliveries', deliveries_s, 'ready_at', ready_s)
        elseif not f[6] and not f[2] then
          redis.call('HSET', key, 'state', 'reserved', 'token', token, 'reserved_at', now_s,
            'deadline', deadline_s, 'deliveries', deliveries_s, 'ready_at', ready_s,
            'max', ARGV[2], 'ttr', text(ttr))
        else
          local fields = {'state', 'reserved', 'token', token, 'reserved_at', now_s,
            'deadline', deadline_s, 'deliveries', deliveries_s, 'ready_at', ready_s}
          if not f[6] then
            fields[#fields + 1] = 'max'
            fields[#fields + 1] = ARGV[2]
          end
          if not f[2] then
            fields[#fields + 1] = 'ttr'
            fields[#fields + 1] = text(ttr)
          end
          redis.call('HSET', key, unpack(fields))
        end
        reserved[#reserved + 1] = deadline_s
        reserved[#reserved + 1] = ids[i]
        local n = 5 + 10 * taken
        taken = taken + 1
        reply[n + 1] = ids[i]
        reply[n + 2] = f[3] or 'null'
        reply[n + 3] = deliveries
        reply[n + 4] = ttr
        reply[n + 5] = tonumber(f[4]) or now
        reply[n + 6] = ready_at
        reply[n + 7] = deadline
        reply[n + 8] = token
        reply[n + 9] = f[7] or ''
        reply[n + 10] = level
      end
    end
  end
  if #chosen > 0 then redis.call('ZREM', KEYS[1], unpack(chosen)) end
  if taken > 0 then
    redis.call('ZADD', KEYS[2], unpack(reserved))
    redis.call('HINCRBY', KEYS[4], 'delivered', taken)
  end
end
local left = redis.call('ZCARD', KEYS[1])
if left == 0 then
  -- Nothing ready: the tokens announce nothing any more, and kept they would leave a list on
  -- every topic that ever had a ready task.
  redis.call('DEL', KEYS[3])
elseif taken > 0 and redis.call('LLEN', KEYS[3]) == 0 then
  -- Pass the wake-up on: another waiting consumer can take the next ready tasks.
  redis.call('RPUSH', KEYS[3], 1)
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local earliest = -1
if first[2] then
  earliest = tonumber(first[2])
  if taken > 0 then redis.call('ZADD', KEYS[5], 'LT', earliest, ARGV[4]) end
end
reply[1], reply[3], reply[4] = taken, left, earliest
return reply
