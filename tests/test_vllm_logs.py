"""vLLM server logs: stats and iteration lines, counted independently from the raw text."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
from conftest import DATA, SAMPLES, data_file

import lltrace
from lltrace.parsers import detect
from lltrace.parsers._io import COLLECTOR_CLOCK


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
    v0 = data_file("serving", "log_excerpts", "vllm_v0_metrics_log_lines.txt")
    v1 = data_file("serving", "log_excerpts", "vllm_v1_loggers_log_lines.txt")
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


def test_a_dated_log_format_reads_as_vllms_own(tmp_path):
    """A logging config of its own (NVIDIA NIM's ``INFO 2025-09-10 16:32:05.957 metrics.py:386]``, a platform
    plugin's ``[vllm-rbln] INFO 2026-10-07 22:01:17,796 [loggers.py:248]``) prints the year: run B's real log
    rewritten so (its seconds as vLLM printed them, no fraction: B's log has none to give) gives the same rows,
    placed as read (UTC) where vLLM's own stamps are placed by the run's spans (their zone checked to be UTC): the
    same start and end of every one of its 8,828 iterations. (A stamp's milliseconds, where printed, place a line
    to the millisecond: the JSON and NIM tests below.)"""
    b = DATA / "vllm_cpu" / "B_kvpressure"
    raw = (b / "server.log").read_text()
    year = "2026"  # run B's spans: 2026-11-29
    dated = re.sub(r"(INFO|WARNING|ERROR|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d) ", rf"\1 {year}-\2 ", raw)
    dated = dated.replace(" INFO 2026-", " [vllm-rbln] INFO 2026-", 50)  # a plugin's prefix on some lines
    (tmp_path / "dated").mkdir()
    (tmp_path / "dated" / "server.log").write_text(dated)
    query = "SELECT step_id, start_s, end_s, prefill_tokens FROM engine_steps WHERE source = 'log' ORDER BY step_id"
    own = lltrace.ingest([b / "server.log", b / "otlp", b / "bench"], store=tmp_path / "own")
    alone = lltrace.ingest([tmp_path / "dated" / "server.log"], store=tmp_path / "alone")
    beside = lltrace.ingest([tmp_path / "dated" / "server.log", b / "otlp", b / "bench"], store=tmp_path / "beside")
    want = own.sql(query).rows()
    assert len(want) == 8828 and [
        a["zone_offset_h"] for a in own.metadata["clock"]["alignment"] if "zone_offset_h" in a
    ] == [0]
    for run in (alone, beside):
        got = run.sql(query).rows()
        assert [(s, p) for s, _, _, p in got] == [(s, p) for s, _, _, p in want]
        assert max(abs(g[1] - w[1]) + abs(g[2] - w[2]) for g, w in zip(got, want, strict=True)) < 1e-6
    stats = "SELECT ts_s, running, waiting, kv_usage FROM engine_stats WHERE source = 'log' ORDER BY ts_s, running"
    assert alone.sql(stats).rows() == own.sql(stats).rows()
    (src,) = alone.metadata["sources"]
    assert src["version"] == "V1 (loggers.py)" and src["clock"]["origin"].startswith("log date-time")


def _collector_stamped(raw: str, zone_h: int) -> tuple[str, list[float]]:
    """Each line of a log with the stamp a collector (``kubectl logs --timestamps``) would put before it: the line's
    own stamp read as 2026 local time in a zone ``zone_h`` hours east of UTC, with a fraction of its own (to the
    nanosecond); and each line's moment, computed here from those parts."""
    lines, moments = [], []
    last = "2026-01-01T00:00:00.000000000Z"
    for i, line in enumerate(raw.splitlines()):
        m = re.search(r"(?:INFO|WARNING|ERROR|DEBUG) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) ", line)
        if m:
            mo, d, hh, mi, ss = (int(g) for g in m.groups())
            ns = (i * 7919 + 1) % 10**9
            last = f"2026-{mo:02d}-{d:02d}T{hh:02d}:{mi:02d}:{ss:02d}.{ns:09d}{zone_h:+03d}:00"
            local = datetime(2026, mo, d, hh, mi, ss, tzinfo=timezone.utc).timestamp()
            moments.append(local - zone_h * 3600 + ns / 1e9)
        lines.append(f"{last} {line}")
    return "\n".join(lines) + "\n", moments


@pytest.mark.parametrize("kept_by", ["kubectl", "docker"])
def test_a_log_collectors_stamps_place_each_line(kept_by, tmp_path):
    """``kubectl logs --timestamps`` puts an RFC 3339 stamp (date, nanoseconds, zone) before every line; Docker's
    json-file driver keeps each line as ``{"log": line, "stream": …, "time": stamp}``: run B's real log kept either
    way gives the same rows as the log alone, each stats line at its stamp and each iteration ending at its own (not
    chained from 1-second stamps), whatever the zone."""
    b = DATA / "vllm_cpu" / "B_kvpressure"
    raw = (b / "server.log").read_text()
    stamped, moments = _collector_stamped(raw, zone_h=2)
    log = tmp_path / "pod.log"
    if kept_by == "docker":  # the same stamps, as the driver writes them (compact JSON, the line's newline kept)
        lines = (x.split(" ", 1) for x in stamped.splitlines())
        stamped = "".join(
            json.dumps({"log": f"{line}\n", "stream": "stdout", "time": t}, separators=(",", ":")) + "\n"
            for t, line in lines
        )
    log.write_text(stamped)
    plain = lltrace.ingest([b / "server.log"], store=tmp_path / "plain")
    kept = lltrace.ingest([log], store=tmp_path / "kept")
    steps = "SELECT step_id, prefill_reqs, prefill_tokens, decode_reqs, wall_s FROM engine_steps ORDER BY step_id"
    assert kept.sql(steps).rows() == plain.sql(steps).rows() and len(plain.sql(steps).rows()) == 8828
    stats = "SELECT running, waiting, kv_usage FROM engine_stats ORDER BY log_stamp, running, waiting"
    assert sorted(kept.sql(stats).rows()) == sorted(plain.sql(stats).rows())
    # each header line's moment, in file order: the iteration and stats lines among them
    heads = [line for line in raw.splitlines() if re.search(r"(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d ", line)]
    assert len(heads) == len(moments)
    ends = [t for line, t in zip(heads, moments, strict=True) if "Iteration(" in line]
    at = [t for line, t in zip(heads, moments, strict=True) if "Avg prompt throughput" in line]
    got = kept.sql("SELECT start_s, end_s, wall_s FROM engine_steps ORDER BY step_id").rows()
    assert max(abs(e - w) for (_, e, _), w in zip(got, ends, strict=True)) < 1e-6
    assert max(abs(s + wall - e) for s, e, wall in got) < 1e-9
    placed = [t for (t,) in kept.sql("SELECT ts_s FROM engine_stats ORDER BY ts_s").rows()]
    assert placed == pytest.approx(sorted(at), abs=1e-6)
    (src,) = kept.metadata["sources"]
    assert src["clock"] == {"origin": COLLECTOR_CLOCK, "stamped_lines": len(heads)}


def test_nims_dated_v0_stats_lines(tmp_path):
    """NVIDIA NIM's vLLM log (its own date format, a V0 stats line; the milliseconds unpadded, as it prints them)."""
    log = tmp_path / "nim.log"
    log.write_text(
        "INFO 2025-09-10 16:31:52.7 on.py:48] Waiting for application startup.\n"
        "INFO 2025-09-10 16:32:05.957 metrics.py:386] Avg prompt throughput: 0.2 tokens/s, Avg generation throughput: "
        "1.1 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 2.5%, CPU KV cache "
        "usage: 0.0%.\n"
        # the same line 10 s on, its msecs a single digit as NIM prints them (the start-up line above: ".7")
        "INFO 2025-09-10 16:32:15.7 metrics.py:386] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
        "1.3 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.9%, CPU KV cache "
        "usage: 0.0%.\n"
    )
    run = lltrace.ingest([log], store=tmp_path / "s")
    rows = run.sql("SELECT ts_s, log_stamp, running, waiting, kv_usage FROM engine_stats ORDER BY ts_s").rows()
    assert rows == [
        (1757521925.957, "2025-09-10 16:32:05", 3.0, 1.0, 0.025),  # 2025-09-10T16:32:05.957Z
        (1757521935.007, "2025-09-10 16:32:15", 2.0, 0.0, 0.019),  # .7: 7 ms, not 700
    ]


def test_vllms_json_log_records_read_as_its_text_log(tmp_path):
    """vLLM 0.32's own JSON log (--logging-config.formatter json; lltrace's real run S_json_log): each record's
    message read as the text formatter's line would be. Expected from the raw records with the json module: the
    iteration lines' steps and token sums (context tokens = the bench's total input), the stats lines' queue."""
    d = SAMPLES / "vllm_cpu_limits" / "S_json_log"
    records = [json.loads(x) for x in (d / "server.log").read_text().splitlines() if x.startswith("{")]
    iterations = [r["message"] for r in records if "Iteration(" in r["message"]]
    stats = [r for r in records if "Avg prompt throughput" in r["message"]]
    context = sum(int(re.search(r"(\d+) context tokens", m).group(1)) for m in iterations)
    generation = sum(int(re.search(r"(\d+) generation tokens", m).group(1)) for m in iterations)
    bench = json.loads((d / "bench" / "bench.json").read_text())
    assert context == bench["total_input_tokens"] and generation == bench["total_output_tokens"] - bench["completed"]
    run = lltrace.ingest([d / "server.log"], store=tmp_path / "s")
    (src,) = run.metadata["sources"]
    assert src["format"] == "vllm-server-log" and f"JSON records ({len(records)})" in src["version"]
    got = run.sql(
        "SELECT count(*), sum(prefill_tokens), sum(decode_tokens), max(step_id) FROM engine_steps WHERE source = 'log'"
    ).rows()
    assert got == [(len(iterations), context, generation, len(iterations) - 1)]
    rows = run.sql("SELECT ts_s, waiting FROM engine_stats WHERE source = 'log' ORDER BY ts_s").rows()

    def moment(r: dict) -> float:  # asctime, "2026-12-05 02:33:55,557": to the millisecond, UTC (as logged)
        return datetime.strptime(r["asctime"], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc).timestamp()

    want = [(moment(r), float(re.search(r"Waiting: (\d+)", r["message"]).group(1))) for r in stats]
    assert len(rows) == len(want) == 2 and [w for _, w in rows] == [w for _, w in sorted(want)]
    assert [t for t, _ in rows] == pytest.approx([t for t, _ in sorted(want)], abs=1e-6)
    # each iteration ends at its record's moment, to the millisecond (not chained from whole seconds)
    ends = [t for (t,) in run.sql("SELECT end_s FROM engine_steps WHERE source = 'log' ORDER BY step_id").rows()]
    assert ends == pytest.approx([moment(r) for r in records if "Iteration(" in r["message"]], abs=1e-6)
    assert run.metadata["sources"][0]["engine_config"]["max_num_seqs"] == 4  # the non-default args record
    assert detect(d / "server.log").name == "vllm-server-log"
