-- Reserve the oldest ready task of a topic for one consumer: move it from the ready set to the
-- reserved set scored by its deadline (Redis time now + its ttr), count the delivery, and give
-- the reservation a fresh token that finish and touch must show (fencing).
-- The caller read the head of the ready set (the candidates) just before, or a previous pop's
-- reply named it: the first candidate still ready is taken, so concurrent pops that read the
-- same head each take a different task.
-- A reply that reserved a task also names the next ready ids and the earliest reservation
-- deadline, so the caller's next pop can skip reading the head (a hint: it is checked here).
-- KEYS[1] ready zset   KEYS[2] reserved zset   KEYS[3] notify list   KEYS[4] topic stats hash
-- KEYS[5..] task hashes of the candidates
-- ARGV[1] reservation token   ARGV[2] how many next ready ids to name in the reply
-- ARGV[3..] candidate ids, oldest first (as KEYS[5..])
-- Reply: {1, id, payload, deliveries, ttr, due, ready_at, now, deadline, earliest deadline or -1,
--         next ready ids...} reserved
--        {0, ready count, earliest reservation deadline or -1, now} nothing taken; with a ready
--        count of 0 the notify list is cleared (its tokens announce nothing any more)
assert(#KEYS >= 4 and #KEYS == #ARGV + 2, 'q_pop: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function earliest_deadline()
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return -1
end
for i = 3, #ARGV do
  local id = ARGV[i]
  local key = KEYS[i + 2]
  if redis.call('ZREM', KEYS[1], id) == 1 then
    local f = redis.call('HMGET', key, 'state', 'ttr', 'payload', 'due', 'ready_at')
    -- An entry whose record is not 'ready' (gone with its retention) is dropped.
    if f[1] == 'ready' then
      local deliveries = redis.call('HINCRBY', key, 'deliveries', 1)
      local deadline = now + tonumber(f[2])
      redis.call('HSET', key, 'state', 'reserved', 'token', ARGV[1], 'reserved_at', now,
        'deadline', deadline)
      redis.call('ZADD', KEYS[2], deadline, id)
      redis.call('HINCRBY', KEYS[4], 'delivered', 1)
      -- Pass the wake-up on: another waiting consumer can take the next ready task.
      if redis.call('ZCARD', KEYS[1]) > 0 and redis.call('LLEN', KEYS[3]) == 0 then
        redis.call('RPUSH', KEYS[3], 1)
      end
      local reply = {1, id, f[3] or 'null', deliveries, tonumber(f[2]), tonumber(f[4]) or now,
        tonumber(f[5]) or now, now, deadline, earliest_deadline()}
      if tonumber(ARGV[2]) > 0 then
        for _, next_id in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)) do
          reply[#reply + 1] = next_id
        end
      end
      return reply
    end
  end
end
local ready = redis.call('ZCARD', KEYS[1])
if ready == 0 then redis.call('DEL', KEYS[3]) end
return {0, ready, earliest_deadline(), now}
