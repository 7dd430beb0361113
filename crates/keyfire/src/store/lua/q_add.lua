-- Add a delay-queue task: write its record, then either put it in the topic's delayed set (it
-- becomes ready when its keyfire job fires; the caller enqueues that job next) or, when its
-- instant has come already (by Redis's clock), make it ready at once.
-- Idempotent by id: an id that exists, in any state, is left as it is.
-- KEYS[1] task hash   KEYS[2] delayed zset   KEYS[3] ready zset   KEYS[4] notify list
-- KEYS[5] topics set   KEYS[6] topic stats hash
-- ARGV[1] task id   ARGV[2] topic   ARGV[3] payload JSON   ARGV[4] ttr ms   ARGV[5] max deliveries
-- ARGV[6] 'delay' | 'at'   ARGV[7] the delay ms, or the instant ms
-- ARGV[8] id of the keyfire job that will make it ready   ARGV[9] most wake-up tokens kept
-- Reply: {1, state, due, now} added, state 'delayed' or 'ready'
--        {0, state, due, now} the id exists: nothing written
assert(#KEYS == 6 and #ARGV == 9, 'q_add: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local existing = redis.call('HMGET', KEYS[1], 'state', 'due')
if existing[1] then return {0, existing[1], tonumber(existing[2]) or 0, now} end
local due = tonumber(ARGV[7])
if ARGV[6] == 'delay' then due = now + due end
local state = 'delayed'
if due <= now then state = 'ready' end
redis.call('HSET', KEYS[1], 'state', state, 'topic', ARGV[2], 'payload', ARGV[3], 'ttr', ARGV[4],
  'max', ARGV[5], 'deliveries', 0, 'created', now, 'due', due)
if state == 'delayed' then
  redis.call('HSET', KEYS[1], 'job', ARGV[8])
  redis.call('ZADD', KEYS[2], due, ARGV[1])
else
  redis.call('HSET', KEYS[1], 'ready_at', now)
  redis.call('ZADD', KEYS[3], due, ARGV[1])
  if redis.call('LLEN', KEYS[4]) < tonumber(ARGV[9]) then redis.call('RPUSH', KEYS[4], 1) end
end
redis.call('SADD', KEYS[5], ARGV[2])
redis.call('HINCRBY', KEYS[6], 'added', 1)
return {1, state, due, now}
