-- record: feed the outcome of one admitted attempt back. The breaker
-- counts it when the admission's generation is current (OK resets the
-- failure count and closes a half-open circuit after HalfOpenProbes
-- successes; Transient counts as a failure, and so does Throttled when
-- the rate was already at its floor, and open the circuit at
-- FailureThreshold, or at once when half-open; anything else, a throttle
-- above the floor and a refusal included, is neutral and frees a probe
-- slot); Refused halts the host, and is the halt's evidence rather than a
-- breaker failure, so that a resumed host is sendable at once; the limiter adapts (Throttled cuts the rate,
-- pauses and drains; OKs recover, CUBIC-like, toward the last accepted
-- rate).
--
-- ARGV[15] the outcome (classify.Outcome)
-- ARGV[16] Retry-After
-- ARGV[17] the admission's generation
-- ARGV[18] the quota an OK answer states, per minute (0: none)
--
-- The halt itself is set by the prelude, before the state hash is read.
--
-- Returns {from, to, halted, since}: the breaker states before and after,
-- 1 when this call halted the host, and when the halt began (0: none).

local OUTCOME = tonumber(ARGV[15])
local RETRYAFTER = tonumber(ARGV[16])
local GEN = tonumber(ARGV[17])
local QUOTA = tonumber(ARGV[18]) or 0
if QUOTA ~= QUOTA or QUOTA < 0 or QUOTA > 1e15 then QUOTA = 0 end

-- A throttle is pacing's business: it counts for the breaker only when
-- the rate is already at its floor and cannot slow down any further.
local floored = false
if OUTCOME == THROTTLED then
  local r, c = CONF, CONF
  if l then r, c = l.r, l.c end
  floored = r <= math.min(FLOOR, c)
end

local from, to = CLOSED, CLOSED
if b == nil and OUTCOME == REFUSED then b = newBreaker() end
if b ~= nil then
  b.u = now
  lapse()
  from = b.s
  if GEN == b.g then
    if OUTCOME == OK then
      b.k, b.fl = b.k + 1, 0
      if b.s == HALFOPEN and b.k >= PROBES then setState(CLOSED) end
    elseif OUTCOME == TRANSIENT or (OUTCOME == THROTTLED and floored) then
      if b.s == CLOSED then
        b.fl, b.k = b.fl + 1, 0
        if b.fl >= THRESHOLD then setState(OPENED) end
      elseif b.s == HALFOPEN then
        setState(OPENED)
      end
    else
      b.x = b.x + 1
    end
  end
  to = b.s
end

if l == nil then l = newLimiter() end
l.u = now
if now - l.w >= WINDOW then
  l.n, l.w = {0, 0, 0, 0, 0, 0}, now
end
if OUTCOME <= 5 and l.n[OUTCOME + 1] < 4294967295 then
  l.n[OUTCOME + 1] = l.n[OUTCOME + 1] + 1
end
if OUTCOME == OK then
  -- The spacing of OK answers. A gap across the end of a pause (when this
  -- side waited, not the host) says nothing of the rate the host accepts;
  -- answers that come while the host is paused were sent before, and
  -- their spacing does.
  if l.o > 0 and now > l.o and not (l.o < l.p and now >= l.p) then
    local d = now - l.o
    if l.m == 0 then l.q = d else l.q = l.q + (d - l.q) / 4 end
    l.m = math.min(l.m + 1, MAXOKS)
  end
  l.o = now
  if QUOTA > 0 and QUOTA < l.r then
    -- The host says how fast it will go on accepting: slow to that at
    -- once, and recover from there.
    local q = math.max(QUOTA, 1 / 1440)
    l.g, l.bs, l.k = q, q, 0
    setRate(q)
  elseif l.g > 0 then
    -- Climbing, and the host answered clearly faster than the rate now
    -- sent at: jump to that rate, up to the target.
    if l.k < RAFTER and l.m > 0 then
      local a = accepted()
      if a > 1.1 * l.r and a <= 2 * l.g then l.bs = math.max(l.bs, math.min(a, l.g)) end
    end
    l.k = math.min(l.k + 1, MAXOKS)
    local step = RSTEP
    if step == 0 then step = l.g / 10 end
    local h = l.h
    if h == 0 then h = 2 * RAFTER end -- no throttle yet
    local w = math.min(cubic(l.bs, l.g, step, l.k, RAFTER, h), top())
    if w ~= l.r then setRate(w) end
  end
elseif OUTCOME == THROTTLED then
  local fl = math.min(FLOOR, l.c)
  if now >= l.p then
    if l.o < l.p then l.o = 0 end -- no OK since the last pause ended
    -- A new episode cuts the rate: halved, or to the rate the host was
    -- seen to accept when that is at most 0.9 of it; the recovery aims at
    -- the accepted rate. The plateau doubles when a probe brought the
    -- throttle.
    if l.h == 0 then
      l.h = 2 * RAFTER
    elseif l.g > 0 and l.k >= RAFTER + l.h then
      l.h = math.min(2 * l.h, MAXOKS / 4)
    end
    local r = l.r
    local target, nxt = r, r / 2
    local a = accepted()
    if a > 0 and a < r then
      target = a
      if a <= 0.9 * r then nxt = a end
    end
    nxt = math.min(math.max(nxt, fl), top())
    l.g, l.bs, l.k = math.min(math.max(target, nxt), top()), nxt, 0
    l.m = 0 -- from now on, the rate accepted since this throttle
    setRate(nxt)
  end
  local iv = math.min(60000000 / l.r, MAXPAUSE)
  local pause = RETRYAFTER
  if pause <= 0 then pause = iv end
  local untilT = now + math.floor(math.min(pause, MAXPAUSE))
  if untilT > l.p then
    -- The pause starts or grows: a new epoch, and the bucket drained so
    -- that the first token comes at its end, no sooner than an interval
    -- after the throttle.
    l.p, l.e = untilT, l.e + 1
    drain(math.max(untilT, now + math.floor(iv)))
  end
end

save()
return {from, to, newhalt, halted or 0}
