"""koordlet metrics advisor (SPEC §6.3): collectors that read host and cgroup counters into the metric cache.

``framework`` holds the collect context, the collector protocol and shared state; ``registry`` the default
collectors; ``runner`` the thread that ticks them.
Imports: agent.system, agent.metriccache, agent.podmeta, apis.
"""
