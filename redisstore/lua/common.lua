-- Shared prelude of every redisstore script: the clock, the configuration,
-- loading and validating a host's keys, breaker and limiter arithmetic, and
-- saving with the right expiry. Times are integer microseconds since the
-- Unix epoch, durations integer microseconds.
--
-- KEYS[1] is the host's state key, KEYS[2] its halt key; both carry the
-- {host} hash tag, so a script touches one Cluster slot.
--
-- ARGV[1]   now (empty: the Redis server's TIME)
-- ARGV[2]   breaker FailureThreshold
-- ARGV[3]   breaker OpenTimeout
-- ARGV[4]   breaker HalfOpenProbes
-- ARGV[5]   breaker IdleTTL (negative: never forget)
-- ARGV[6]   probe lease
-- ARGV[7]   the host's configured rate, per minute
-- ARGV[8]   Burst
-- ARGV[9]   Floor, per minute
-- ARGV[10]  RecoverAfter
-- ARGV[11]  RecoverStep, per minute (0: a tenth of the target rate)
-- ARGV[12]  MaxPause
-- ARGV[13]  Window
-- ARGV[14]  limiter IdleTTL (negative: never forget)
-- ARGV[15…] the operation's own arguments

local S, H = KEYS[1], KEYS[2]
-- now: see clock.lua, prepended to this script.
local THRESHOLD = tonumber(ARGV[2])
local OPEN = tonumber(ARGV[3])
local PROBES = tonumber(ARGV[4])
local BIDLE = tonumber(ARGV[5])
local LEASE = tonumber(ARGV[6])
local CONF = tonumber(ARGV[7])
local BURST = tonumber(ARGV[8])
local FLOOR = tonumber(ARGV[9])
local RAFTER = tonumber(ARGV[10])
local RSTEP = tonumber(ARGV[11])
local MAXPAUSE = tonumber(ARGV[12])
local WINDOW = tonumber(ARGV[13])
local LIDLE = tonumber(ARGV[14])

local OK, TRANSIENT, THROTTLED, REFUSED = 0, 1, 2, 3
local CLOSED, HALFOPEN, OPENED = 0, 1, 2

-- corrupt aborts the script with an error the Go side maps to
-- *CorruptError: which key ("s" or "halt") and a one-word reason.
local function corrupt(which, why)
  error({err = 'EGRESSKIT_CORRUPT ' .. which .. ' ' .. why})
end

-- Numbers are written as they are: Redis formats a number argument with
-- %.17g, exact for these integers (below 2^53) and for every double.
local floor = math.floor

-- MAXWAIT bounds a wait returned to Go (in microseconds, below what a
-- time.Duration holds): only a corrupt hash could ask for more.
local MAXWAIT = 9e15

-- The halt: false, or the time it began.
local halted = false
do
  local v = redis.pcall('GET', H)
  if type(v) == 'table' and v.err then corrupt('halt', 'wrongtype') end
  if v then
    local n = tonumber(v)
    if n == nil or n ~= n or n < 0 or n >= 1e18 or n ~= floor(n) then corrupt('halt', 'value') end
    halted = n
  end
end

-- A Refused outcome halts the host before the state key is read, so
-- that not even a corrupt state loses the halt.
local newhalt = 0
if OP == 'record' and tonumber(ARGV[15]) == REFUSED and not halted then
  redis.call('SET', H, now)
  halted, newhalt = now, 1
end

-- The state key holds one string: a version byte (1), a byte of flags (1:
-- the breaker part is present, 2: the limiter part), then 42 little-endian
-- doubles in the order of FIELDS, grouped by kind: integers in [0, 1e18)
-- (the breaker's nine and the limiter's 22 that follow), rates in [1e-6,
-- 1e15] (lr, lc), rates or 0 (lx to lcr), a token count in [-1e15, 1e15]
-- (lt), durations in [0, 1e18) (lq, lbo, lps). The bounds are far beyond
-- anything the scripts write, and keep every computed wait finite. A part
-- that is absent is written as zeros and not read. Bytes after the 338 of
-- version 1 (a newer version's) are kept as they are. raw keeps the value
-- read, so that save writes only when something changed.
local FMT = '<BBdddddddddddddddddddddddddddddddddddddddddd'
local SIZE = 338
-- Version 1's extension, the 72 bytes after its 338 (absent: all zero):
-- nine doubles, the pacing part's latency averages (fast ql, base qb, in
-- microseconds, in [0, 1e18)), the refused share of its answers sr (in
-- [0, 1]), the stray flag sy (0 or 1: the latest pause said nothing of a
-- limit: a stray refusal's, or a slowing host's drain), how often admissions queued for a token (waiting half an
-- interval or more) bd (in [0, 1]), whether the latest did lw (0 or 1), a slow average of the gaps between
-- OKs qs (microseconds, in [0, 1e18)), the highest rate a refusal taken
-- for a limit came at rt (0 or a rate) and when the latency rose ra (a
-- time, 0: not risen). Bytes after them are kept as they are.
local EXT, EXTSIZE = '<ddddddddd', 72
local EXTFIELDS = 'ql qb sr sy bd lw qs rt ra'
local FIELDS = 'bs bg bq bx bk bf bo bu bp lp lf la lk lw lu n0 n1 n2 n3 n4 n5 le lo lm lpa lpn lrs lrn lcs lce lcn lr lc lx lg lb ll lcr lt lq lbo lps'

-- bad reports the i-th value of the unpacked string (the i-2-th field).
local function bad(i)
  local j = 2
  for name in string.gmatch(FIELDS, '%S+') do
    j = j + 1
    if j == i then corrupt('s', name) end
  end
end

local raw = redis.pcall('GET', S)
if type(raw) == 'table' and raw.err then corrupt('s', 'wrongtype') end

-- dropped is set when a part of the state was forgotten, so that save
-- writes the state again even when the other part is absent.
local dropped = false

-- The breaker part: state s, generation g, requests q, exclusions x,
-- consecutive successes k and failures fl, open-until o, last use u, last
-- probe admission p.
local b = nil
local lastgen = nil

-- The limiter part: rate r, configured rate c, ceiling x (0: none),
-- paused-until p, tokens t (valid when tf is 1, else the bucket is full)
-- as of time a (the latest time given to the bucket), epoch e (pauses
-- started or grown), the recovery from base bs toward target g (0: none)
-- k OKs in, the probe begun pn OKs in (0: not probing) and allowed from
-- time pa, the learnt ceiling ll (0: none), the probe's backoff bo, the
-- latest pause ps, the run of rn OKs since the latest pause ended begun at
-- rs, the run a throttle's estimate counted (the rate refused cr, 0: no
-- estimate to revise; its first OK cs, the end of its span ce, its OKs
-- cn), the last OK's time o and the average gap q between
-- OKs over m gaps, outcome counts l[1..6] since w, last use u.
local l = nil

