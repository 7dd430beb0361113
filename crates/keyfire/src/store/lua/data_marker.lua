#!lua flags=allow-oom
-- allow-oom: reads one key; writes it only when it is missing (the data is gone, so memory is
-- not what is short).
-- A shard's data marker (see heartbeat.lua): the id it holds, written when there is none.
-- KEYS[1] the shard's data marker   ARGV[1] a fresh id, written when there is none
-- Reply: the marker's id.
assert(#KEYS == 1 and #ARGV == 1, 'data_marker: wrong arity')
local data = redis.call('GET', KEYS[1])
if not data then
  data = ARGV[1]
  redis.call('SET', KEYS[1], data)
end
return data
