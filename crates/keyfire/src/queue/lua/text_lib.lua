-- Shared by the queue scripts that write numbers per task (add.lua, pop.lua); prepended to them
-- when they are loaded.
-- A number as text, each value formatted once per call ('%d': a Lua number passed to
-- redis.call is written with a float's format, printf's %.17g on Redis 7.0, which cost more
-- than the rest of a task's Lua); a value with a fraction (a priority's share of a delayed
-- score) is passed as the number it is.
local texts = {}
local function text(x)
  local t = texts[x]
  if t == nil then
    if x == math.floor(x) then t = string.format('%d', x) else t = x end
    texts[x] = t
  end
  return t
end
