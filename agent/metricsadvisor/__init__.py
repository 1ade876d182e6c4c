"""koordlet metrics advisor: collectors that read host and cgroup counters into the metric cache
(docs/rules/koordlet.md#collectors).

``framework`` holds the collect context, the collector protocol and shared state; ``registry`` the default
collectors; ``runner`` the thread that ticks them.
Imports: agent.system, agent.metriccache, agent.podmeta, apis.
"""
