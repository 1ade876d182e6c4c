"""The manager's controller runtime, the reconcile machinery the controllers (manager.controllers) run
on: rate-limited work queue, reconcile loops, leader-gated manager."""
