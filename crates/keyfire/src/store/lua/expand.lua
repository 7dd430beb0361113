-- Expand a compact pending task (see insert.lua) into its job hash and jobs-index entry, so
-- that a change (pause, trigger) works on it as on any job. Nothing to do for a job hash, or
-- for no job at all. Its instant stays its entry in the due ZSET.
-- KEYS[1] job hash   KEYS[2] its compact bucket hash   KEYS[3] due zset   KEYS[4] jobs index
-- KEYS[5] compact task counter
-- ARGV[1] job id
-- Reply: 1 expanded, 0 nothing to do.
assert(#KEYS == 5 and #ARGV == 1, 'expand: wrong arity')
local id = ARGV[1]
local rec = redis.call('HGET', KEYS[2], id)
if not rec or redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local g, c, s = string.match(rec, '^(%d+)|(%d+)|(.*)$')
redis.call('HSET', KEYS[1], 'created', c, 'gen', g, 'spec', '{"id":"' .. id .. '",' .. string.sub(s, 2),
  'version', 1, 'status', 'active', 'next', redis.call('ZSCORE', KEYS[3], id) or '',
  'updated', c, 'once', '1')
redis.call('HDEL', KEYS[2], id)
redis.call('ZADD', KEYS[4], 0, id)
redis.call('DECR', KEYS[5])
return 1