if raw then
  if #raw < SIZE then corrupt('s', 'incomplete') end
  local u = {struct.unpack(FMT, raw)}
  if u[1] ~= 1 then corrupt('s', 'version') end
  local fl = u[2]
  if fl > 3 then corrupt('s', 'flags') end
  if fl % 2 == 1 then
    for i = 3, 11 do
      local n = u[i]
      if not (n >= 0 and n < 1e18 and n == floor(n)) then bad(i) end
    end
    b = {s = u[3], g = u[4], q = u[5], x = u[6], k = u[7], fl = u[8], o = u[9], u = u[10], p = u[11]}
    if b.s > OPENED then corrupt('s', 'bs') end
    lastgen = b.g
    -- Idle hosts are forgotten, except halted ones and open circuits still
    -- in their open period.
    if not halted and BIDLE >= 0 and now - b.u >= BIDLE and not (b.s == OPENED and now < b.o) then
      b, dropped = nil, true
    end
  end
  if fl >= 2 then
    for i = 12, 33 do
      local n = u[i]
      if not (n >= 0 and n < 1e18 and n == floor(n)) then bad(i) end
    end
    for i = 34, 35 do
      local n = u[i]
      if not (n >= 1e-6 and n <= 1e15) then bad(i) end
    end
    for i = 36, 40 do
      local n = u[i]
      if not (n == 0 or (n >= 1e-6 and n <= 1e15)) then bad(i) end
    end
    local n = u[41]
    if not (n >= -1e15 and n <= 1e15) then bad(41) end
    for i = 42, 44 do
      n = u[i]
      if not (n >= 0 and n < 1e18) then bad(i) end
    end
    l = {u[18], u[19], u[20], u[21], u[22], u[23],
      p = u[12], tf = u[13], a = u[14], k = u[15], w = u[16], u = u[17],
      e = u[24], o = u[25], m = u[26], pa = u[27], pn = u[28], rs = u[29], rn = u[30], cs = u[31], ce = u[32], cn = u[33],
      r = u[34], c = u[35], x = u[36], g = u[37], bs = u[38], ll = u[39], cr = u[40], t = u[41], q = u[42], bo = u[43], ps = u[44]}
    l.ql, l.qb, l.sr, l.sy, l.bd, l.lw, l.qs, l.rt, l.ra = 0, 0, 0, 0, 0, 0, 0, 0, 0
    if #raw > SIZE and #raw < SIZE + EXTSIZE then corrupt('s', 'incomplete') end
    if #raw > SIZE then
      local x = {struct.unpack(EXT, raw, SIZE + 1)}
      if not (x[1] >= 0 and x[1] < 1e18) then corrupt('s', 'ql') end
      if not (x[2] >= 0 and x[2] < 1e18) then corrupt('s', 'qb') end
      if not (x[3] >= 0 and x[3] <= 1) then corrupt('s', 'sr') end
      if x[4] ~= 0 and x[4] ~= 1 then corrupt('s', 'sy') end
      if not (x[5] >= 0 and x[5] <= 1) then corrupt('s', 'bd') end
      if x[6] ~= 0 and x[6] ~= 1 then corrupt('s', 'lw') end
      if not (x[7] >= 0 and x[7] < 1e18) then corrupt('s', 'qs') end
      if not (x[8] == 0 or (x[8] >= 1e-6 and x[8] <= 1e15)) then corrupt('s', 'rt') end
      if not (x[9] >= 0 and x[9] < 1e18) then corrupt('s', 'ra') end
      l.ql, l.qb, l.sr, l.sy, l.bd, l.lw, l.qs, l.rt, l.ra = x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9]
    end
    -- Idle hosts are forgotten unless still paused.
    if LIDLE >= 0 and now - l.u >= LIDLE and now >= l.p then
      l, dropped = nil, true
    end
  end
