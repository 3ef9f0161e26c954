package fromredis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/transfer"
)

// zsetFormat reads the hand-made delay queue: a sorted set whose members
// are the payloads and whose scores are due times, moved to a list by a
// Lua script or a poller. Each named key is a queue of the same name. The
// id is made from the payload (the first 16 bytes of its SHA-256, in hex),
// which a sorted set holds at most once: a rerun makes the same ids.
type zsetFormat struct{}

func (zsetFormat) sets(_ context.Context, _ *redis.Client, o *Options) ([][]set, error) {
	var groups [][]set
	for _, k := range o.Queues {
		groups = append(groups, []set{{key: k, queue: k}})
	}
	return groups, nil
}

func (zsetFormat) jobs(_ context.Context, _ *redis.Client, o *Options, batch []item, add func(transfer.Job), _ func(string)) error {
	unit := 1.0
	if o.ScoreUnit == "s" {
		unit = 1000
	}
	for _, it := range batch {
		j := transfer.Job{Queue: it.set.queue, ID: zsetID(it.member), Due: ms(it.value, unit)}
		setPayload(&j, []byte(it.member))
		add(j)
	}
	return nil
}

func zsetID(member string) string {
	h := sha256.Sum256([]byte(member))
	return hex.EncodeToString(h[:16])
}
