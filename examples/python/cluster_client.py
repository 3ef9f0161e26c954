"""The RedisCluster the cluster examples share: redis-py's defaults, and on
redis-py 4.3 (Debian bookworm's) the one line it needs to follow a failover
(see the README's cluster section)."""

import logging
import os
import sys
import time

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisClusterException

# What a failover makes a call raise for a moment: CLUSTERDOWN, TRYAGAIN,
# UNBLOCKED and connection errors (RedisError), no node giving a slot map
# (RedisClusterException), and redis-py 4.3's IndexError once when a replica
# becomes master (redis-py #2549, fixed in 4.4.2).
FAILOVER_ERRORS = (redis.RedisError, RedisClusterException, IndexError)

# redis-py logs every error it retries with a full traceback
# (log.exception); the examples print the errors they see themselves.
logging.getLogger("redis.cluster").addHandler(logging.NullHandler())
logging.getLogger("redis.cluster").propagate = False


def connect(retry_for=30, **kwargs):
    """A RedisCluster, once a node gives the slot map: while a leader is
    being elected every node answers CLUSTER SLOTS with CLUSTERDOWN, and
    RedisCluster() raises; that is retried for up to retry_for seconds."""
    seeds = os.environ.get("DELAYD_CLUSTER", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")
    nodes = [ClusterNode(h, int(p)) for h, p in (a.rsplit(":", 1) for a in seeds.split(","))]
    if tuple(int(x) for x in redis.__version__.split(".")[:2]) < (4, 4):
        # redis-py 4.3 deep-copies its connection settings when it re-reads
        # the slot map after a connection error, and that copy fails
        # ("cannot pickle '_thread.lock' object", redis-py #2377, fixed in
        # 4.4.0): without this line a 4.3 client never finds the new leader.
        RedisCluster.__deepcopy__ = lambda self, memo: self
    deadline = time.monotonic() + retry_for
    while True:
        try:
            return RedisCluster(startup_nodes=nodes, decode_responses=True, **kwargs)
        except FAILOVER_ERRORS as e:
            if time.monotonic() > deadline:
                raise
            print(f"RedisCluster: {e}; trying again", file=sys.stderr, flush=True)
            time.sleep(0.2)
