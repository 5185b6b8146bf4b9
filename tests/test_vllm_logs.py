"""vLLM server logs: stats and iteration lines, counted independently from the raw text."""

from __future__ import annotations

import re

from conftest import DATA, shared_file

import lltrace


def test_v1_iteration_lines_become_log_steps_on_the_run_clock(store):
    raw = (DATA / "vllm_cpu" / "B_kvpressure" / "server.log").read_text()
    it = re.findall(
        r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, "
        r"(\d+) generation tokens, iteration elapsed time: ([\d.]+) ms",
        raw,
    )
    n_stats = len(re.findall(r"Engine 000: Avg prompt throughput", raw))
    run = lltrace.ingest([DATA / "vllm_cpu" / "B_kvpressure"], store=store)
    logged = run.sql(
        "SELECT count(*) AS n, sum(prefill_tokens) AS p, sum(decode_tokens) AS d, sum(wall_s) AS w, "
        "min(start_s) AS t0 FROM engine_steps WHERE source = 'log'"
    ).to_dicts()[0]
    assert logged["n"] == len(it) == 8828
    assert logged["p"] == sum(int(x[2]) for x in it) and logged["d"] == sum(int(x[4]) for x in it)
    assert abs(logged["w"] - sum(float(x[5]) for x in it) / 1e3) < 1e-6
    stats = run.sql("SELECT count(*) AS n, max(kv_usage) AS kv FROM engine_stats WHERE source = 'log'").to_dicts()[0]
    assert stats["n"] == n_stats and stats["kv"] == 1.0
    # Placed on the run clock: the first iteration runs within a second of the first request's arrival.
    first_arrival = run.sql("SELECT min(arrival_s) AS a FROM requests").to_dicts()[0]["a"]
    assert abs(logged["t0"] - first_arrival) < 1.5
    log_clock = [a for a in run.metadata["clock"]["alignment"] if a.get("source") == "server log"][0]
    assert log_clock["zone_offset_h"] == 0
    doc = lltrace.analyze(run).to_dict()
    assert doc["steps"]["source"] == "profiler" and doc["steps"]["count_by_source"] == {"profiler": 60, "log": 8828}


def test_v0_and_v1_excerpts_glued_lines_and_preemption_counter(store):
    v0 = shared_file("serving", "log_excerpts", "vllm_v0_metrics_log_lines.txt")
    v1 = shared_file("serving", "log_excerpts", "vllm_v1_loggers_log_lines.txt")
    for path in (v0, v1):
        raw = path.read_text()
        run = lltrace.ingest([path], store=store)
        stats = run.table("engine_stats")
        # glued lines (no newline between two log records) are two records
        assert stats.filter(stats["prompt_throughput"].is_not_null()).height == raw.count("Avg prompt throughput")
    raw = v0.read_text()
    run = lltrace.ingest([v0], store=store)
    cum = [int(x) for x in re.findall(r"total_num_cumulative_preemption=(\d+)", raw)]
    assert run.table("engine_stats")["preemptions_total"].max() == max(cum)
    waits = [int(x) for x in re.findall(r"Pending: (\d+) reqs", raw)]
    assert run.table("engine_stats")["waiting"].max() == max(waits)


def test_a_bench_client_log_opening_with_vllms_logger_lines_is_a_client_log(tmp_path):
    """``vllm bench serve``'s stdout can begin with vLLM's own INFO lines (platform detection) before its
    Namespace dump: the Namespace with ``request_id_prefix`` decides, named alone or inside a folder; a
    server log's own ``args: Namespace(...)`` (vLLM <= 0.6, no bench options) stays a server log."""
    from lltrace.parsers import detect

    real = (DATA / "vllm_cpu" / "A_baseline" / "bench" / "bench_profiled_8req.client.log").read_text()
    lead = "INFO 11-29 14:17:50 [__init__.py:216] Automatically detected platform cuda.\n"
    client = tmp_path / "run" / "bench.client.log"
    client.parent.mkdir()
    client.write_text(lead + real)
    assert detect(client).name == "vllm-bench-client-log"
    server = tmp_path / "server.log"
    server.write_text(
        "INFO 05-01 10:00:00 api_server.py:219] vLLM API server version 0.5.4\n"
        "INFO 05-01 10:00:00 api_server.py:220] args: Namespace(host=None, port=8000, model='m', "
        "max_num_seqs=256)\n"
        "INFO 05-01 10:00:10 metrics.py:341] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
        "0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV "
        "cache usage: 0.0%.\n"
    )
    assert detect(server).name == "vllm-server-log"
    run = lltrace.ingest([client.parent], store=tmp_path / "store")
    assert [s["format"] for s in run.metadata["sources"]] == ["vllm-bench-client-log"]
    prefix = re.search(r"request_id_prefix='([^']*)'", real).group(1)
    assert run.metadata["sources"][0]["client"]["request_id_prefix"] == prefix