end

local function newBreaker()
  -- Generations start at the clock so that an admission from a forgotten
  -- breaker never matches a new one.
  local g = now
  if lastgen ~= nil and lastgen + 1 > g then g = lastgen + 1 end
  return {s = CLOSED, g = g, q = 0, x = 0, k = 0, fl = 0, o = 0, u = now, p = 0}
end

-- setState moves to a new state and generation with cleared counts.
local function setState(st)
  b.s, b.g = st, b.g + 1
  b.q, b.x, b.k, b.fl, b.p = 0, 0, 0, 0, 0
  if st == OPENED then b.o = now + OPEN else b.o = 0 end
end

-- lapse turns an open circuit whose open period has ended half-open.
local function lapse()
  if b.s == OPENED and b.o < now then setState(HALFOPEN) end
end

-- newLimiter is a host never contacted: one token, not a burst (the
-- bucket fills to Burst while the host is idle).
local function newLimiter()
  return {r = CONF, c = CONF, x = 0, p = 0, t = 1, tf = 1, a = now, k = 0, w = now, u = now,
    e = 0, g = 0, bs = 0, o = 0, q = 0, m = 0, ll = 0, pa = 0, bo = 0, pn = 0, ps = 0, rs = 0, rn = 0,
    cr = 0, cs = 0, ce = 0, cn = 0, ql = 0, qb = 0, sr = 0, sy = 0, bd = 0, lw = 0, qs = 0, rt = 0, ra = 0, 0, 0, 0, 0, 0, 0}
