"""The report's backend section: availability from the registry, error ratios from the figures."""
from claimcheck.backends_status import error_ratios, summary


def test_error_ratios_are_grouped_by_backend_and_dtype():
    tests = [{"figures": [
        {"name": "error_ratio[backend=tiled,dtype=float16,mask=none,out]", "value": 0.5},
        {"name": "error_ratio[backend=tiled,dtype=float16,mask=causal,dq]", "value": 1.5},
        {"name": "error_ratio[backend=triton,dtype=float32,mask=none,out]", "value": 2.0},
        {"name": "error_ratio[backend=triton,device=cpu,dtype=float32,mask=none,dq]", "value": 1.0},
        {"name": "error_ratio[backend=triton,device=cuda,dtype=float32,mask=none,out]", "value": 0.7},
        {"name": "error_ratio[out]", "value": 9.0},  # no backend named: not a backend figure
        {"name": "series[gap vs n]", "value": {"n": [1], "y": [2]}},
    ]}]
    assert error_ratios(tests) == {("tiled", "float16"): [0.5, 1.5], ("triton", "float32"): [2.0, 1.0],
                                   ("triton (cuda)", "float32"): [0.7]}
    rows = {(r["backend"], r["dtype"]): r for r in summary(tests)["error_ratio"]}
    assert rows[("tiled", "float16")] == {"backend": "tiled", "dtype": "float16", "cases": 2, "median": 1.0,
                                          "p90": 1.5, "max": 1.5}


def test_every_backend_says_whether_it_runs_here_and_why_not():
    rows = summary([])["availability"]
    names = {r["backend"] for r in rows}
    assert {"reference", "tiled", "sdpa-math", "flash-attn"} <= names
    assert all(r["runs"] or r["reason"] for r in rows)
    assert any(r["backend"] == "reference" and r["runs"] for r in rows)


def test_asv_skips_and_failures_read_differently():
    from claimcheck.asv_results import format_row, format_value

    assert format_value(None, "bytes") == "failed"
    assert format_value(float("nan"), "bytes") == "skipped"
    assert format_row({"params": [], "value": None, "skipped": True}, "bytes") == "skipped"
    assert format_row({"params": [], "value": 2048.0}, "bytes") == "2 KiB"
