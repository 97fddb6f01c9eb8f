-- resume: lift the host's halt; the breaker keeps its state. Returns 1
-- when the host was halted.

if not halted then return 0 end
redis.call('DEL', H)
halted = false
if b then
  b.u = now
end
save()
return 1