end

-- top is the rate the host may recover to.
local function top()
  if l.x > 0 then return math.min(l.c, l.x) end
  return l.c
end

-- MARGIN is kept below the limit a refusal showed; MAXOVER is the
-- largest cut an overshoot estimate may ask for; a refusal within
-- NEARBELOW below the learnt ceiling cuts by NEARCUT; the probe's backoff
-- starts at FIRSTBACKOFF and doubles up to MAXBACKOFF.
local MARGIN, MAXOVER, NEARBELOW, NEARCUT = 0.03, 0.5, 0.15, 0.1
local FIRSTBACKOFF, MAXBACKOFF = 120000000, 480000000
-- PROBEOKS OKs since a throttle let the probe begin before the first
-- backoff has passed (twice as many for each doubling).
local PROBEOKS = 200

-- estimate is the rate to settle at after a refusal at r that followed n
-- OKs in d microseconds: below (n-1)/d by MARGIN, at most r less MARGIN,
-- and at least half of r.
local function estimate(r, n, d)
  local est = (n - 1) * 60000000 / d
  return math.max(math.min(est, r) * (1 - MARGIN), r * (1 - MAXOVER))
end

-- settled is the highest rate short of a probe: top, and below the
-- learnt ceiling by MARGIN.
local function settled()
  if l.ll > 0 then return math.min(top(), l.ll * (1 - MARGIN)) end
  return top()
end

-- clock returns t, or the latest time given to the bucket if later.
local function clock(t)
  if t < l.a then return l.a end
  return t
end

-- burst is the bucket's size: Burst, and one once the host has throttled
-- (its epoch moved).
local function burst()
  if l.e > 0 then return 1 end
  return BURST
end

-- tokensAt is the bucket's content at t >= l.a.
local function tokensAt(t)
  if l.tf == 0 then return burst() end
  local tok = l.t + (t - l.a) * l.r / 60000000
  if tok > burst() then tok = burst() end
  return tok
end

-- delay is the time to accumulate tokens at the current rate.
local function delay(tokens)
  return tokens * 60000000 / l.r
end

-- setRate changes the rate, re-valuing the tokens owed at the new rate so
-- that the reservations handed out keep their spacing.
local function setRate(pm)
  local t = clock(now)
  local tok = tokensAt(t)
  if tok < 0 then tok = tok * pm / l.r end
  l.t, l.tf, l.a, l.r = tok, 1, t, pm
end

-- drain empties the bucket as of at: one token then, the next an
-- interval later (the bucket holds one token from now on: see burst).
local function drain(at)
  l.t, l.tf, l.a = 1, 1, clock(at)
end

-- pauseFor pauses the host for d microseconds from now (at most MAXPAUSE)
-- unless it is paused longer already: a new epoch, and the bucket drained
-- so that the first token comes at the pause's end, no sooner than an
-- interval at the current rate after now. It reports whether the pause
-- started or grew.
local function pauseFor(d)
  local untilT = now + math.floor(math.min(d, MAXPAUSE))
  if untilT <= l.p then return false end
  l.p, l.e = untilT, l.e + 1
  drain(math.max(untilT, now + math.floor(math.min(60000000 / l.r, MAXPAUSE))))
  return true
end

-- MAXOKS bounds the counts of OKs.
local MAXOKS = 1073741824

-- climb is the recovery's rate n OKs after a throttle or quota set the
-- rate to base, aiming at target: a concave climb over k OKs, then target.
local function climb(base, target, n, k)
  if n >= k then return target end
  local x = 1 - n / k
  return target - (target - base) * (x * x * x)
end

-- probe is the rate n OKs into a probe above target: step faster after k
-- OKs, growing with the cube of their number.
local function probe(target, step, n, k)
  local x = n / k
  return target + step * (x * x * x)
end

-- A host slowing down under our load: fast latency at least LATRISE times
-- its base, LATQUEUED attempts waiting there on average, paced LATAHEAD
-- times faster than it serves.
local LATRISE, LATQUEUED, LATAHEAD, LATSUSTAIN = 2, 1, 1.2, 250000

