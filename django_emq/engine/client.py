"""The client type every engine call takes: one server, or a Valkey Cluster."""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster

#: A client of one server, or of a Valkey Cluster.
Client = redis.Redis | RedisCluster

__all__ = ["Client"]
