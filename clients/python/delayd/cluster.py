"""connect_cluster: a RedisCluster with what a worker needs to follow a
failover (docs/decisions/failover-clients.md)."""

from typing import Any, Sequence, Tuple, Union

from ._core import fix_cluster_client, parse_nodes


def connect_cluster(nodes: Union[str, Sequence[Union[str, Tuple[str, int]]]], **kwargs: Any) -> Any:
    """A redis.cluster.RedisCluster of the nodes ("h:p,h:p", or a list of
    "h:p" or (host, port)), with kwargs as RedisCluster takes them. On
    redis-py 4.3 it first applies fix_cluster_client, without which the
    client never finds a new leader; later versions need nothing."""
    from redis.cluster import ClusterNode, RedisCluster

    fix_cluster_client()
    return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in parse_nodes(nodes)], **kwargs)
