import { createHash } from 'node:crypto'

/**
 * The GCRA of limits/gcra.ts as one Redis script: every rate limit of a request is decided in one
 * round trip, atomically (a script runs alone, redis.io "Scripting with Lua"), on Redis's own
 * clock (TIME), so replicas with drifting clocks still share one schedule. All checks pass or
 * none is counted. Values are TATs in ms with microsecond decimals; each key expires when idle.
 *
 * KEYS: one state key per check. ARGV: interval ms and burst per check.
 * Reply: {allowed (1|0), then per check: remaining, retry-after ms (ceil), reset ms (ceil)}.
 */
export const GCRA_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local ok = true
local tats = {}
local out = {0}
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', KEYS[i]))
  if tat == nil or tat < now then tat = now end
  local nxt = tat + interval
  local capacity = burst * interval
  local ahead = nxt - now
  if ahead > capacity + 1e-6 then
    ok = false
    out[#out + 1] = 0
    out[#out + 1] = math.ceil(ahead - capacity)
    out[#out + 1] = math.ceil(tat - now)
  else
    tats[i] = nxt
    out[#out + 1] = math.floor((capacity - ahead) / interval + 1e-6)
    out[#out + 1] = 0
    out[#out + 1] = math.ceil(ahead)
  end
end
if ok then
  out[1] = 1
  for i = 1, #KEYS do
    redis.call('SET', KEYS[i], string.format('%.3f', tats[i]), 'PX', math.ceil(tats[i] - now) + 1)
  end
end
return out
`

export const GCRA_SCRIPT_SHA = createHash('sha1').update(GCRA_SCRIPT).digest('hex')
