-- resume: lift the host's halt; the breaker keeps its state. It stands
-- alone, without the prelude, so that a corrupt state hash cannot keep an
-- operator from lifting a halt: only a halt key of another type stops it.
--
-- KEYS[1] and KEYS[2] as for the prelude (common.lua), KEYS[3] the
-- host's resume key; it reads ARGV[1] (now), ARGV[5] and ARGV[14] (the
-- idle TTLs).
-- Returns 1 when the host was halted.
--
-- The resume key keeps when the host was resumed (no TTL), whether or not
-- it was halted here: a worker that still remembers an older halt (Redis
-- may have lost it) then knows not to write it back.

local S, H = KEYS[1], KEYS[2]
local v = redis.pcall('GET', H)
if type(v) == 'table' and v.err then
  return redis.error_reply('EGRESSKIT_CORRUPT halt wrongtype')
end
-- now: see clock.lua, prepended to this script.
redis.call('SET', KEYS[3], string.format('%d', now))
if not v then return 0 end
redis.call('DEL', H)

-- The state hash was kept while the host was halted: mark the breaker used
-- now, as memory does, and let the hash expire again once the host is idle
-- (the scripts forget idle parts by the exact rules; this expiry is only
-- never earlier than those).
if redis.call('TYPE', S).ok ~= 'hash' then return 1 end
if redis.call('HEXISTS', S, 'bu') == 1 then
  redis.call('HSET', S, 'bu', string.format('%d', now))
end
local bidle, lidle = tonumber(ARGV[5]), tonumber(ARGV[14])
if bidle < 0 or lidle < 0 then return 1 end
local ttl = math.max(bidle, lidle)
for _, name in ipairs({'bo', 'lp'}) do
  local t = tonumber(redis.call('HGET', S, name) or '')
  if t and t == t and t - now > ttl and t < 1e18 then ttl = t - now end
end
redis.call('PEXPIRE', S, math.max(1, math.ceil(ttl / 1000)))
return 1
