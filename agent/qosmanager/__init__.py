"""koordlet QoS manager: strategies (pure decide), their runners, registry."""
