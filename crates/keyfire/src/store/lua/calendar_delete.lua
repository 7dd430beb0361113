#!lua flags=allow-oom
-- allow-oom: it only deletes.
-- Delete a calendar unless a job still names it: atomic with the writers' registration (a
-- job writer adds itself to the users set before it checks the calendar exists, so either
-- this sees it and refuses, or the writer finds the calendar gone and refuses the job).
-- KEYS[1] calendars hash   KEYS[2] the calendar's users set
-- ARGV[1] calendar name   ARGV[2] change channel
-- Reply: 1 deleted | 0 not found | the users' ids (at most 100): in use, nothing deleted
local users = redis.call('SRANDMEMBER', KEYS[2], 100)
if #users > 0 then return users end
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SPUBLISH', ARGV[2], cjson.encode({op = 'calendars', id = ARGV[1]}))
return 1
