"""Shared Kubernetes adapters of the koord daemons: client construction with a client-side rate
limiter, list+watch informers over plain JSON dicts, Lease-based leader election and a best-effort
event recorder. agent, manager and scheduler may all import this package (they may not import each
other), so everything that talks to the API server lives here once.

Imports: the kubernetes client, the standard library and apis only.
"""
