"""PodTopologySpread (docs/rules/scheduler-spread.md#podtopologyspread): the plugin class, its args and
the per-row pod counts it shares with SelectorSpread.
Imports: scheduler.plugins.podtopologyspread.
"""

from scheduler.plugins.podtopologyspread.constraints import SpreadArgs
from scheduler.plugins.podtopologyspread.filtering import NAME
from scheduler.plugins.podtopologyspread.plugin import DEFAULT_WEIGHT, PodTopologySpread

__all__ = ["DEFAULT_WEIGHT", "NAME", "PodTopologySpread", "SpreadArgs"]
