package fromredis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// entry is one member of a sorted set with its score, the score kept as
// the text Redis gave: Redis writes scores with 17 significant digits, so
// the text goes back to it exactly as a bound, where a float formatted
// again by Go might not.
type entry struct {
	member string
	score  string
	value  float64
}

// tiesScript returns the entries of a sorted set after the one read last,
// ARGV[2] score and ARGV[3] member, that have the same score: ARGV[1] at
// most, as member, score pairs. Those after them, of higher score, come
// from a plain ZRANGE BYSCORE sent in the same round trip (see next).
//
// It finds where to go on by (score, member) and not by rank, because the
// old system keeps adding and removing while we read: an entry removed
// before our place would shift every rank after it by one, and the next
// page would pass over one job. It does not look the last member up with
// ZRANK either, since the old system may just have taken it. Instead it
// counts the entries of lower score (ZCOUNT, O(log n)) and searches the
// entries of equal score, which Redis keeps in byte order of member, for
// the first one after ours: O(log n · log k) for k ties. Ties are the rule
// in asynq's sets, scored in whole seconds. The comparison is by bytes,
// written out, because Lua's < on strings follows the server's locale.
// The score goes back to Redis as the text Redis gave, so it is exact.
var tiesScript = redis.NewScript(`
local function after(a, b)
  if a == b then return false end
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end
local key, n, s, m = KEYS[1], tonumber(ARGV[1]), ARGV[2], ARGV[3]
local lo = redis.call('ZCOUNT', key, '-inf', '(' .. s)
local hi = lo + redis.call('ZCOUNT', key, s, s)
local last = hi - 1
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  if after(redis.call('ZRANGE', key, mid, mid)[1], m) then hi = mid else lo = mid + 1 end
end
if lo > last then return {} end
return redis.call('ZRANGE', key, lo, math.min(last, lo + n - 1), 'WITHSCORES')
`)

// pager reads one sorted set in pages, in (score, member) order, up to the
// last entry it held when the pager began: a snapshot's end, so a read
// ends even while producers add faster than it reads. Entries added or
// removed meanwhile before that end are seen or not, depending on whether
// they were there when their page was read. Pages only move forward in
// (score, member), so an entry that stayed in the set the whole time is
// seen exactly once; one the old system removes and adds back further on
// (a BullMQ job that failed and waits for its retry) may be seen again.
type pager struct {
	rdb  redis.UniversalClient
	key  string
	size int

	last    *entry // read last; nil before the first page
	end     *entry // the set's last entry when the pager began; nil: empty
	started bool
	done    bool
}

func newPager(rdb redis.UniversalClient, key string, size int) *pager {
	return &pager{rdb: rdb, key: key, size: size}
}

// next returns the next page, empty once the set is read to its end.
func (p *pager) next(ctx context.Context) ([]entry, error) {
	if !p.started {
		p.started = true
		last, err := p.rdb.ZRangeWithScores(ctx, p.key, -1, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("fromredis: the last entry of %s: %w", p.key, err)
		}
		if len(last) == 0 {
			p.done = true
		} else {
			p.end = &entry{member: last[0].Member.(string), value: last[0].Score}
		}
	}
	if p.done {
		return nil, nil
	}
	// One round trip: the ties after the last entry read (a script), and
	// the entries of higher score (a plain ZRANGE, whose reply Redis
	// writes without going through Lua). An entry added between the two
	// at the last score is missed, as one added just after the read would
	// be: a second run brings it.
	var raw []string
	if p.last == nil {
		v, err := p.rdb.Do(ctx, "ZRANGE", p.key, 0, p.size-1, "WITHSCORES").StringSlice()
		if err != nil {
			return nil, fmt.Errorf("fromredis: reading %s: %w", p.key, err)
		}
		raw = v
	} else {
		pipe := p.rdb.Pipeline()
		ties := tiesScript.EvalSha(ctx, pipe, []string{p.key}, p.size, p.last.score, p.last.member)
		higher := pipe.Do(ctx, "ZRANGE", p.key, "("+p.last.score, "+inf", "BYSCORE", "LIMIT", 0, p.size, "WITHSCORES")
		if _, err := pipe.Exec(ctx); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := tiesScript.Load(ctx, p.rdb).Err(); err != nil {
				return nil, fmt.Errorf("fromredis: loading the script: %w", err)
			}
			return p.next(ctx)
		} else if err != nil {
			return nil, fmt.Errorf("fromredis: reading %s: %w", p.key, err)
		}
		t, err := ties.StringSlice()
		if err != nil {
			return nil, fmt.Errorf("fromredis: reading %s: %w", p.key, err)
		}
		h, err := higher.StringSlice()
		if err != nil {
			return nil, fmt.Errorf("fromredis: reading %s: %w", p.key, err)
		}
		raw = append(t, h[:min(len(h), 2*p.size-len(t))]...)
	}
	page := make([]entry, 0, len(raw)/2)
	for i := 0; i+1 < len(raw); i += 2 {
		v, err := strconv.ParseFloat(raw[i+1], 64)
		if err != nil {
			return nil, fmt.Errorf("fromredis: %s: score %q of %q: %w", p.key, raw[i+1], raw[i], err)
		}
		e := entry{member: raw[i], score: raw[i+1], value: v}
		if less(*p.end, e) {
			p.done = true
			break
		}
		page = append(page, e)
	}
	if len(raw)/2 < p.size {
		p.done = true
	}
	if len(page) > 0 {
		p.last = &page[len(page)-1]
	}
	return page, nil
}

// less orders entries as a sorted set does: by score, then member bytes.
func less(a, b entry) bool {
	if a.value != b.value {
		return a.value < b.value
	}
	return a.member < b.member
}
