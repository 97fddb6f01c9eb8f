-- halt: halt a host as of ARGV[1] (a halt made while Redis was
-- unreachable), unless it is halted already. It stands alone, without the
-- prelude, so that nothing but a halt key of another type stops it: a
-- corrupt state hash does not lose the halt.
--
-- KEYS[1] the host's state hash, KEYS[2] its halt key.
-- Returns 1 when this call halted the host.

local v = redis.pcall('GET', KEYS[2])
if type(v) == 'table' and v.err then
  return redis.error_reply('EGRESSKIT_CORRUPT halt wrongtype')
end
if v then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
-- A halted host keeps its breaker, as in memory.
redis.call('PERSIST', KEYS[1])
return 1
