"""koordlet reporter: builds the NodeMetric status (build.py, pure) and ships it (loop.py, hubpush.py)."""
