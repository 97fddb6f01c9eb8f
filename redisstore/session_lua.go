package redisstore

import "github.com/redis/go-redis/v9"

// The session scripts: each is sessionLuaPrelude followed by one Store
// method. Every one reads and writes the four keys of one session, so it
// touches one Cluster slot, and every one validates what it reads before
// it writes anything: a script that fails has changed nothing.
//
// Times are integer microseconds since the Unix epoch; counters are
// decimal strings. The reply is an array whose first element is a status
// (see the sess* constants in session_reply.go).

// sessionLuaPrelude loads and validates a session's metadata.
const sessionLuaPrelude = `
-- KEYS[1] meta hash:  v version, c created (opaque), e expires,
--                     lt last lease token granted, seq last cookie order,
--                     lk/lh/le the current lease: token, holder, expiry
-- KEYS[2] fields hash, KEYS[3] cookies hash, KEYS[4] order zset
-- ARGV[1] now (empty: the Redis server's TIME)
local M, F, C, O = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
-- now: see clock.lua, prepended to this script.
local MAXT = 9007199254740991

local function corrupt(which, why)
  error({err = 'EGRESSKIT_SESSION_CORRUPT ' .. which .. ' ' .. why})
end

local function int(x) return string.format('%d', x) end

-- checktype fails unless key k is absent or of type want; it returns
-- the type.
local function checktype(k, which, want)
  local t = redis.call('TYPE', k)
  if type(t) == 'table' then t = t.ok end
  if t ~= 'none' and t ~= want then corrupt(which, 'wrongtype') end
  return t
end

-- num parses a stored counter or time: a canonical decimal (as HINCRBY
-- writes and accepts it) below 2^53.
local function num(s, field)
  if type(s) ~= 'string' or #s > 16 or not (s == '0' or string.match(s, '^[1-9]%d*$')) then corrupt('meta', field) end
  local n = tonumber(s)
  if n > MAXT then corrupt('meta', field) end
  return n
end

-- load returns the record's metadata, or nil when it is absent or
-- expired at now. It fails on keys of the wrong type and on metadata that
-- this package did not write.
local function load()
  local mt = checktype(M, 'meta', 'hash')
  checktype(F, 'fields', 'hash')
  checktype(C, 'cookies', 'hash')
  checktype(O, 'order', 'zset')
  if mt == 'none' then return nil end
  local m = redis.call('HMGET', M, 'v', 'c', 'e', 'lt', 'seq', 'lk', 'lh', 'le')
  local r = {v = num(m[1], 'v'), e = num(m[3], 'e'), lt = num(m[4], 'lt'), seq = num(m[5], 'seq'), lk = 0}
  if type(m[2]) ~= 'string' then corrupt('meta', 'c') end
  r.c = m[2]
  if m[6] then
    r.lk = num(m[6], 'lk')
    r.le = num(m[8], 'le')
    if type(m[7]) ~= 'string' then corrupt('meta', 'lh') end
    r.lh = m[7]
  end
  if r.e <= now then return nil end
  return r
end

-- stale reports whether fence f is rejected by the fencing rule.
local function stale(r, f)
  return f ~= 0 and f ~= r.lt
end

-- expire sets the physical TTL of keys to the record's remaining life.
local function expire(e, keys)
  local ms = math.max(1, math.ceil((e - now) / 1000))
  for _, k in ipairs(keys) do redis.call('PEXPIRE', k, ms) end
end
`

// ARGV[2] created, ARGV[3] expires, ARGV[4] n fields, n name/value
// pairs, then m cookies, m name/value pairs.
const sessionLuaCreate = `
local e = tonumber(ARGV[3])
if e <= now then return {6} end
if load() then return {2} end
redis.call('DEL', M, F, C, O)
local i = 5
local nf = tonumber(ARGV[4])
for _ = 1, nf do
  redis.call('HSET', F, ARGV[i], ARGV[i + 1])
  i = i + 2
end
local nc = tonumber(ARGV[i])
i = i + 1
for k = 1, nc do
  redis.call('HSET', C, ARGV[i], ARGV[i + 1])
  redis.call('ZADD', O, k, ARGV[i])
  i = i + 2
end
redis.call('HSET', M, 'v', '1', 'c', ARGV[2], 'e', ARGV[3], 'lt', '0', 'seq', int(nc))
expire(e, {M, F, C, O})
return {0}
`

// ARGV[2] '1' for fields, ARGV[3] '1' for cookies.
const sessionLuaGet = `
local r = load()
if not r then return {1} end
local out = {0, int(r.v), r.c, int(r.e), '', '', '', {}, {}}
if r.lk > 0 and now < r.le then
  out[5], out[6], out[7] = int(r.lk), r.lh, int(r.le)
end
if ARGV[2] == '1' then out[8] = redis.call('HGETALL', F) end
if ARGV[3] == '1' then out[9] = redis.call('HGETALL', C) end
return out
`

// ARGV[2] fence.
const sessionLuaDelete = `
local r = load()
if not r then return {1} end
if stale(r, tonumber(ARGV[2])) then return {3, int(r.lt)} end
redis.call('DEL', M, F, C, O)
return {0}
`

