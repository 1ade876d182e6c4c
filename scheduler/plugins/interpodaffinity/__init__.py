"""InterPodAffinity (docs/rules/scheduler-interpodaffinity.md#interpodaffinity): kube-scheduler 1.20.2's
inter-pod affinity and anti-affinity, Filter and Score, vectorised over the snapshot's rows.
Imports: numpy, apis, scheduler.framework, scheduler.plugins.nodeaffinity."""

from scheduler.plugins.interpodaffinity.args import InterPodAffinityArgs
from scheduler.plugins.interpodaffinity.plugin import DEFAULT_WEIGHT, InterPodAffinity
from scheduler.plugins.interpodaffinity.topology import NAME

__all__ = ["DEFAULT_WEIGHT", "NAME", "InterPodAffinity", "InterPodAffinityArgs"]
