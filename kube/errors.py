"""Errors shared by the Kubernetes adapters (kube.client and kube.rest). Imports: nothing."""

from __future__ import annotations

__all__ = ["KubeConfigError"]


class KubeConfigError(RuntimeError):
    """No usable cluster configuration was found; the message names every source that was tried."""
