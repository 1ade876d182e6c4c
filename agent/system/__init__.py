"""Host readers of the koordlet: /proc parsers, cgroup files and pod cgroup paths. Standard library only."""