// ARGV[2] fence, ARGV[3] expires.
const sessionLuaSetExpiry = `
local r = load()
if not r then return {1} end
if stale(r, tonumber(ARGV[2])) then return {3, int(r.lt)} end
local e = tonumber(ARGV[3])
if e <= now then
  redis.call('DEL', M, F, C, O)
  return {0}
end
redis.call('HSET', M, 'e', ARGV[3])
local v = redis.call('HINCRBY', M, 'v', 1)
expire(e, {M, F, C, O})
return {0, int(v)}
`

// ARGV[2] fence, ARGV[3] '1' for IfAbsent, ARGV[4] n, n name/value
// pairs to set, then m, m names to delete.
const sessionLuaSetFields = `
local r = load()
if not r then return {1} end
if stale(r, tonumber(ARGV[2])) then return {3, int(r.lt)} end
local ns = tonumber(ARGV[4])
if ARGV[3] == '1' then
  for k = 1, ns do
    if redis.call('HEXISTS', F, ARGV[3 + 2 * k]) == 1 then return {4, k} end
  end
end
local i = 5
for _ = 1, ns do
  redis.call('HSET', F, ARGV[i], ARGV[i + 1])
  i = i + 2
end
local nd = tonumber(ARGV[i])
i = i + 1
for _ = 1, nd do
  redis.call('HDEL', F, ARGV[i])
  i = i + 1
end
local v = redis.call('HINCRBY', M, 'v', 1)
expire(r.e, {F})
return {0, int(v)}
`

// ARGV[2] fence, ARGV[3] limit, ARGV[4] n, n name/value pairs to set,
// then m, m names to delete, then p, p name/value pairs to prune.
const sessionLuaMerge = `
local r = load()
if not r then return {1} end
if stale(r, tonumber(ARGV[2])) then return {3, int(r.lt)} end
local limit = tonumber(ARGV[3])
local i = 5
local ns = tonumber(ARGV[4])
local seq = r.seq
for _ = 1, ns do
  seq = seq + 1
  redis.call('HSET', C, ARGV[i], ARGV[i + 1])
  redis.call('ZADD', O, seq, ARGV[i])
  i = i + 2
end
if ns > 0 then redis.call('HSET', M, 'seq', int(seq)) end
local nd = tonumber(ARGV[i])
i = i + 1
for _ = 1, nd do
  redis.call('HDEL', C, ARGV[i])
  redis.call('ZREM', O, ARGV[i])
  i = i + 1
end
local np = tonumber(ARGV[i])
i = i + 1
for _ = 1, np do
  if redis.call('HGET', C, ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', C, ARGV[i])
    redis.call('ZREM', O, ARGV[i])
  end
  i = i + 2
end
local evicted = 0
if limit > 0 then
  local n = redis.call('HLEN', C)
  while n > limit do
    local popped = redis.call('ZPOPMIN', O, n - limit)
    if #popped == 0 then
      -- Cookies missing from the order (someone edited the keys): evict
      -- them in name order rather than fail half way.
      local names = redis.call('HKEYS', C)
      table.sort(names)
      for k = 1, n - limit do evicted = evicted + redis.call('HDEL', C, names[k]) end
    else
      for k = 1, #popped, 2 do evicted = evicted + redis.call('HDEL', C, popped[k]) end
    end
    n = redis.call('HLEN', C)
  end
end
local v = redis.call('HINCRBY', M, 'v', 1)
expire(r.e, {C, O})
return {0, int(v), evicted}
`

// ARGV[2] holder, ARGV[3] ttl.
const sessionLuaAcquire = `
local r = load()
if not r then return {1} end
local exp = math.min(now + tonumber(ARGV[3]), MAXT)
if r.lk > 0 and now < r.le then
  if r.lh ~= ARGV[2] then return {5, int(r.le)} end
  redis.call('HSET', M, 'le', int(exp))
  return {0, int(r.lk), int(exp)}
end
local tok = r.lt + 1
redis.call('HSET', M, 'lt', int(tok), 'lk', int(tok), 'lh', ARGV[2], 'le', int(exp))
return {0, int(tok), int(exp)}
`

// ARGV[2] the lease's token.
const sessionLuaRelease = `
local r = load()
if not r then return {1} end
local tok = tonumber(ARGV[2])
if tok ~= r.lt then return {3, int(r.lt)} end
if r.lk == tok then redis.call('HDEL', M, 'lk', 'lh', 'le') end
return {0}
`

// sessionScripts are the scripts of a sessionStore.
type sessionScripts struct {
	create, get, delete, setExpiry, setFields, merge, acquire, release *redis.Script
}

func newSessionScripts() sessionScripts {
	mk := func(op string) *redis.Script { return redis.NewScript(luaClock + sessionLuaPrelude + op) }
	return sessionScripts{
		create:    mk(sessionLuaCreate),
		get:       mk(sessionLuaGet),
		delete:    mk(sessionLuaDelete),
		setExpiry: mk(sessionLuaSetExpiry),
		setFields: mk(sessionLuaSetFields),
		merge:     mk(sessionLuaMerge),
		acquire:   mk(sessionLuaAcquire),
		release:   mk(sessionLuaRelease),
	}
}
