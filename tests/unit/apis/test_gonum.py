def test_go_int64_truncates_and_gives_min_int64_where_go_on_amd64_does() -> None:
    from apis.gonum import INT64_MIN, go_int64

    assert go_int64(2.9) == 2 and go_int64(-2.9) == -2
    for f in (float("inf"), float("-inf"), float("nan"), 2.0**63, -(2.0**64)):
        assert go_int64(f) == INT64_MIN
    assert go_int64(-(2.0**63)) == INT64_MIN and go_int64(2.0**62) == 2**62
