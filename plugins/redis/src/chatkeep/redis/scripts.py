"""The Lua scripts the Redis store runs: one per operation that must be atomic.

Each touches only keys of one hash slot (a session's keys and the index beside them), so
they run unchanged on Redis Cluster. Redis does not roll a script back, so each reads and
checks everything before its first write.
"""

from __future__ import annotations

import hashlib

__all__ = ["APPEND", "DELETE", "LIST_PAGE", "RECENT_BACKFILL", "RECENT_PAGE", "Script"]


class Script:
    """A Lua source and the SHA1 ``EVALSHA`` names it by."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source.encode()
        self.sha = hashlib.sha1(self.source).hexdigest().encode()  # noqa: S324 (Redis's id)


#: Append a batch. KEYS: log, digests, legacy ids, index, and on a single server the
#: namespace's last-append index (a sorted set scored by the server's TIME, in seconds).
#: ARGV: ttl ms, conditional ("1"/"0"), expected last id ("" = empty log), index member,
#: then (id, digest, element body) per record.
#: Returns the number of records stored, ``{"conflict", id}`` when an id is stored with
#: other data, or ``{"stale"}`` when the log no longer ends at the expected record.
APPEND = Script(
    """\
local function head(position)  -- format byte 2, then the position as 8 bytes big-endian
  if struct then return struct.pack('>BI8', 2, position) end  -- every Redis has struct
  local bytes = {}  -- a server without it (fakeredis): byte by byte
  for k = 8, 1, -1 do
    bytes[k] = position % 256
    position = math.floor(position / 256)
  end
  return string.char(2, unpack(bytes))
