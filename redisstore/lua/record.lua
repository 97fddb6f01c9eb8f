-- record: feed the outcome of one admitted attempt back. The breaker
-- counts it when the admission's generation is current (OK resets the
-- failure count and closes a half-open circuit after HalfOpenProbes
-- successes; Transient counts as a failure, and so does Throttled when
-- the rate was already at its floor, and open the circuit at
-- FailureThreshold, or at once when half-open; anything else, a throttle
-- above the floor and a refusal included, is neutral and frees a probe
-- slot); Refused halts the host, and is the halt's evidence rather than a
-- breaker failure, so that a resumed host is sendable at once; the
-- limiter adapts (Throttled learns the ceiling, settles below it, pauses
-- and drains; OKs probe above it once the backoff has passed), as package
-- ratelimit does.
--
-- ARGV[15] the outcome (classify.Outcome)
-- ARGV[16] Retry-After
-- ARGV[17] the admission's generation
-- ARGV[18] the quota an OK answer states, per minute (0: none)
-- ARGV[19] the attempt's time to headers, microseconds (0: unknown)
--
-- The halt itself is set by the prelude, before the state key is read.
--
-- Returns {from, to, halted, since}: the breaker states before and after,
-- 1 when this call halted the host, and when the halt began (0: none).

local OUTCOME = tonumber(ARGV[15])
local RETRYAFTER = tonumber(ARGV[16])
local GEN = tonumber(ARGV[17])
local QUOTA = tonumber(ARGV[18]) or 0
local LATENCY = tonumber(ARGV[19]) or 0
-- (the outcome's application begins: deferred.lua repeats it)
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
  l[1], l[2], l[3], l[4], l[5], l[6], l.w = 0, 0, 0, 0, 0, 0, now
end
if OUTCOME <= 5 and l[OUTCOME + 1] < 4294967295 then
  l[OUTCOME + 1] = l[OUTCOME + 1] + 1
end
if OUTCOME == OK then
  observeLatency(LATENCY)
  l.sr = l.sr - l.sr * SHAREW
  -- The spacing of OK answers. A gap across the end of a pause (when this
  -- side waited, not the host) says nothing of the rate the host accepts;
  -- answers that come while the host is paused were sent before, and
  -- their spacing does.
  if l.o > 0 and now > l.o and not (l.o < l.p and now >= l.p) then
    local d = now - l.o
    if l.m == 0 then
      l.q, l.qs = d, d
    else
      l.q = l.q + (d - l.q) / 4
      -- The mean of the gaps so far until the average's weight takes
      -- over: the first gap alone (two answers of a burst) is no demand.
      l.qs = l.qs + (d - l.qs) * math.max(1 / (l.m + 1), SLOWGAPW)
    end
    l.m = math.min(l.m + 1, MAXOKS)
  end
  l.o = now
  l.k = math.min(l.k + 1, MAXOKS)
  if now >= l.p then
    if l.rs < l.p or l.rs == 0 then l.rs, l.rn = now, 0 end
    l.rn = math.min(l.rn + 1, MAXOKS)
  elseif l.cr > 0 and now >= l.cs then
    -- An OK during the pause a throttle's estimate began, for an attempt
    -- sent before the throttle (a limiter that delays the excess answers
    -- it late; so does a fleet's held-back OK): the estimate covers it,
    -- over the run from its first OK to the latest (or to the throttle),
    -- and the target rises to it, never above the rate refused.
    l.cn = math.min(l.cn + 1, MAXOKS)
    l.ce = math.max(l.ce, now)
    local t = math.min(math.max(estimate(l.cr, l.cn, l.ce - l.cs), math.min(FLOOR, l.c)), top())
    if t > l.g then l.g, l.bs = t, t end
  end
  if QUOTA > 0 then
    -- The host says how fast it will go on accepting until its window
    -- ends: go at that rate at once, slower or faster (never above the
    -- configured rate or Crawl-delay), and stay there until the probe's
    -- backoff has passed.
    local q = math.min(math.max(QUOTA, 1 / 1440), top())
    l.g, l.bs, l.k, l.pn = q, q, 0, 0
    l.cr = 0
    l.pa = math.max(l.pa, now + FIRSTBACKOFF)
    if q ~= l.r then setRate(q) end
  elseif not slowing() and l.g > 0 and not (l.r < l.g and risen()) then
    -- (while the host's latency is still risen, the queue our attempts
    -- built there drains before the rate climbs again)
    local w = climb(l.bs, l.g, l.k, RAFTER)
    if (l.k >= RAFTER or l.bs >= l.g) and (now >= l.pa or l.k >= PROBEOKS * math.floor(math.max(l.bo, FIRSTBACKOFF) / FIRSTBACKOFF)) then
      -- The backoff has passed: probe above the target, slowly at first.
      if l.pn == 0 then l.pn = l.k end
      local step = RSTEP
      if step == 0 then step = l.g / 10 end
      w = math.max(w, probe(l.g, step, l.k - l.pn, RAFTER))
    else
      w = math.min(w, settled())
    end
    w = math.min(w, top())
    if w ~= l.r then setRate(w) end
  end
elseif OUTCOME == THROTTLED then
  local fl = math.min(FLOOR, l.c)
  local pause = math.max(RETRYAFTER, 0)
  if now >= l.p then
    local stray = isStray()
    if stray then
      -- A stray refusal: paid for with its pause alone; the rate, the
      -- learnt ceiling and the spacing of OKs stand.
    elseif l.e > 0 and l.o < l.p and l.sy == 0 then
      l.rt = math.max(l.rt, l.r)
      -- No OK since the last pause ended: the host is still shut (a
      -- limiter counting over a window, refused requests too). Wait four
      -- times as long as last time, and settle at a quarter of the rate
      -- when it let OKs through before (more than it allows over time),
      -- or was shut last time too: a host that never answered OK settles
      -- nothing from its second refusal in a row (as likely a stray's).
      local own = pause
      if own <= 0 then own = math.min(60000000 / l.r, MAXPAUSE) end
      local escalated = l.ps > own
      l.o = 0
      l.cr = 0
      pause = math.max(pause, 4 * l.ps)
      if l.m > 0 or escalated then
        l.g = math.min(math.max(l.g / 4, fl), top())
        l.bs = math.min(l.bs, l.g)
        setRate(l.bs)
      end
    else
      -- The host's limit is below r: the learnt ceiling drops to r (moves
      -- to r when a probe brought the throttle, whose backoff doubles),
      -- and the rate settles MARGIN below the limit the run of OKs since
      -- the latest pause ended shows; few OKs: it halves; refused again just below the learnt ceiling: a
      -- fixed cut. A refused probe goes back to where it started.
      local r = l.r
      l.rt = math.max(l.rt, r)
      local near = l.pn == 0 and r <= l.ll and r >= l.ll * (1 - NEARBELOW)
      if l.pn > 0 then
        l.bo = math.min(2 * l.bo, MAXBACKOFF)
        l.ll = r
      elseif l.ll == 0 then
        l.ll = r
      else
        l.ll = math.min(l.ll, r)
      end
      if l.bo == 0 then l.bo = FIRSTBACKOFF end
      local target = r / 2
      local d = now - l.rs
      l.cr = 0
      if near then
        target = r * (1 - NEARCUT) * (1 - MARGIN)
      elseif l.rn >= 3 and l.rs > l.p and d > 0 then
        -- A limiter with a burst of one request that let rn through
        -- since rs, and refuses now, allows fewer than rn-1 in that time.
        -- OKs still to come for attempts sent before now revise it.
        target = estimate(r, l.rn, d)
        l.cr, l.cs, l.ce, l.cn = r, l.rs, now, l.rn
      end
      if l.pn > 0 then
        target = math.min(r, l.g)
        l.cr = 0
      end
      target = math.min(math.max(target, fl), top())
      l.g, l.bs, l.k, l.pn = target, target, 0, 0
      l.pa = now + l.bo
      setRate(target)
    end
    if stray then l.sy = 1 else l.sy = 0 end
    if pause <= 0 then pause = math.min(60000000 / l.r, MAXPAUSE) end
    l.ps = math.floor(math.min(pause, MAXPAUSE))
  end
  if pause <= 0 then pause = math.min(60000000 / l.r, MAXPAUSE) end
  pauseFor(pause)
  l.sr = l.sr + (1 - l.sr) * SHAREW
end
-- (the outcome's application ends)

save()
return {from, to, newhalt, halted or 0}
