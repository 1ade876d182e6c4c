"""The shard's Lease heartbeat and its view of the group (docs/shards.md#membership): every ``interval``
seconds it renews its own Lease (a merge patch; created when missing), lists the group's Leases by
label, reads the group's leader Lease, and recomputes the members and the arbiter's address with the
pure functions of scheduler.shards.membership; ``on_change(members)`` is called (on the heartbeat
thread) whenever the member list changes. On stop it deletes its own Lease, so the others see it leave
at their next listing instead of a lease duration later.

Self-fencing, as kube/leaderelection.py's ``is_leading``: ``is_member()`` turns false by this shard's
own monotonic clock once its Lease may have expired in the others' eyes (the start of the last
successful renewal plus the lease duration, less a margin), even while a renewal still hangs: a shard
that cannot renew stops admitting pods before the others take them over.

Every request has its own deadline and is sent once, on a client of its own (kube.client.dedicated_client).
Imports: the kubernetes client, kube (client, leaderelection), scheduler.shards.membership, the standard
library.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube.client import dedicated_client
from kube.leaderelection import micro_time
from scheduler.shards.membership import (
    GROUP_LABEL,
    Observed,
    arbiter_address,
    lease_body,
    lease_name,
    members,
    observe,
)

__all__ = ["ShardHeartbeat"]

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"


class ShardHeartbeat:
    """One shard's membership in group ``group`` (the scheduler name) of namespace ``namespace``.

    ``api`` is a ``kubernetes.client.ApiClient``, whose server and credentials the heartbeat uses on a
    client of its own; or a ``CoordinationV1Api``, used as it is.

    ``leader_lease`` names the group's leader Lease (today's ``koord-scheduler``), whose holder hosts
    the arbiter; it lives in ``leader_namespace`` (the lock namespace; default ``namespace``), the shard
    Leases in ``namespace`` (docs/shards.md#deploy: a namespace of their own, for least privilege).
    ``address`` is published on our Lease for the others to reach our arbiter; set it
    (``publish``) only while this shard serves one. ``run(stop)`` blocks until ``stop``, then deletes our
    Lease unless ``delete_on_stop`` is false (the others then see us leave a lease duration later, as
    after a crash).
    """

    def __init__(
        self,
        api: Any,
        *,
        namespace: str,
        group: str,
        identity: str,
        leader_lease: str = "koord-scheduler",
        leader_namespace: str | None = None,
        lease_duration: float = 15.0,
        interval: float = 2.0,
        on_change: Callable[[list[str]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        margin: float | None = None,
        delete_on_stop: bool = True,
    ) -> None:
        if not identity:
            raise ValueError("identity must not be empty")
        if not lease_duration > interval > 0:
            raise ValueError(f"lease_duration ({lease_duration}) must exceed interval ({interval}) > 0")
        self._client: Any = None
        if hasattr(api, "read_namespaced_lease"):  # a CoordinationV1Api (or a test's), used as it is
            self._leases: Any = api
        else:
            self._client = dedicated_client(api)
            self._leases = client.CoordinationV1Api(self._client)
        self.namespace, self.group, self.identity = namespace, group, identity
        self.name = lease_name(identity)
        self.leader_lease = leader_lease
        self.leader_namespace = namespace if leader_namespace is None else leader_namespace
        self.lease_duration = float(lease_duration)
        self.interval = float(interval)
        self.margin = min(2.0, (lease_duration - interval) / 2) if margin is None else float(margin)
        self._on_change = on_change
        self._clock = clock
        self.delete_on_stop = delete_on_stop
        self._lock = threading.Lock()
        self._observed: dict[str, Observed] = {}
        self._members: list[str] = []
        self._leader = ""
        self._address = ""
        self._last_renew = -math.inf
        self.renewals = 0
        self.failures = 0

    # -- state ---------------------------------------------------------------------------------------

    def is_member(self) -> bool:
        """Our Lease cannot have expired yet in anyone's eyes (docs/shards.md#membership)."""
        with self._lock:
            return self._clock() < self._last_renew + self.lease_duration - self.margin

    def members(self) -> list[str]:
        """The live members at the last listing, sorted (our own identity only while ``is_member``)."""
        with self._lock:
            found = list(self._members)
        if self.identity in found and not self.is_member():
            found.remove(self.identity)
        return found

    def leader(self) -> str:
        with self._lock:
            return self._leader

    def arbiter_address(self) -> str:
        """Where the group's arbiter listens ('' when unknown)."""
        with self._lock:
            return arbiter_address(self._observed, self._leader, self._clock())

    def publish(self, address: str) -> None:
        """Publish (or, with '', withdraw) our arbiter's address on our Lease from the next renewal."""
        with self._lock:
            self._address = address

    # -- the loop ------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        try:
            while True:
                self.beat()
                if stop.wait(self.interval):
                    break
            if self.delete_on_stop:
                self._delete()
        finally:
            if self._client is not None:
                self._client.close()

    def beat(self) -> None:
        """One round: renew, list, read the leader, recompute; never raises."""
        self._renew()
        try:
            listed = self._call(
                "list_namespaced_lease", self.namespace, label_selector=f"{GROUP_LABEL}={self.group}"
            )
            leader = self._read_leader()
        except Exception as e:
            self.failures += 1
            log.warning("shard %s: listing the group %s failed: %s", self.identity, self.group, e)
            return
        now = self._clock()
        with self._lock:
            self._observed = observe(self._observed, listed.get("items") or [], now)
            self._leader = leader
            before, self._members = self._members, members(self._observed, now)
            after = self._members
        if after != before:
            log.info("shard group %s: members %s", self.group, after)
            if self._on_change is not None:
                try:
                    self._on_change(list(after))
                except Exception:
                    log.exception("shard group %s: on_change failed", self.group)

    def _renew(self) -> None:
        sent = self._clock()
        with self._lock:
            address = self._address
        body = lease_body(
            self.identity, self.group, self.namespace,
            now=micro_time(), duration=max(1, math.ceil(self.lease_duration)), address=address,
        )  # fmt: skip
        try:
            try:
                # A JSON merge patch, not the client's default strategic merge: once the annotation is
                # gone, a strategic-merge null for it is stored as "" (v1.20 keeps nulls under a map the
                # object lacks); a merge patch prunes them.
                self._call(
                    "patch_namespaced_lease", self.name, self.namespace, body, _content_type=MERGE_PATCH
                )
            except ApiException as e:
                if e.status != 404:
                    raise
                body["metadata"]["annotations"] = {
                    k: v for k, v in body["metadata"]["annotations"].items() if v is not None
                }
                self._call("create_namespaced_lease", self.namespace, body)
        except Exception as e:
            self.failures += 1
            log.warning("shard %s: renewing Lease %s failed: %s", self.identity, self.name, e)
            return
        self.renewals += 1
        with self._lock:
            self._last_renew = sent

    def _read_leader(self) -> str:
        try:
            lease = self._call("read_namespaced_lease", self.leader_lease, self.leader_namespace)
        except ApiException as e:
            if e.status == 404:
                return ""
            raise
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def _delete(self) -> None:
        try:
            self._call("delete_namespaced_lease", self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                log.warning("shard %s: deleting Lease %s: %s", self.identity, self.name, e.status)
        except Exception as e:
            log.warning("shard %s: deleting Lease %s: %s", self.identity, self.name, e)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # One attempt within one interval (at least 1 s): a late answer is worth less than the next round.
        timeout = max(1.0, self.interval)
        call = getattr(self._leases, method)
        resp = call(*args, _preload_content=False, _request_timeout=timeout, **kwargs)
        data: dict[str, Any] = json.loads(resp.data or b"{}")
        return data
