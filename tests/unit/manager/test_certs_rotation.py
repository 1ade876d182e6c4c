"""manager.certs.plan_rotation (pure, the clock injected): a fresh pair for an empty or broken Secret, a
renewal staged when a third of the lifetime is left, promoted after promote_after (at once when the
served certificate expired), CAs kept in ca.crt until they expire, and over a long run with the keeper's
one-round lag no client ever meets a certificate its bundle does not trust."""

from __future__ import annotations

import datetime as dt

from cryptography import x509

from manager.certs import (
    CA_CRT,
    NEXT_CRT,
    NEXT_KEY,
    TLS_CRT,
    TLS_KEY,
    ServingCert,
    decode_data,
    encode_data,
    new_serving_cert,
    plan_rotation,
)

HOSTS = ["koord-manager-webhook.koordinator-system.svc", "127.0.0.1"]
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


class Fresh:
    """new_serving_cert at a settable time, counting calls."""

    def __init__(self, days: int = 30) -> None:
        self.now, self.days, self.calls = T0, days, 0

    def __call__(self) -> ServingCert:
        self.calls += 1
        return new_serving_cert("webhook", HOSTS, days=self.days, now=self.now)


def _data(cert: ServingCert) -> dict[str, bytes]:
    return {CA_CRT: cert.ca, TLS_CRT: cert.cert, TLS_KEY: cert.key}


def _cas(bundle: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle)


def _trusted(cert_pem: bytes, bundle: bytes) -> bool:
    cert = x509.load_pem_x509_certificate(cert_pem)
    for ca in _cas(bundle):
        try:
            cert.verify_directly_issued_by(ca)
            return True
        except Exception:
            continue
    return False


def test_an_empty_or_broken_secret_gets_a_fresh_pair_and_a_healthy_one_is_left_alone() -> None:
    fresh = Fresh()
    plan = plan_rotation({}, T0, fresh)
    assert plan is not None and plan.reason == "no usable certificate and CA" and fresh.calls == 1
    assert set(plan.data) == {CA_CRT, TLS_CRT, TLS_KEY}
    assert plan_rotation(plan.data, T0 + DAY, fresh) is None and fresh.calls == 1
    other = new_serving_cert("webhook", HOSTS, days=30, now=T0)
    for broken in (
        {**plan.data, TLS_KEY: other.key},  # the key is not the certificate's
        {**plan.data, TLS_CRT: b"garbage"},
        {**plan.data, CA_CRT: other.ca},  # no CA in the bundle issued the certificate
        {CA_CRT: b"", TLS_CRT: b"", TLS_KEY: b""},  # an empty kubernetes.io/tls Secret
    ):
        again = plan_rotation({**broken, "extra": b"kept"}, T0, fresh)
        assert again is not None and again.reason == "no usable certificate and CA"
        assert again.data["extra"] == b"kept" and _trusted(again.data[TLS_CRT], again.data[CA_CRT])


def test_renewal_is_staged_then_promoted_and_the_old_ca_stays_until_it_expires() -> None:
    fresh = Fresh()
    first = _data(fresh())
    fresh.now = T0 + 19 * DAY  # more than a third of 30 days left
    assert plan_rotation(first, fresh.now, fresh) is None
    fresh.now = T0 + 21 * DAY
    staged = plan_rotation(first, fresh.now, fresh)
    assert staged is not None and staged.reason == "renewal staged"
    assert (staged.data[TLS_CRT], staged.data[TLS_KEY]) == (first[TLS_CRT], first[TLS_KEY])  # still served
    assert len(_cas(staged.data[CA_CRT])) == 2 and _trusted(first[TLS_CRT], staged.data[CA_CRT])
    assert _cas(staged.data[CA_CRT])[0] == _cas(first[CA_CRT])[0]  # the served certificate's CA first
    assert _trusted(staged.data[NEXT_CRT], staged.data[CA_CRT])
    assert plan_rotation(staged.data, fresh.now + dt.timedelta(minutes=4), fresh) is None  # not yet
    promoted = plan_rotation(staged.data, fresh.now + dt.timedelta(minutes=6), fresh)  # notBefore was -5 min
    assert promoted is not None and promoted.reason == "staged pair promoted"
    assert promoted.data[TLS_CRT] == staged.data[NEXT_CRT] and NEXT_CRT not in promoted.data
    assert _cas(promoted.data[CA_CRT])[0] == _cas(staged.data[CA_CRT])[1]  # the new CA first now
    assert len(_cas(promoted.data[CA_CRT])) == 2  # the old one still trusted
    assert plan_rotation(promoted.data, T0 + 29 * DAY, fresh) is None
    pruned = plan_rotation(promoted.data, T0 + 30 * DAY, fresh)
    assert pruned is not None and pruned.reason == "expired CAs dropped"
    assert _cas(pruned.data[CA_CRT]) == _cas(promoted.data[CA_CRT])[:1]
    assert fresh.calls == 2


