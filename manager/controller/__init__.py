"""The manager's controller runtime: rate-limited work queue, reconcile loops, leader-gated manager."""
