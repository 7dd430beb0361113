-- Shared by the scripts that turn a compact task into a job hash (expand.lua, upsert.lua);
-- prepended to them when they are loaded.
-- A compact task (see insert.lua) keeps its bucket field from its creation until it is
-- deleted or changed: its claim writes only the run's lease and removes its due entry, and a
-- successful run only adds its history record and its done entry (claim.lua, complete.lua).
-- So its state is where its firing is: a due entry (pending), a lease in the running ZSET
-- (running), or neither (run: its history says how).
-- expand_task writes the job hash such a task reads as, in that state: pending (status
-- active, its due entry its next firing) or claimed (status finished with no next firing;
-- `last` its instant, so that it is never scheduled again (G1); `runs` 1; `active` its run's
-- lease while it runs), and its jobs-index entry, and removes its bucket field. Nothing for a
-- job hash, or no job at all. Returns whether it expanded.
local function expand_task(job, bucket, due, running, runs, index, count, id)
  local rec = redis.call('HGET', bucket, id)
  if not rec or redis.call('EXISTS', job) == 1 then return false end
  local g, c, s = string.match(rec, '^(%d+)|(%d+)|(.*)$')
  local f = {'created', c, 'gen', g, 'spec', '{"id":"' .. id .. '",' .. string.sub(s, 2),
    'version', 1, 'updated', c, 'once', '1'}
  -- `next` mirrors the due entry (claim.lua's compare-and-set reads it).
  local nxt = redis.call('ZSCORE', due, id)
  if nxt then
    f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'status', 'active', 'next', nxt
  else
    f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'status', 'finished', 'next', ''
    -- Its run's lease: "<id>:<instant>|<attempt>|<claimed ms>|<node>" (job ids hold no ':'
    -- and no glob character), else its history's newest record.
    local member, cursor = nil, '0'
    repeat
      local page = redis.call('ZSCAN', running, cursor, 'MATCH', id .. ':*', 'COUNT', 1000)
      cursor = page[1]
      if #page[2] > 0 then member = page[2][1] end
    until cursor == '0' or member
    local last = nil
    if member then
      last = string.match(member, '^[^:]*:(%d+)|')
      f[#f + 1], f[#f + 2] = 'active', member
    else
      last = string.match(redis.call('LINDEX', runs, 0) or '', '"scheduled_ms":(%d+)')
    end
    if last then
      f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'last', last, 'runs', 1
    end
  end
  redis.call('HSET', job, unpack(f))
  redis.call('HDEL', bucket, id)
  redis.call('ZADD', index, 0, id)
  redis.call('DECR', count)
  return true
end

