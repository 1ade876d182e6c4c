"""The manager's controllers: slo-controller-config cache, NodeSLO and NodeMetric (noderesource elsewhere)."""