-- A stray refusal's bounds (see isStray): a demand below STRAYDEMAND of
-- the rate (or the learnt ceiling, if higher), fewer than STRAYINFLIGHT
-- attempts in flight on average, a refused share under STRAYSHARE (an
-- average of weight SHAREW), admissions waiting for a token less often
-- than STRAYBOUND (an average of weight BOUNDW).
local STRAYDEMAND, STRAYINFLIGHT, STRAYSHARE, STRAYBOUND, SHAREW, BOUNDW = 0.8, 0.5, 0.15, 0.5, 1 / 32, 1 / 16
local STRAYGAPS, SLOWGAPW, STRAYRUN, STRAYBELOWTOP = 16, 1 / 16, 10, 0.6
-- A host delays our attempts when its fast latency is over LATRISE times
-- its base and STRAYSLACK microseconds: no refusal of it is a stray.
local STRAYSLACK = 50000

-- risen reports whether the host's latency is risen: its fast average at
-- least LATRISE times its base and STRAYSLACK more.
local function risen()
  return l.qb > 0 and l.ql >= LATRISE * l.qb + STRAYSLACK
end

-- isStray reports whether a refusal now is a stray: the pace did not bind
-- (seldom; while the demand is not known: after a cut, always, and before
-- one, the latest admission did not queue and at most one waits now), the
-- host did not delay
-- our attempts, refusals are rare, no probe was under way, and once the
-- crawl's demand is known (STRAYGAPS gaps between OKs) the host answered
-- it far below its pace and any rate it refused, with no attempt waiting
-- there. It is paid for with its pause alone. A refusal before any two
-- OKs is no stray.
local function isStray()
  if l.m < 1 or l.q <= 0 or (l.pn > 0 and l.m < STRAYGAPS) or l.sr >= STRAYSHARE or risen() then
    return false
  end
  local owed = -tokensAt(clock(now))
  -- Far below the highest rate a refusal taken for a limit came at, after
  -- a long run of OKs, not queued at the pace: no further cut.
  if l.rn >= STRAYRUN and l.r < l.rt * STRAYBELOWTOP and owed <= 1 then return true end
  if l.bd >= STRAYBOUND then return false end
  if l.m < STRAYGAPS then return l.ll > 0 or (l.lw == 0 and owed < 2) end
  if l.qs <= 0 then return false end
  local demand = 60000000 / l.qs -- over a run of OKs, not one burst of them
  if not (demand < math.max(l.r, l.ll) * STRAYDEMAND) then return false end
  return demand / 60000000 * math.max(l.ql, l.qb) < STRAYINFLIGHT
end

-- The latency averages: the fast one's weight, and the time constant
-- (microseconds) over which the base follows a higher latency up: over
-- minutes, not answers (a queue of ours drains in seconds; a host slower
-- for good is followed within minutes).
local LATFAST, LATTAU = 1 / 4, 300e6
local SERVEDGAPS = 4
local MAXDRAIN = 4

-- observeLatency counts an OK answer's time to headers (microseconds) at
-- now; l.o is the previous OK's time (0: none, and no drift).
local function observeLatency(us)
  if not (us > 0) then return end
  if us > 1e15 then us = 1e15 end
  if l.ql == 0 then
    l.ql, l.qb = us, us
    return
  end
  if us < l.qb then
    l.qb = us
  elseif l.o > 0 and now > l.o then
    l.qb = l.qb + (us - l.qb) * (1 - math.exp(-(now - l.o) / LATTAU))
  end
  l.ql = l.ql + (us - l.ql) * LATFAST
end

