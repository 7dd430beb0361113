#!lua flags=allow-oom
-- allow-oom: a replay moves dead letters back to the ready set (their records exist: a few fields
-- change), a purge drops them; neither grows memory much, and a purge is how it is freed.
-- Act on dead letters of one lane, by id: each still in the lane's dead set and whose record says
-- 'dead' is
--   'replay': made ready again at once, as a ready add makes a task: into the ready set scored by
--     this instant (after the tasks ready already), its record no longer expiring, its delivery
--     count reset to 0 (so it gets its max deliveries again), its last error and death instant
--     dropped; consumers are woken through the notify list; counted as `replayed`. A task of a
--     batch with a completion callback leaves it (field `batch` dropped): the batch counted it
--     dead, and does not count it again.
--   'purge': deleted for good, as a delete does: its record kept as a 'deleted' tombstone
--     without its payload for the retention (or removed at once); not counted again (see below).
-- An id in the dead set whose record is gone or no longer dead (its retention passed) leaves the
-- set and is not counted. Ready tasks are not in the due index (it holds delayed instants and
-- reservation deadlines), so neither mode touches it.
-- KEYS[1] dead zset   KEYS[2] ready zset   KEYS[3] notify list   KEYS[4] lane stats hash
-- KEYS[5..] task hashes
-- ARGV[1] 'replay' | 'purge'   ARGV[2] most wake-up tokens kept
-- ARGV[3] retention ms of a purged record's tombstone (0: delete it now)
-- ARGV[4..] task ids (as KEYS[5..])
-- Reply: {now, then the ids acted on}
assert(#KEYS >= 4 and #ARGV == #KEYS - 1, 'dead: wrong arity')
local mode = ARGV[1]
assert(mode == 'replay' or mode == 'purge', 'dead: unknown mode')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local retention = tonumber(ARGV[3])
local acted, ready = {}, {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = KEYS[i + 1]
  if redis.call('ZREM', KEYS[1], id) == 1 and redis.call('HGET', key, 'state') == 'dead' then
    if mode == 'replay' then
      redis.call('HSET', key, 'state', 'ready', 'ready_at', now, 'deliveries', 0)
      redis.call('HDEL', key, 'finished_at', 'error', 'token', 'deadline', 'batch')
      redis.call('PERSIST', key)
      -- At its priority's level (see priority.rs).
      ready[#ready + 1] = now - (tonumber(redis.call('HGET', key, 'pri')) or 0) * 17592186044416
      ready[#ready + 1] = id
    elseif retention <= 0 then
      redis.call('DEL', key)
    else
      redis.call('HSET', key, 'state', 'deleted', 'finished_at', now)
      redis.call('HDEL', key, 'payload', 'token', 'deadline', 'error')
      redis.call('PEXPIRE', key, retention)
    end
    acted[#acted + 1] = id
  end
end
if #acted > 0 then
  if mode == 'replay' then
    redis.call('ZADD', KEYS[2], unpack(ready))
    redis.call('HINCRBY', KEYS[4], 'replayed', #acted)
    local n = math.min(tonumber(ARGV[2]) - redis.call('LLEN', KEYS[3]), #acted)
    if n > 0 then
      local tokens = {}
      for j = 1, n do tokens[j] = 1 end
      redis.call('RPUSH', KEYS[3], unpack(tokens))
    end
  end
  -- A purge counts nothing: a dead letter was counted when it died (`dead`), and a topic's
  -- tasks added are derived as live + done + dead + deleted (while live) - replayed.
end
local reply = {now}
for _, id in ipairs(acted) do reply[#reply + 1] = id end
return reply
