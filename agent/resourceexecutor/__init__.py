"""The resource executor package: the only writer of host files (cgroups, resctrl, kernel knobs); see
docs/rules/koordlet.md. ``actions`` holds the action types the QoS strategies return and the executor and
the evictor consume.

Imports: standard library, agent.system.*, agent.podmeta; never agent.qosmanager.
"""

from agent.resourceexecutor.audit import AuditLog
from agent.resourceexecutor.executor import ResourceExecutor, WriteResult, WriteStatus, default_roots

__all__ = ["AuditLog", "ResourceExecutor", "WriteResult", "WriteStatus", "default_roots"]
