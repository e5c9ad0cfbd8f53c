"""The host-overhead benchmark runs and reports every row (no timing is
asserted: machines differ)."""

import bench_host_overhead
import support


def test_the_benchmark_reports_medians(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MLA_CACHE_DIR", str(tmp_path))
    results = bench_host_overhead.main(["--device", support.DEVICE, "--steps", "20", "--decodes", "4", "--context", "200"])
    printed = capsys.readouterr().out
    for name, microseconds in results.items():
        assert microseconds > 0 and name.split(": ")[0] in printed
    assert "plan: C through ctypes" in results and "BatchMetadata from numpy arrays" in results
    assert any(name.startswith("graph replay") for name in results) == support.ON_GPU
