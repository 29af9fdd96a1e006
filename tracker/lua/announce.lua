-- One announce, in one round trip: trim expired peers, record the announce,
-- count the swarm, pick the peers to hand out (tracker/handout.py's rules).
-- Every key is one swarm's ({info-hash hex} hash tag: one Cluster slot).
--
-- KEYS[1] seeds     sorted set: compact endpoint -> expiry (ms)
-- KEYS[2] leechers  sorted set: compact endpoint -> expiry (ms)
-- KEYS[3] peers     hash: compact endpoint -> peer id (20 bytes) .. site name;
--                   field "#d": completed count; "#x": until when the swarm index holds it
-- KEYS[4] starts    hash: site name -> the site's stamp of its last start of this swarm (its own clock)
-- KEYS[5] (optional) the announcer's site: sorted set of its peers in this swarm -> expiry
-- ARGV: now_ms, ttl_ms, member, value, op ("s" seed, "l" leecher, "x" stopped,
--       "n" record nothing), completed ("1"/"0"), numwant, listed ("1"/"0"), max_peers,
--       stamp, site: a seed a site started ("s": recorded in KEYS[4]), or a heartbeat's build time
--       ("x": nothing is removed if the site stamped a start at or after it); "" for none
-- Returns {complete, incomplete, downloaded, index_until or 0, peers4, peers6, {members...}, {peer ids...}}
-- (members and peer ids only when listed)
--
-- About ten commands on the usual path; the keys' TTL is renewed only when
-- the swarm index is (once per half ttl), to 2 x ttl, which outlives every
-- member's expiry: a swarm's keys vanish 1-2 ttl after its last announce.
local S, L, P, T, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local me, value, op = ARGV[3], ARGV[4], ARGV[5]
local numwant, max_peers = tonumber(ARGV[7]), tonumber(ARGV[9])
local stamp, site = ARGV[10], ARGV[11]
local keep = 2 * ttl

local function trim(z)
  -- at most 1000 per call (bounded work); the rest go at the next announce
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 1000)
  if #gone > 0 then
    redis.call('ZREMRANGEBYRANK', z, 0, #gone - 1)
    redis.call('HDEL', P, unpack(gone))
  end
end
trim(S)
trim(L)
if A then redis.call('ZREMRANGEBYSCORE', A, '-inf', now) end

local until_ms = now + ttl
if stamp ~= '' then
  local last = tonumber(redis.call('HGET', T, site) or '-1')
  if op == 'x' and last >= tonumber(stamp) then
    op = 'n'  -- a heartbeat built before the site's last start of this swarm: it says nothing of that seed
  elseif op == 's' and last < tonumber(stamp) then
    redis.call('HSET', T, site, stamp)
    redis.call('PEXPIRE', T, keep)
  end
end
if op == 's' or op == 'l' then
  local into, other = S, L
  if op == 'l' then into, other = L, S end
  local moved = redis.call('ZREM', other, me)
  local added = redis.call('ZADD', into, until_ms, me)
  redis.call('HSET', P, me, value)
  if added == 1 then
    redis.call('PEXPIRE', into, keep)  -- the key may be new
    if moved == 0 and redis.call('ZCARD', S) + redis.call('ZCARD', L) > max_peers then
      -- full: the peer that announced longest ago makes room
      local ls, ss = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES'), redis.call('ZRANGE', S, 0, 0, 'WITHSCORES')
      local z, old = L, ls[1]
      if not old or (ss[1] and tonumber(ss[2]) < tonumber(ls[2])) then z, old = S, ss[1] end
      redis.call('ZREM', z, old)
      redis.call('HDEL', P, old)
    end
  end
  if A and redis.call('ZADD', A, until_ms, me) == 1 then redis.call('PEXPIRE', A, keep) end
elseif op == 'x' then
  redis.call('ZREM', S, me)
  redis.call('ZREM', L, me)
  redis.call('HDEL', P, me)
  if A then redis.call('ZREM', A, me) end
end
if ARGV[6] == '1' then redis.call('HINCRBY', P, '#d', 1) end

local complete, incomplete = redis.call('ZCARD', S), redis.call('ZCARD', L)
local meta = redis.call('HMGET', P, '#d', '#x')
local downloaded = tonumber(meta[1] or '0')
local index_until = 0
if op ~= 'n' and complete + incomplete > 0 and tonumber(meta[2] or '0') - now < ttl / 2 then
  -- The swarm index (outside this slot) is refreshed by the caller.
  redis.call('HSET', P, '#x', until_ms)
  for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, keep) end
  index_until = until_ms
end

-- The handout: the announcer's site first, then seeds, then leechers; each
-- group sampled (ZRANDMEMBER: distinct members, O(count)). A sample of
-- part of a set comes in random order; the whole set comes in score order,
-- so it is shuffled. Peers come back as two strings of compact endpoints
-- (IPv4, IPv6), ready for the answer; one entry each only when listed.
local out = {}
local taken = nil  -- only when the site's peers came first (they overlap the other groups)
local function take(z, room, size)
  if room <= 0 or size == 0 then return end
  local got = redis.call('ZRANDMEMBER', z, room + 1 + (taken and #out or 0))
  if #got == size then
    for i = #got, 2, -1 do
      local j = math.random(i)
      got[i], got[j] = got[j], got[i]
    end
  end
  for _, m in ipairs(got) do
    if m ~= me and not (taken and taken[m]) then
      out[#out + 1] = m
      if taken then taken[m] = true end
      room = room - 1
      if room == 0 then return end
    end
  end
end
if numwant > 0 then
  local seed_room = numwant
  if A then
    taken = {}
    take(A, numwant, redis.call('ZCARD', A))
    seed_room = numwant - #out
  end
  take(S, seed_room, complete)
  take(L, numwant - #out, incomplete)
  if seed_room <= 0 and complete > 0 then
    local has_seed = false
    for _, m in ipairs(out) do
      if redis.call('ZSCORE', S, m) then has_seed = true break end
    end
    if not has_seed then
      for _, m in ipairs(redis.call('ZRANDMEMBER', S, #out + 2)) do
        if m ~= me and not taken[m] then out[#out] = m break end
      end
    end
  end
end
local v4, v6 = {}, {}
for _, m in ipairs(out) do
  if #m == 6 then v4[#v4 + 1] = m else v6[#v6 + 1] = m end
end
local listed, ids = {}, {}
if ARGV[8] == '1' and #out > 0 then
  listed = out
  ids = redis.call('HMGET', P, unpack(out))
  for i = 1, #ids do ids[i] = ids[i] or '' end
end
return {complete, incomplete, downloaded, index_until, table.concat(v4), table.concat(v6), listed, ids}