-- slowing answers a host whose latency rises under our load, paced faster
-- than it serves: the served rate becomes the learnt ceiling, the rate
-- drops to let the queue drain and climbs to MARGIN below it. It reports
-- whether it changed the rate.
local function slowing()
  if not risen() then
    l.ra = 0
    return false
  end
  if l.ra == 0 then l.ra = now end
  if l.m < 1 or l.q <= 0 then return false end
  -- What the host serves: the slow average of the gaps once SERVEDGAPS are
  -- in it (a server's workers answer in bursts), else the fast one.
  local served = 60000000 / l.q
  if l.m >= SERVEDGAPS and l.qs > 0 then served = 60000000 / l.qs end
  if (now - l.ra < LATSUSTAIN and l.pn == 0) or served / 60000000 * (l.ql - l.qb) < LATQUEUED or l.r < served * LATAHEAD then
    return false
  end
  l.ra = 0
  local fl = math.min(FLOOR, l.c)
  if l.pn > 0 then l.bo = math.min(2 * l.bo, MAXBACKOFF) end
  if l.bo == 0 then l.bo = FIRSTBACKOFF end
  if l.ll == 0 or l.pn > 0 then l.ll = served else l.ll = math.min(l.ll, served) end
  -- The queue: what the pace sent over the fast latency, less what the
  -- host serves at once; it drains at the rate served. The pace only
  -- bounds what the crawl sent: at most MAXDRAIN times the wait the
  -- answers show.
  local queue = math.min(l.r / served * l.ql - l.qb, MAXDRAIN * (l.ql - l.qb))
  local target = math.min(math.max(served * (1 - MARGIN), fl), top())
  l.g, l.k, l.pn = target, 0, 0
  l.bs = target
  l.cr = 0
  l.pa = now + l.bo
  l.m = 0
  setRate(target)
  -- Paused while the queue drains: no refusal's pause.
  if pauseFor(queue) then l.sy = 1 end
  return true
end

-- save writes the state back when it changed (with a Refused outcome:
-- the parts present, or deletes the key when a part was forgotten and
-- none is left) and sets its expiry: none while the host is halted (a halt
-- keeps its breaker, as in memory), else when the later of the two parts
-- would be forgotten.
local function save()
  local fl, B, L = 0, b, l
  if b then fl = 1 else B = {s = 0, g = 0, q = 0, x = 0, k = 0, fl = 0, o = 0, u = 0, p = 0} end
  if l then fl = fl + 2 else L = {0, 0, 0, 0, 0, 0, p = 0, tf = 0, a = 0, k = 0, w = 0, u = 0, e = 0, o = 0, m = 0,
    pa = 0, pn = 0, rs = 0, rn = 0, cs = 0, ce = 0, cn = 0, r = 0, c = 0, x = 0, g = 0, bs = 0, ll = 0, cr = 0, t = 0,
    q = 0, bo = 0, ps = 0, ql = 0, qb = 0, sr = 0, sy = 0, bd = 0, lw = 0, qs = 0, rt = 0, ra = 0} end
  if fl == 0 then
    if dropped then redis.call('DEL', S) end
    return
  end
  local v = struct.pack(FMT, 1, fl, B.s, B.g, B.q, B.x, B.k, B.fl, B.o, B.u, B.p,
    L.p, L.tf, L.a, L.k, L.w, L.u, L[1], L[2], L[3], L[4], L[5], L[6], L.e, L.o, L.m, L.pa, L.pn, L.rs, L.rn, L.cs, L.ce, L.cn,
    L.r, L.c, L.x, L.g, L.bs, L.ll, L.cr, L.t, L.q, L.bo, L.ps) .. struct.pack(EXT, L.ql, L.qb, L.sr, L.sy, L.bd, L.lw, L.qs, L.rt, L.ra)
  if raw and #raw > SIZE + EXTSIZE then v = v .. string.sub(raw, SIZE + EXTSIZE + 1) end
  if v == raw then
    if halted then redis.call('PERSIST', S) end
    return
  end
  raw = v
  if halted then
    redis.call('SET', S, v)
    return
  end
  local at, never = 0, false
  if b then
    if BIDLE < 0 then never = true else
      at = math.max(at, b.u + BIDLE)
      if b.s == OPENED then at = math.max(at, b.o) end
    end
  end
  if l then
    if LIDLE < 0 then never = true else at = math.max(at, l.u + LIDLE, l.p) end
  end
  if never then
    redis.call('SET', S, v)
  else
    redis.call('SET', S, v, 'PX', math.max(1, math.ceil((at - now) / 1000)))
  end
end
