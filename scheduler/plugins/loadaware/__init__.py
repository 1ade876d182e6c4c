"""LoadAwareScheduling (docs/rules/scheduler.md#loadawarescheduling): filter and score nodes by their
measured load plus the estimated load of recently assigned pods and of the incoming pod. Imports: numpy,
apis, scheduler.framework."""

from scheduler.plugins.loadaware.args import ArgsError, LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.plugin import NAME, LoadAwareScheduling

__all__ = ["NAME", "ArgsError", "LoadAwareScheduling", "LoadAwareSchedulingArgs"]
