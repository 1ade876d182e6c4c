"""Authentication for koord's gRPC services, shared by the MetricHub (manager) and the scheduler's shard
arbiter (docs/shards.md#security): bearer tokens and their authenticators (tokens), TokenReview over an
ApiClient (kubeauth), per-peer limits (limits), the authentication gate (gate), TLS credentials, token
files and a server interceptor (transport).

Imports: nothing (the package's modules say what each imports).
"""