def test_renew_before_and_promote_after_are_settable() -> None:
    fresh = Fresh()
    first = _data(fresh())
    now = fresh.now = T0 + 21 * DAY
    assert plan_rotation(first, now, fresh, renew_before=5 * DAY) is None
    staged = plan_rotation(first, now, fresh, renew_before=10 * DAY)
    assert staged is not None
    assert plan_rotation(staged.data, now + dt.timedelta(hours=1), fresh, promote_after=2 * DAY) is None
    assert plan_rotation(staged.data, now + 2 * DAY, fresh, promote_after=2 * DAY) is not None


def test_an_expired_certificate_is_replaced_at_once() -> None:
    fresh = Fresh()
    first = _data(fresh())
    fresh.now = T0 + 31 * DAY
    plan = plan_rotation(first, fresh.now, fresh)
    assert plan is not None and plan.reason == "expired"
    staged = plan_rotation(first, T0 + 21 * DAY, fresh)
    assert staged is not None
    promoted = plan_rotation(staged.data, T0 + 31 * DAY, fresh, promote_after=10 * DAY)
    assert promoted is not None and promoted.reason == "staged pair promoted"


def test_an_unusable_staged_pair_is_dropped() -> None:
    fresh = Fresh()
    first = _data(fresh())
    stranger = new_serving_cert("webhook", HOSTS, days=30, now=T0)
    for staged in ({NEXT_CRT: stranger.cert, NEXT_KEY: stranger.key}, {NEXT_CRT: stranger.cert}):
        plan = plan_rotation({**first, **staged}, T0 + DAY, fresh)
        assert plan is not None and plan.reason == "staged pair unusable"
        assert NEXT_CRT not in plan.data and plan.data[TLS_CRT] == first[TLS_CRT]
        assert plan_rotation(plan.data, T0 + DAY, fresh) is None


def test_secret_data_round_trips_and_bad_base64_reads_empty() -> None:
    data = {CA_CRT: b"a", TLS_CRT: b"b"}
    assert decode_data({"data": encode_data(data)}) == data
    assert decode_data({"data": {"tls.key": "not base64!"}}) == {"tls.key": b""}
    assert decode_data(None) == decode_data({"data": None}) == {}


def test_over_two_years_every_client_trusts_what_it_meets() -> None:
    """Rounds every 6 hours. After each round the replicas serve the new tls.crt at once, while the API
    server may still hold the previous round's bundle; and a replica may still serve the previous
    round's certificate to an API server that has the new bundle."""
    fresh = Fresh(days=30)
    data = _data(fresh())
    rotations = 0
    now = T0
    while now < T0 + 730 * DAY:
        now += dt.timedelta(hours=6)
        fresh.now = now
        plan = plan_rotation(data, now, fresh, promote_after=dt.timedelta(hours=12))
        if plan is None:
            continue
        new = plan.data
        assert _trusted(new[TLS_CRT], data[CA_CRT]), (now, plan.reason)  # old bundle, new certificate
        assert _trusted(data[TLS_CRT], new[CA_CRT]), (now, plan.reason)  # new bundle, old certificate
        assert x509.load_pem_x509_certificate(new[TLS_CRT]).not_valid_after_utc > now
        rotations += plan.reason == "staged pair promoted"
        data = new
    assert rotations >= 30  # every 20 days
