-- now: microseconds since the epoch, from ARGV[1] when a test clock gave
-- one, else from the Redis server's own TIME, so that workers whose clocks
-- disagree still agree.
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
