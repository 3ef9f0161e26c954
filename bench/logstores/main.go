// logstores: the CPU and time a Raft follower's log store spends a batch,
// for raftlog, raft-boltdb (as cluster.New configured it before raftlog),
// pebble and raft-wal (docs/decisions/raft-log-store.md). Each store takes
// -n entries in batches of -b, of -d bytes, with Raft's compaction (a
// prefix deletion every 8,192 entries keeping 10,240) and a read of a
// recent entry a batch; CPU is the process's (pebble's compactions
// included). A module of its own: pebble and raft-wal stay out of delayd's.
//
//	cd bench/logstores && go build -o /tmp/logstores . &&
//	  for s in raftlog bolt pebble wal; do BENCHDIR=/var/tmp /tmp/logstores -store $s; done
//	  for s in raftlog bolt pebble wal; do /tmp/logstores -store $s -n 8000 -sync; done
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"go.etcd.io/bbolt"

	"github.com/delayd/delayd/raftlog"
)

type pebbleStore struct {
	db   *pebble.DB
	sync bool
	buf  []byte
}

func key(i uint64) []byte { var k [8]byte; binary.BigEndian.PutUint64(k[:], i); return k[:] }

func encode(dst []byte, l *raft.Log) []byte {
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type))
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	return binary.AppendVarint(dst, l.AppendedAt.UnixNano())
}

func (p *pebbleStore) FirstIndex() (uint64, error) {
	it, _ := p.db.NewIter(nil)
	defer it.Close()
	if !it.First() {
		return 0, nil
	}
	return binary.BigEndian.Uint64(it.Key()), nil
}
func (p *pebbleStore) LastIndex() (uint64, error) {
	it, _ := p.db.NewIter(nil)
	defer it.Close()
	if !it.Last() {
		return 0, nil
	}
	return binary.BigEndian.Uint64(it.Key()), nil
}
func (p *pebbleStore) GetLog(i uint64, l *raft.Log) error {
	v, c, err := p.db.Get(key(i))
	if err != nil {
		return raft.ErrLogNotFound
	}
	defer c.Close()
	idx, n := binary.Uvarint(v)
	l.Index = idx
	v = v[n:]
	l.Term, n = binary.Uvarint(v)
	v = v[n:]
	l.Type = raft.LogType(v[0])
	v = v[1:]
	dl, n := binary.Uvarint(v)
	v = v[n:]
	l.Data = append([]byte(nil), v[:dl]...)
	return nil
}
func (p *pebbleStore) StoreLog(l *raft.Log) error { return p.StoreLogs([]*raft.Log{l}) }
func (p *pebbleStore) StoreLogs(ls []*raft.Log) error {
	b := p.db.NewBatch()
	for _, l := range ls {
		p.buf = encode(p.buf[:0], l)
		b.Set(key(l.Index), p.buf, nil)
	}
	o := pebble.NoSync
	if p.sync {
		o = pebble.Sync
	}
	return b.Commit(o)
}
func (p *pebbleStore) DeleteRange(lo, hi uint64) error {
	return p.db.DeleteRange(key(lo), key(hi+1), pebble.NoSync)
}

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	n := flag.Int("n", 40000, "entries")
	b := flag.Int("b", 8, "entries a batch")
	d := flag.Int("d", 2048, "bytes an entry")
	sync := flag.Bool("sync", false, "fsync every batch (appendfsync always)")
	which := flag.String("store", "raftlog", "raftlog, bolt, pebble, wal")
	flag.Parse()
	dir, _ := os.MkdirTemp(os.Getenv("BENCHDIR"), "lsbench-")
	defer os.RemoveAll(dir)
	var s raft.LogStore
	var err error
	switch *which {
	case "raftlog":
		s, err = raftlog.Open(filepath.Join(dir, "raft.log"), raftlog.Options{NoSync: !*sync})
	case "bolt":
		s, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db"),
			BoltOptions: &bbolt.Options{Timeout: 10 * time.Second, NoFreelistSync: true}, NoSync: !*sync})
	case "pebble":
		var db *pebble.DB
		db, err = pebble.Open(dir, &pebble.Options{})
		s = &pebbleStore{db: db, sync: *sync}
	case "wal":
		s, err = wal.Open(dir)
	}
	if err != nil {
		panic(err)
	}
	data := make([]byte, *d)
	for i := range data {
		data[i] = byte(i * 7)
	}
	batch := make([]*raft.Log, *b)
	var first uint64 = 1
	c0, t0 := cpu(), time.Now()
	var l raft.Log
	for i := 0; i < *n; i += *b {
		for k := range batch {
			batch[k] = &raft.Log{Index: uint64(i + k + 1), Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
		}
		if err := s.StoreLogs(batch); err != nil {
			panic(err)
		}
		last := uint64(i + *b)
		if last%8192 < uint64(*b) && last > 10240 { // raft's compaction after a snapshot
			if err := s.DeleteRange(first, last-10240); err != nil {
				panic(err)
			}
			first = last - 10240 + 1
		}
		if err := s.GetLog(last-uint64(*b)/2, &l); err != nil { // a replication read of a recent entry
			panic(err)
		}
	}
	c1, t1 := cpu(), time.Now()
	batches := float64(*n / *b)
	fmt.Printf("%-8s sync=%-5v batch=%d bytes=%d: %6.1f µs CPU a batch, %6.1f µs wall a batch, %5.2f µs CPU an entry\n",
		*which, *sync, *b, *d, float64((c1-c0).Microseconds())/batches, float64(t1.Sub(t0).Microseconds())/batches,
		float64((c1-c0).Microseconds())/float64(*n))
	if c, ok := s.(interface{ Close() error }); ok {
		c.Close()
	}
}
