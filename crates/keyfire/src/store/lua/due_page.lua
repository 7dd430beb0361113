#!lua flags=no-writes
-- no-writes: it only reads, so Redis runs it at maxmemory too.
-- A page of a due ZSET after a cursor: the entries that sort after (ARGV[1] score, ARGV[2]
-- member), up to ARGV[3] (score, included), at most ARGV[4] of them. A ZSET sorts the entries
-- of one score by member, so a cursor of both goes on after any number of ties at the same
-- cost (ZRANGEBYSCORE's LIMIT offset walks every entry it skips). The cursor's entry may be
-- gone (claimed since it was read): its place is then found by a binary search of the ties.
-- KEYS[1] due zset
-- Reply: flat list of member, score.
local key = KEYS[1]
local at, member = tonumber(ARGV[1]), ARGV[2]
local untl, limit = tonumber(ARGV[3]), tonumber(ARGV[4])

-- Byte order, as Redis sorts members (Lua's own `<` follows the server's locale).
local function before_or_same(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end

local start
local rank = redis.call('ZRANK', key, member)
if rank and tonumber(redis.call('ZSCORE', key, member)) == at then
  start = rank + 1
else
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. ARGV[1])
  local hi = redis.call('ZCOUNT', key, '-inf', ARGV[1])
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZRANGE', key, mid, mid)[1]
    if before_or_same(m, member) then lo = mid + 1 else hi = mid end
  end
  start = lo
end
local page = redis.call('ZRANGE', key, start, start + limit - 1, 'WITHSCORES')
local out = {}
for i = 1, #page, 2 do
  if tonumber(page[i + 1]) > untl then break end
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
end
return out
