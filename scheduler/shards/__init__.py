"""Scheduler shards (docs/shards.md): N koord-scheduler instances, each owning the pending pods whose
UID hashes to it over the live members of its shard group, with optimistic binds checked by one arbiter
so shards never double-book a node.
Imports: nothing (the package's modules say what each imports).
"""
