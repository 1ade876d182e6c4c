"""koordlet states informer: pods, Node, NodeSLO and NodeMetric of this node."""
