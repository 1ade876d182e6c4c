"""The MetricHub: agents stream NodeMetric reports in, schedulers List and Watch them."""
