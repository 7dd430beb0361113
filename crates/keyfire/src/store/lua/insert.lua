-- No allow-oom: it creates jobs. At maxmemory Redis refuses it at its first write, before it wrote
-- anything (507 redis_full).
-- Create many new jobs of one shard at once: the bulk path of Client::enqueue_many. Each job
-- gets exactly the record upsert.lua writes for a job that does not exist yet (G4: its first
-- firing is scheduled in the same step), but with one ZADD into the due ZSET for the whole
-- batch and one change message for the jobs due soon (not one script call and one message
-- per job). A pending one-shot task is written compact: one field of its bucket hash
-- (`<generation>|<created ms>|<spec JSON without its id>`), no job hash and no jobs-index
-- entry (the claim of its firing expands it; see claim.lua). A job whose id exists already
-- (either form) is left as it is.
-- KEYS[1] due zset   KEYS[2] jobs index   KEYS[3] generation counter   KEYS[4] compact task counter
-- then per job i (base b = 4 + 3 * (i - 1)): KEYS[b+1] job hash   KEYS[b+2] sentinel of its
--   first firing   KEYS[b+3] its compact bucket hash
-- ARGV[1] change channel   ARGV[2] creation instant ms   ARGV[3] sentinel horizon ms
-- then per job i (base a = 3 + 4 * (i - 1)):
--   ARGV[a+1] job id   ARGV[a+2] spec JSON   ARGV[a+3] first firing ms or ""
--   ARGV[a+4] "1" when the job is one-shot
-- The change message {op = 'created', id = '', firings = {{id, ms}, ...}} names the created
-- jobs whose first firing is within the sentinel horizon (past ones too: a sentinel key with
-- a past instant gives no `expired` event, so their owners claim them from this message).
-- `id` is empty so that a node that does not know `created` ignores the message.
-- then, for the tasks of a batch with a completion callback (all on one shard), three more:
--   the batch id, its callback as the outbox keeps it (JSON), its retention ms: the batch's
--   hash `{tag}:batch:<id>` is written with them, `total` the tasks created (fanin_lib.lua)
-- Reply: the ids created.
local n = (#KEYS - 4) / 3
local batched = #ARGV == 6 + 4 * n
assert(n >= 1 and n == math.floor(n) and (#ARGV == 3 + 4 * n or batched), 'insert: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local channel, created_ms, horizon = ARGV[1], ARGV[2], tonumber(ARGV[3])
local gen = tonumber(redis.call('GET', KEYS[3]) or '0')
local due, index, soon, created = {}, {}, {}, {}
local compact = 0

for i = 1, n do
  local b = 4 + 3 * (i - 1)
  local a = 3 + 4 * (i - 1)
  local job, sentinel, bucket = KEYS[b + 1], KEYS[b + 2], KEYS[b + 3]
  local id, spec, nxt, once = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  if redis.call('HEXISTS', job, 'version') == 0 and redis.call('HEXISTS', bucket, id) == 0 then
    gen = gen + 1
    -- The spec JSON starts with its id (serde writes fields in order; ids hold no character
    -- JSON escapes): the compact form leaves it out.
    local head = '{"id":"' .. id .. '",'
    if once == '1' and nxt ~= '' and string.sub(spec, 1, #head) == head then
      redis.call('HSET', bucket, id, gen .. '|' .. created_ms .. '|{' .. string.sub(spec, #head + 1))
      compact = compact + 1
    else
      local status = 'active'
      if nxt == '' then status = 'finished' end
      -- `next` mirrors the due entry (claim.lua's compare-and-set reads it).
      redis.call('HSET', job, 'created', created_ms, 'gen', gen, 'spec', spec, 'version', 1,
        'status', status, 'next', nxt, 'updated', now, 'once', once)
      index[#index + 1] = 0
      index[#index + 1] = id
    end
    if nxt ~= '' then
      local at = tonumber(nxt)
      due[#due + 1] = at
      due[#due + 1] = id
      if at <= now + horizon then
        soon[#soon + 1] = {id, nxt}
        -- Later firings get their sentinel from promote.lua as they come within the horizon.
        if at > now then redis.call('SET', sentinel, '1', 'PXAT', nxt) end
      end
    end
    created[#created + 1] = id
  end
end

-- Variadic writes in slices, well inside Lua's stack limit for unpack.
local function zadd(key, args)
  for s = 1, #args, 1000 do
    redis.call('ZADD', key, unpack(args, s, math.min(s + 999, #args)))
  end
end
if #created > 0 then
  redis.call('SET', KEYS[3], gen)
  if #index > 0 then zadd(KEYS[2], index) end
  if #due > 0 then zadd(KEYS[1], due) end
  if compact > 0 then redis.call('INCRBY', KEYS[4], compact) end
end
if batched and #created > 0 then
  local b = 3 + 4 * n
  local batch = string.match(KEYS[1], '^(%b{})') .. ':batch:' .. ARGV[b + 1]
  redis.call('HSET', batch, 'total', #created, 'ok', 0, 'dead', 0, 'cancelled', 0,
    'cb', ARGV[b + 2], 'retention_ms', ARGV[b + 3], 'created', created_ms)
end
if #soon > 0 then
  redis.call('SPUBLISH', channel, cjson.encode({op = 'created', id = '', firings = soon}))
end
return created