end
local ids, digests, bodies = {}, {}, {}
-- Only sessions written by chatkeep-redis 0.1 have a legacy id set. A field no record id
-- can name (ids hold no NUL) in the digests hash says a session was found without one, so
-- its appends skip the EXISTS: it comes back with the first page of stored digests (one
-- HMGET per 1000 records) and is written with the new digests.
local checked = string.char(0) .. 'no-legacy-ids'
-- Another such field says the session's keys carry no expiry (an append without a ttl
-- took it off and wrote the field; an append with one removes the field), so an append
-- without a ttl skips the two PERSISTs. A session written before the field existed has
-- not got it: its first append without a ttl persists as before and writes the field.
local lasting = string.char(0) .. 'no-expiry'
local legacy, unmarked, persistent = nil, false, false
for first = 5, #ARGV, 3000 do
  local asked = {}
  for i = first, math.min(first + 2999, #ARGV), 3 do asked[#asked + 1] = ARGV[i] end
  local probe = legacy == nil
  if probe then
    asked[#asked + 1] = checked
    asked[#asked + 1] = lasting
  end
  local found = redis.call('HMGET', KEYS[2], unpack(asked))
  if probe then
    unmarked = not found[#asked - 1]
    persistent = found[#asked] and true or false
    legacy = unmarked and redis.call('EXISTS', KEYS[3]) == 1
  end
  for k = 1, #asked - (probe and 2 or 0) do
    local i = first + 3 * (k - 1)
    local id, digest, stored = ARGV[i], ARGV[i + 1], found[k]
    if stored then
      if stored ~= digest then return {'conflict', id} end
    elseif not legacy or redis.call('SISMEMBER', KEYS[3], id) == 0 then
      ids[#ids + 1] = id
      digests[#digests + 1] = digest
      bodies[#bodies + 1] = ARGV[i + 2]
    end
  end
end
local ttl = tonumber(ARGV[1])
-- Whether this append writes the no-expiry field (with the digests, so only when it
-- stores records: a retry that stores nothing persists without it).
local settle = ttl <= 0 and not persistent and not legacy
local function expire()  -- every append sets the expiry, a retry included; none: no expiry
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
    if legacy then redis.call('PEXPIRE', KEYS[3], ttl) end
    if persistent then redis.call('HDEL', KEYS[2], lasting) end
  elseif not persistent or legacy then
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[2])
    if legacy then redis.call('PERSIST', KEYS[3]) end
  end
end
local count = #ids
if count == 0 then
  expire()
  return 0
end
if ARGV[2] == '1' then
  local last = redis.call('LINDEX', KEYS[1], -1)
  local last_id = ''
  if last then
    local kind = string.byte(last, 1)
    if kind == 2 then
      local size = string.byte(last, 14) * 256 + string.byte(last, 15)
      last_id = string.sub(last, 16, 15 + size)
    elseif kind == 1 then
      local size = string.byte(last, 2) * 256 + string.byte(last, 3)
      last_id = string.sub(last, 4, 3 + size)
    end
  end
  if last_id ~= ARGV[3] then return {'stale'} end
end
local length = redis.call('LLEN', KEYS[1])
local elements = {}
for j = 1, count do
  elements[j] = head(length + j - 1) .. bodies[j]
end
for first = 1, count, 1000 do
  local last = math.min(first + 999, count)
  redis.call('RPUSH', KEYS[1], unpack(elements, first, last))
  local pairs = {}
  if first == 1 and unmarked and not legacy then
    pairs[1], pairs[2] = checked, '1'
  end
  if first == 1 and settle then
    pairs[#pairs + 1], pairs[#pairs + 2] = lasting, '1'
  end
  for j = first, last do
    pairs[#pairs + 1] = ids[j]
    pairs[#pairs + 1] = digests[j]
  end
  redis.call('HSET', KEYS[2], unpack(pairs))
end
-- A session with records is in the index already (delete and the listing's clean-up of an
-- expired log remove both); a legacy one may predate the index: add it.
if length == 0 or legacy then redis.call('ZADD', KEYS[4], 0, ARGV[4]) end
if KEYS[5] then
  local now = redis.call('TIME')
  redis.call('ZADD', KEYS[5], now[1] .. '.' .. string.format('%06d', tonumber(now[2])), ARGV[4])
end
expire()
return count
"""
)

#: Erase a session. KEYS: log, digests, legacy ids, index (and, on a single server, the
#: last-append index and the namespace's two marker keys, dropped with its last session so
#: that an emptied namespace leaves no key behind). ARGV: index member.
DELETE = Script(
    """\
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
if KEYS[5] then
  redis.call('ZREM', KEYS[5], ARGV[1])
  if redis.call('ZCARD', KEYS[4]) == 0 then redis.call('DEL', KEYS[6], KEYS[7]) end
end
return 1
"""
)

#: One page of the index (or of several per-slot indexes, walked in order, on one node).
#: No KEYS (the index keys are in ARGV, so one call can walk many slots of a cluster node).
#: ARGV: lex min, lex max, page size, key stem, where to continue in the first index
#: (``"(member"``, or ``""`` for the start), then the index keys.
#: Returns {indexes finished, where to continue in the next one or "", live members...}.
#: Members whose log no longer exists (expired by a TTL) are dropped from the index.
LIST_PAGE = Script(
    """\
local remaining = tonumber(ARGV[3])
local result = {0, ''}
for i = 6, #ARGV do
  local from = ARGV[1]
  if i == 6 and ARGV[5] ~= '' then from = ARGV[5] end
  local members = redis.call('ZRANGEBYLEX', ARGV[i], from, ARGV[2], 'LIMIT', 0, remaining)
  for _, member in ipairs(members) do
    if redis.call('EXISTS', ARGV[4] .. member .. '}:log') == 1 then
      result[#result + 1] = member
    else
      redis.call('ZREM', ARGV[i], member)
    end
  end
  remaining = remaining - #members
  if remaining == 0 then
    result[2] = '(' .. members[#members]
    return result
  end
  result[1] = i - 5
end
return result
"""
)


#: One page of the last-append index, newest first (ties by decoded id, descending), strictly
#: after the cursor. KEYS: the last-append index, the sessions index. ARGV: key stem, cursor
#: score (``"+inf"`` for the start), cursor member (``""`` for none), how many live members
#: to return, the encoded prefix (``""`` for none), how many members to examine at most,
#: then the prefix's ZRANGEBYLEX bounds in the sessions index.
#: Returns {1 when the index is exhausted else 0, the last examined score, its member,
#: then member, score for each live match}. Members whose log no longer exists (expired by
#: a TTL) are removed from the index as they are met.
#: With a prefix that few sessions match (k of n, at most 2,000, and k * k at most
#: the page's size times n), the page is taken from the prefix's range of the sessions
#: index instead (their scores by ``ZMSCORE``, sorted here): one call per page whatever n,
#: where the walk of the last-append index would examine ~n/k members per match.
RECENT_PAGE = Script(
    """\
local key, stem, prefix = KEYS[1], ARGV[1], ARGV[5]
local score, member = ARGV[2], ARGV[3]
local wanted, budget = tonumber(ARGV[4]), tonumber(ARGV[6])
local result = {0, score, member}
local found = 0
-- Ties order by the decoded id (its UTF-8 bytes: code-point order), not by the member:
-- '%XX' sorts below every unescaped character. Lua's '<' on strings may use strcoll, so
-- the comparison goes byte by byte.
local function decode(name)
  return (string.gsub(name, '%%(%x%x)', function(hex) return string.char(tonumber(hex, 16)) end))
end
local function below(a, b)  -- a < b, bytewise
  local n = math.min(#a, #b)
  local i = 1
  while i <= n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
    i = i + 1
  end
  return #a < #b
end
local after = member ~= '' and decode(member) or nil  -- the cursor's decoded id
if prefix ~= '' then
  local matches = redis.call('ZLEXCOUNT', KEYS[2], ARGV[7], ARGV[8])
  if matches <= 2000 and matches * matches <= wanted * redis.call('ZCARD', key) then
    local names = redis.call('ZRANGEBYLEX', KEYS[2], ARGV[7], ARGV[8])
    local before = score == '+inf' and math.huge or tonumber(score)
    local candidates = {}
    if #names > 0 then
      local scores = redis.call('ZMSCORE', key, unpack(names))
      for i, name in ipairs(names) do
        local at = scores[i]
        if at then
          local value = tonumber(at)
          if value <= before then
            local id = decode(name)
            if value < before or after == nil or below(id, after) then
              candidates[#candidates + 1] = {value, name, at, id}
            end
          end
        end
      end
    end
    table.sort(candidates, function(a, b)
      if a[1] ~= b[1] then return a[1] > b[1] end
      return below(b[4], a[4])
    end)
    for _, candidate in ipairs(candidates) do
      local name, at = candidate[2], candidate[3]
      if redis.call('EXISTS', stem .. name .. '}:log') == 1 then
        result[#result + 1] = name
        result[#result + 1] = at
        found = found + 1
        if found == wanted then
          result[2], result[3] = at, name
          return result
        end
      else
        redis.call('ZREM', key, name)
      end
    end
    result[1] = 1
    return result
  end
end
-- Examine members in order (one tie group, sorted by decoded id descending) from the
-- ``first``: true when the page is full or the budget spent (the cursor is then set).
local function examine(group, first)
  for k = first, #group do
    local name, at = group[k][1], group[k][2]
    score, member = at, name
    budget = budget - 1
    if prefix == '' or string.sub(name, 1, #prefix) == prefix then
      if redis.call('EXISTS', stem .. name .. '}:log') == 1 then
        result[#result + 1] = name
        result[#result + 1] = at
        found = found + 1
      else
        redis.call('ZREM', key, name)
      end
    end
    if found == wanted or budget == 0 then
      result[2], result[3] = score, member
      return true
    end
  end
  return false
end
local function bytes_of(text)  -- the bytes as a table: compared without string.byte calls
  local out = {}
  for i = 1, #text, 1000 do
    local chunk = {string.byte(text, i, math.min(i + 999, #text))}
    for _, byte in ipairs(chunk) do out[#out + 1] = byte end
  end
  return out
end
local function bytes_below(x, y)
  local n = math.min(#x, #y)
  for i = 1, n do
    local p, q = x[i], y[i]
    if p ~= q then return p < q end
  end
  return #x < #y
end
-- Order a tie group (entries {member, score}, given in Redis's member order, ascending or
-- not) by decoded id descending, each entry's id as its third field. Without a '%' in any
-- member, ids are the members and Redis's bytewise order is already the right one.
local function arrange(group, ascending)
  local escaped = false
  for _, entry in ipairs(group) do
    if string.find(entry[1], '%', 1, true) then
      escaped = true
      break
    end
  end
  if not escaped then
    if ascending then
      local n = #group
      for k = 1, math.floor(n / 2) do group[k], group[n + 1 - k] = group[n + 1 - k], group[k] end
    end
    for _, entry in ipairs(group) do entry[3] = entry[1] end
    return group
  end
  for _, entry in ipairs(group) do
    entry[3] = decode(entry[1])
    entry[4] = bytes_of(entry[3])
  end
  table.sort(group, function(a, b) return bytes_below(b[4], a[4]) end)
  return group
end
-- Where the members after the decoded id ``limit`` start in an arranged group (binary
-- search: the group is descending).
local function cut(group, limit)
  local low, high = 1, #group + 1
  while low < high do
    local middle = math.floor((low + high) / 2)
    if below(group[middle][3], limit) then high = middle else low = middle + 1 end
  end
  return low
end
-- A score's whole tie group, arranged.
local function tie_group(at)
  local group = {}
  for _, name in ipairs(redis.call('ZRANGE', key, at, at, 'BYSCORE')) do
    group[#group + 1] = {name, at}
  end
  return arrange(group, true)
end
-- The cursor inside a tie: the rest of its score's group, then strictly below it.
local from = score
if member ~= '' then
  local group = tie_group(score)
  if examine(group, cut(group, after)) then return result end
  from = '(' .. score
end
while true do
  local batch = math.min(budget, 200)
  local items = redis.call(
    'ZRANGE', key, from, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, batch, 'WITHSCORES')
  local full = #items == 2 * batch
  local i = 1
  while i <= #items do
    local at = items[i + 1]
    local j = i  -- the group of ``at`` in this batch: items i .. j
    while j + 2 <= #items and items[j + 3] == at do j = j + 2 end
    local group
    if full and j + 1 == #items then
      group = tie_group(at)  -- the batch may end inside it: take the whole group
    elseif j == i then
      group = {{items[i], at}}
    else
      group = {}
      for k = i, j, 2 do group[#group + 1] = {items[k], at} end
      group = arrange(group, false)
    end
    if examine(group, 1) then return result end
    from = '(' .. at
    i = j + 2
  end
  if not full then
    result[1] = 1
    return result
  end
end
"""
)


#: Put sessions appended to before the last-append index existed into it, a page at a time,
#: scored 0 (they list after every session with a time until their next append moves them;
#: ``NX`` keeps every real score). KEYS: the sessions index, the last-append index, the
#: marker set when done. ARGV: where to continue (``"(member"``, or ``"-"``), page size.
#: Returns where to continue, or ``""`` once every session is in (and the marker is set).
RECENT_BACKFILL = Script(
    """\
local members = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
for _, member in ipairs(members) do
  redis.call('ZADD', KEYS[2], 'NX', 0, member)
end
if #members < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[3], '1')
  return ''
end
return '(' .. members[#members]
"""
)
