#!lua flags=allow-oom
-- allow-oom: turns a compact task that exists already into its job hash, once per task (a failed
-- run's outcome and a takeover need it), and removes its compact record: bounded by the tasks there
-- are.
-- Expand a compact task (see insert.lua and task_lib.lua) into its job hash and jobs-index
-- entry, so that a change (pause, trigger, update), a failed run's outcome or a takeover
-- works on it as on any job. Nothing to do for a job hash, or for no job at all.
-- KEYS[1] job hash   KEYS[2] its compact bucket hash   KEYS[3] due zset   KEYS[4] jobs index
-- KEYS[5] compact task counter   KEYS[6] running zset   KEYS[7] its run history list
-- ARGV[1] job id
-- Reply: 1 expanded, 0 nothing to do.
assert(#KEYS == 7 and #ARGV == 1, 'expand: wrong arity')
if expand_task(KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[7], KEYS[4], KEYS[5], ARGV[1]) then
  return 1
end
return 0
