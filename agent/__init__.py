"""koordlet, the node agent (a DaemonSet). May import apis and proto; never manager or scheduler."""
