-- Fan-in, shared by the scripts that end a one-shot task (complete.lua, recover.lua,
-- cancel.lua, delete.lua) and those that end a delay-queue task (queue/lua/finish.lua,
-- requeue.lua, delete.lua: they call `batch_count` only); prepended to them when they are
-- loaded.
-- Two things may wait on a task's end, both on the task's own shard (its hash tag), so that
-- the script that ends the task settles them in the same step:
-- - its batch, `{tag}:batch:<batch id>` (a hash: `total` tasks, the counts `ok`, `dead` and
--   `cancelled`, `cb` its completion callback as the outbox keeps it, `retention_ms`): when
--   the counts reach `total`, the callback is queued in the shard's outbox (once: `done_ms`
--   is set with it) and the hash expires after its retention;
-- - the tasks created with `after_task` naming it, listed in the shard's `{tag}:after` hash
--   (task id -> waiting task ids, space separated). Each waits as a job hash of status
--   `waiting` (`wait_ms`: its delay after the release, ms). A success releases them (due at
--   once, or after their delay); any other end (dead, cancelled, deleted) moves each to its
--   dead letters with the reason, which ends it in turn (its own batch and waiters).
-- The keys are named here from the tag of a key the script was given: every one of them is in
-- the script's slot on Redis Cluster.

-- `{tag}` of a key.
local function fanin_tag(key)
  return string.match(key, '^(%b{})')
end

-- The batch `bid` of a task counts one more task ended with `result` (ok | dead |
-- cancelled); the last one queues the completion callback.
local function batch_count(tag, bid, result, now)
  local key = tag .. ':batch:' .. bid
  local f = redis.call('HMGET', key, 'total', 'done_ms')
  if not f[1] or f[2] then return end
  redis.call('HINCRBY', key, result, 1)
  local c = redis.call('HMGET', key, 'ok', 'dead', 'cancelled', 'cb', 'retention_ms')
  local ok, dead, cancelled = tonumber(c[1] or '0'), tonumber(c[2] or '0'), tonumber(c[3] or '0')
  if ok + dead + cancelled < tonumber(f[1]) then return end
  redis.call('HSET', key, 'done_ms', now)
  redis.call('PEXPIRE', key, tonumber(c[5] or '604800000'))
  if c[4] and c[4] ~= '' then
    local entry = cjson.decode(c[4])
    entry.payload.timestamp_ms = now
    entry.payload.data.total = tonumber(f[1])
    entry.payload.data.succeeded = ok
    entry.payload.data.died = dead
    entry.payload.data.cancelled = cancelled
    local cb = 'batch:' .. bid .. ':completed'
    if redis.call('HSETNX', tag .. ':outbox:data', cb, cjson.encode(entry)) == 1 then
      redis.call('ZADD', tag .. ':outbox', now, cb)
    end
  end
end

-- A waiting task that will never run: dead-lettered with `why`, recorded, and ended in turn.
local task_ended
local function waiter_dies(tag, id, why, now)
  local job = tag .. ':job:' .. id
  local f = redis.call('HMGET', job, 'status', 'batch')
  if f[1] ~= 'waiting' then return end
  redis.call('HSET', job, 'status', 'finished', 'next', '', 'updated', now)
  redis.call('HDEL', job, 'wait_for', 'wait_ms')
  local fid = id .. ':' .. now
  redis.call('LPUSH', tag .. ':dead:' .. id, cjson.encode({firing_id = fid, job_id = id,
    scheduled_ms = now, attempts = 0, error = why, failed_ms = now}))
  redis.call('HINCRBY', job, 'dead', 1)
  redis.call('LPUSH', tag .. ':runs:' .. id, cjson.encode({firing_id = fid, scheduled_ms = now,
    attempt = 0, node = '', outcome = 'skipped', error = why, finished_ms = now, fate = 'dead'}))
  task_ended(tag, id, f[2] or '', 'dead', now, nil)
end

-- Task `id` ended with `result` (ok | dead | cancelled): its batch `bid` ('' none) counts it,
-- and the tasks waiting on it are released (ok) or dead-lettered. `channel` (nil: none) is
-- where a released task's firing is announced, so that its owner arms a timer for it (the
-- sweeper finds it otherwise).
task_ended = function(tag, id, bid, result, now, channel)
  if bid ~= '' then batch_count(tag, bid, result, now) end
  local after = tag .. ':after'
  local waiting = redis.call('HGET', after, id)
  if not waiting then return end
  redis.call('HDEL', after, id)
  local released = {}
  for w in string.gmatch(waiting, '%S+') do
    if result == 'ok' then
      local job = tag .. ':job:' .. w
      local f = redis.call('HMGET', job, 'status', 'wait_ms')
      if f[1] == 'waiting' then
        local at = now + tonumber(f[2] or '0')
        redis.call('HSET', job, 'status', 'active', 'next', at, 'updated', now)
        redis.call('HDEL', job, 'wait_for', 'wait_ms')
        redis.call('ZADD', tag .. ':due', at, w)
        released[#released + 1] = '["' .. w .. '","' .. string.format('%d', at) .. '"]'
      end
    else
      waiter_dies(tag, w, 'after_task ' .. id .. ' ended ' .. result, now)
    end
  end
  if #released > 0 and channel then
    -- As claim.lua announces next firings: each owner arms a timer (ids need no escaping).
    redis.call('SPUBLISH', channel,
      '{"op":"next","id":"","firings":[' .. table.concat(released, ',') .. ']}')
  end
end

-- Whether fan-in may have anything to do on this shard for a task that is not in a batch:
-- one look per script call, not one per task.
local function fanin_waiting(tag)
  return redis.call('EXISTS', tag .. ':after') == 1
end

-- The batch a job's spec JSON names, or '': `batch` is the spec's last field (serde writes
-- them in order), so a `"batch"` inside its params is never read for it.
local function spec_batch(spec)
  return string.match(spec or '', ',"batch":"([^"]+)"}$') or ''
end
