"""The engine: fair lanes on Valkey, with no Django anywhere.

It imports ``redis`` and never ``django`` (``tests/test_layers.py`` proves it):
ids and key names (``ids``, ``keys``, ``placement``), the job row and heartbeat
formats (``rows``, ``payload``), the Lua scripts and their loader (``lua/``,
``scripts``, ``calls``), the queues (``queue``, ``shards``), idle workers'
parking (``parking``) and bounded operator reads (``browse``). The Django
layer above it (``django_emq.conf``, ``connection``, ``backend``, ``lanes``)
builds clients and settings and hands them down.
"""
