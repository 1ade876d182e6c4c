"""The resource executor package: the only writer of host files (cgroups, resctrl); see
docs/rules/koordlet.md.

Imports: standard library, agent.system.*, agent.qosmanager.framework, agent.podmeta.
"""

from agent.resourceexecutor.audit import AuditLog
from agent.resourceexecutor.executor import ResourceExecutor, WriteResult, WriteStatus, default_roots

__all__ = ["AuditLog", "ResourceExecutor", "WriteResult", "WriteStatus", "default_roots"]
