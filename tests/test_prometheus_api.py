"""A Prometheus server's HTTP API answers (issue 18): run B's 15 timed scrapes turned into one
``/api/v1/query_range`` answer give the scrapes' own engine_stats, and the edge cases the API documentation
names (NaN / +Inf strings, vector answers, several answers per file, counter resets, several replicas)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES

import lltrace

SCRAPES = sorted((DATA / "vllm_cpu" / "B_kvpressure" / "metrics").glob("metrics_*.prom"))
_SAMPLE = re.compile(r"^((?:vllm|sglang):[\w:]+)(?:\{([^}]*)\})? (\S+)$", re.M)


def _series(scrapes: list[Path], instance: str) -> dict[tuple, list]:
    """Each vLLM series of the scrapes as the server would store it: labels plus the scrape's instance,
    and its samples at the scrape times (read with a regex: independent of lltrace's text parser)."""
    out: dict[tuple, list] = {}
    for path in scrapes:
        text = path.read_text()
        ts = float(re.search(r"^# scrape_unix_ts (\S+)", text, re.M).group(1))
        for name, labels, value in _SAMPLE.findall(text):
            lab = dict(re.findall(r'(\w+)="([^"]*)"', labels)) | {"instance": instance, "job": "vllm"}
            out.setdefault((name, tuple(sorted(lab.items()))), []).append([ts, value])
    return out


def _matrix(series: dict[tuple, list]) -> dict:
    result = [{"metric": {"__name__": n, **dict(lab)}, "values": v} for (n, lab), v in series.items()]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


COMPARED = (
    "running",
    "waiting",
    "kv_usage",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "queue_time_sum_s",
    "e2e_sum_s",
    "ttft_count",
)


def test_run_bs_scrapes_as_a_query_range_answer(tmp_path: Path) -> None:
    path = tmp_path / "query_range.json"
    path.write_text(json.dumps(_matrix(_series(SCRAPES, "replica-b:8000"))))
    api = lltrace.ingest([path], store=tmp_path / "api")
    text = lltrace.ingest([DATA / "vllm_cpu" / "B_kvpressure" / "metrics"], store=tmp_path / "text")
    got = sorted(api.table("engine_stats").to_dicts(), key=lambda r: r["ts_s"])
    want = sorted(text.table("engine_stats").to_dicts(), key=lambda r: r["ts_s"])
    assert len(got) == len(want) == len(SCRAPES) == 15
    for g, w in zip(got, want, strict=True):
        assert g["ts_s"] == pytest.approx(w["ts_s"], abs=1e-6)
        assert {c: g[c] for c in COMPARED} == {c: w[c] for c in COMPARED}
        assert (g["engine"], g["instance"]) == ("replica-b:8000/0", "replica-b:8000")
    src = api.metadata["sources"][0]
    assert src["format"] == "prometheus-api" and src["replicas"][0]["model_name"] == "tiny-llama"
    bare = tmp_path / "promtool.json"  # promtool query range -o json: the result list alone
    bare.write_text(json.dumps(_matrix(_series(SCRAPES, "replica-b:8000"))["data"]["result"]))
    again = lltrace.ingest([bare], store=tmp_path / "bare").table("engine_stats").to_dicts()
    assert sorted((r["ts_s"], r["preemptions_total"]) for r in again) == [
        (r["ts_s"], r["preemptions_total"]) for r in got
    ]
    doc = lltrace.analyze(api).to_dict()
    assert doc["kv"]["preemptions"] == 35 and doc["kv"]["peak_usage"] == 1.0
    hist = doc["engine_latency"]
    counts = [w["e2e_count"] for w in want]
    assert hist["e2e_requests"] == counts[-1] - counts[0]
    queue = hist["queue_mean_s"] * (want[-1]["queue_time_count"] - want[0]["queue_time_count"])
    e2e = hist["e2e_mean_s"] * hist["e2e_requests"]
    assert (round(queue, 2), round(e2e, 2)) == (512.09, 607.72)  # queue 84 % of e2e
    verdict = doc["classification"]  # from the histograms and gauges alone: the full run's own verdict
    assert (verdict["label"], verdict["basis"]) == ("capacity-bound", "engine histograms")
    assert verdict["queue_share"] == hist["queue_share"]
    assert (round(hist["queue_sum_s"], 2), round(hist["e2e_sum_s"], 2), round(hist["queue_share"], 2)) == (
        512.09,
        607.72,
        0.84,
    )


def test_api_edge_cases(tmp_path: Path) -> None:
    """NaN and +Inf sample strings, a vector answer, two answers as JSON lines, a counter reset and two
    replicas (https://prometheus.io/docs/prometheus/latest/querying/api/ "Expression query result formats")."""
    t0 = 1_790_000_000.0

    def series(name, instance, values, **labels):
        return {"metric": {"__name__": name, "instance": instance, "engine": "0", **labels}, "values": values}

    running_a = series("vllm:num_requests_running", "a:8000", [[t0, "3"], [t0 + 15, "NaN"], [t0 + 30, "5"]])
    kv_b = series("vllm:kv_cache_usage_perc", "b:8000", [[t0, "0.5"], [t0 + 15, "+Inf"]])
    # a restart between t0+15 and t0+30: 40 preemptions before, 3 after
    pre_a = series("vllm:num_preemptions_total", "a:8000", [[t0, "10"], [t0 + 15, "40"], [t0 + 30, "3"]])
    first = {"status": "success", "data": {"resultType": "matrix", "result": [running_a, kv_b, pre_a]}}
    vector = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {
                    "metric": {"__name__": "vllm:num_requests_waiting", "instance": "b:8000", "engine": "0"},
                    "value": [t0 + 15, "7"],
                }
            ],
        },
    }
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(vector) + "\n")
    run = lltrace.ingest([path], store=tmp_path / "store")
    rows = {(r["engine"], r["ts_s"] - t0): r for r in run.table("engine_stats").to_dicts()}
    assert rows[("a:8000/0", 0)]["running"] == 3 and rows[("a:8000/0", 15)]["running"] is None  # NaN: no value
    assert [rows[("a:8000/0", t)]["preemptions_total"] for t in (0, 15, 30)] == [10, 40, 43]  # read over the reset
    assert rows[("b:8000/0", 15)]["kv_usage"] is None  # +Inf: beyond the physical limit, NULL and counted
    assert rows[("b:8000/0", 15)]["waiting"] == 7
    src = run.metadata["sources"][0]
    assert src["version"] == "HTTP API matrix and vector"
    assert src["dropped"]["nan_samples"] == 1 and src["counter_resets"] == {"vllm:num_preemptions_total": 1}
    assert [r["instance"] for r in src["replicas"]] == ["a:8000", "b:8000"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "the server answered an error"),
        ({"status": "success", "data": {"resultType": "scalar", "result": [1, "2"], "x": "vllm:"}}, "resultType"),
    ],
)
def test_api_answers_that_hold_no_series_are_errors(body: dict, message: str, tmp_path: Path) -> None:
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(body | {"note": '"resultType" "result" "vllm:x"'}))
    from lltrace.errors import TraceFormatError, UnknownFormat

    with pytest.raises((TraceFormatError, UnknownFormat), match=message):
        lltrace.ingest([path], store=tmp_path / "store")


def _bucket_index(bounds: list[float], v: float) -> int:
    return next((i for i, b in enumerate(bounds) if v <= b), len(bounds))


@pytest.mark.parametrize("run", ["B_kvpressure", "A_baseline", "D_chunked"])
def test_histogram_quantiles_lie_within_a_bucket_of_the_spans(run: str, tmp_path: Path) -> None:
    """The engine's TTFT and queue-time histograms over a whole run (its scrapes and the final one: every
    request since the server started) give quantiles in the bucket of the spans' own quantiles or the next
    one: the histogram's precision is its bucket."""
    r = lltrace.ingest([DATA / "vllm_cpu" / run], store=tmp_path)
    con = r.store.connect([r.id])
    for metric, column in (("ttft", "server_ttft_s"), ("queue_time", "queue_s")):
        bounds = [
            b
            for (b,) in con.execute(
                "SELECT DISTINCT le FROM engine_histograms WHERE metric = ? AND le IS NOT NULL ORDER BY le", [metric]
            ).fetchall()
        ]
        est = con.execute(
            "SELECT observations, p50, p90, p99 FROM engine_histogram_quantiles WHERE metric = ?", [metric]
        ).fetchone()
        # histogram_quantile inverts the cumulative count at rank q * n: the spans' order statistic at that
        # rank (quantile_disc) is the same quantity; an interpolated median of an even count can fall in an
        # empty bucket beside it (run D: 65 of 130 TTFTs at most 80 ms, the 66th above 100 ms)
        spans = con.execute(
            f"SELECT count({column}), quantile_disc({column}, [0.5, 0.9, 0.99]) FROM requests"
        ).fetchone()
        assert est[0] >= spans[0] > 0  # the histogram saw every request the spans did (and any still running)
        for e, s in zip(est[1:], spans[1], strict=True):
            assert abs(_bucket_index(bounds, e) - _bucket_index(bounds, s)) <= 1, (metric, e, s)
    con.close()


_SUMMED = {  # the histograms whose sum engine_stats holds: the span attribute of the same latency
    "queue_time": "queue_s",
    "ttft": "server_ttft_s",
    "e2e": "server_e2e_s",
    "prefill_time": "prefill_s",
    "decode_time": "decode_s",
}


@pytest.mark.parametrize(
    "folder",
    [DATA / "vllm_cpu" / r for r in ("A_baseline", "B_kvpressure", "B2_kv2x", "D_chunked", "E_prefix")]
    + [SAMPLES / "vllm_cpu_limits" / r for r in ("F_slots", "H2_pfx_off", "K_guidellm")],
    ids=lambda p: p.name,
)
def test_the_histograms_mean_bounds_each_quantile_and_the_spans_agree(folder: Path, tmp_path: Path) -> None:
    """Where the engine exports a histogram's sum, its mean m caps each q-quantile at m / (1 - q) (Markov). vLLM's
    queue and prefill buckets start at 0.3 s, so before the cap a run whose requests never waited read a median
    queue of 150 ms. Checked on real runs against the spans' own order statistics (quantile_disc: the value at
    rank q * n), in every run whose histograms counted exactly the requests its spans hold: each lies within the
    bucket the estimate gives, cap included, and the cap is m / (1 - q) of the spans' own mean."""
    r = lltrace.ingest([folder], store=tmp_path)
    con = r.store.connect([r.id])
    n_spans = con.execute("SELECT count(*) FROM requests WHERE server_e2e_s IS NOT NULL").fetchall()[0][0]
    capped = checked = 0
    for metric, column in _SUMMED.items():
        got = con.execute(
            "SELECT observations, mean, p50, p50_lo, p50_hi, p90, p90_lo, p90_hi, p99, p99_lo, p99_hi "
            "FROM engine_histogram_quantiles WHERE metric = ?",
            [metric],
        ).fetchall()
        if not got or got[0][0] != n_spans:
            continue  # the scrapes began after a request ended or the run has no such histogram
        n, mean, *est = got[0]
        checked += 1
        spans = con.execute(
            f"SELECT avg({column}), quantile_disc({column}, [0.5, 0.9, 0.99]) FROM requests "
            f"WHERE server_e2e_s IS NOT NULL"
        ).fetchall()[0]
        assert mean == pytest.approx(spans[0], rel=1e-6, abs=1e-9), metric  # the histogram's sum is the spans'
        for (v, lo, hi), q, truth in zip((est[0:3], est[3:6], est[6:9]), (0.5, 0.9, 0.99), spans[1], strict=True):
            assert lo - 1e-9 <= truth <= (hi if hi is not None else float("inf")) + 1e-9, (metric, q, truth, lo, hi)
            assert v <= mean / (1 - q) + 1e-12
            capped += hi is not None and hi == pytest.approx(mean / (1 - q))
    assert checked == len(_SUMMED)  # every one of these runs was scraped from its server's start
    assert capped >= (4 if folder.name == "K_guidellm" else 1)  # the prefill-time median in each (vLLM's prefill
    # buckets start at 0.3 s); in K, whose requests never waited, the queue time's three quantiles too


def test_the_api_export_gives_the_scrapes_quantiles(tmp_path: Path) -> None:
    path = tmp_path / "query_range.json"
    path.write_text(json.dumps(_matrix(_series(SCRAPES, "replica-b:8000"))))
    api = lltrace.analyze([str(path)], store=tmp_path / "api").to_dict()["engine_quantiles"]
    text = lltrace.analyze([str(SCRAPES[0].parent)], store=tmp_path / "text").to_dict()["engine_quantiles"]
    assert api == text and {q["metric"] for q in api} >= {"ttft", "queue_time", "e2e", "tpot"}


def test_replicas_side_by_side(tmp_path: Path) -> None:
    """Three replicas in one export: each its own row (instance/engine), the gauges and counters never mixed;
    the per-engine rules (preemptions, histogram means) add the replicas up."""
    series: dict[tuple, list] = {}
    for name in ("r1:8000", "r2:8000", "r3:8000"):
        series |= _series(SCRAPES, name)
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(_matrix(series)))
    doc = lltrace.analyze([str(path)], store=tmp_path / "store").to_dict()
    reps = doc["replicas"]
    assert [r["engine"] for r in reps] == ["r1:8000/0", "r2:8000/0", "r3:8000/0"]
    assert {(r["preemptions"], r["peak_kv_usage"], r["samples"]) for r in reps} == {(35, 1.0, 15)}
    assert doc["engine_latency"]["e2e_requests"] == 3 * reps[0]["requests"]
    one = lltrace.analyze([str(SCRAPES[0].parent)], store=tmp_path / "one").to_dict()
    assert doc["engine_latency"]["e2e_mean_s"] == pytest.approx(one["engine_latency"]["e2e_mean_s"])
    assert doc["kv"]["preemptions"] == 3 * 35  # each replica's count, added up


def _b_export() -> dict:
    return _matrix(_series(SCRAPES, "replica-b:8000"))


@pytest.mark.parametrize("layout", ["compact", "indented", "spaced", "lines"])
def test_bulk_reader_reads_what_the_exact_reader_reads(layout: str, tmp_path: Path) -> None:
    """The bulk reader of the values arrays and the sample-by-sample one agree on every series of run B's
    export, however the JSON is laid out (compact as the server writes it, indented, as JSON lines)."""
    from lltrace.parsers.prometheus_api import series_bulk, series_exact

    answer = _b_export()
    if layout == "lines":  # one answer per family, as one query per family gives
        by_name: dict[str, list] = {}
        for s in answer["data"]["result"]:
            by_name.setdefault(s["metric"]["__name__"], []).append(s)
        text = "\n".join(
            json.dumps({"status": "success", "data": {"resultType": "matrix", "result": r}}) for r in by_name.values()
        )
    else:
        kw = {"compact": {"separators": (",", ":")}, "indented": {"indent": 2}, "spaced": {}}[layout]
        text = json.dumps(answer, **kw)
    bulk = series_bulk("x", text.encode(), set(), None)
    exact = list(series_exact("x", text, set()))
    assert bulk is not None and len(bulk) == len(exact) == len(answer["data"]["result"])
    for b, e in zip(bulk, exact, strict=True):
        assert (b.name, b.labels) == (e.name, e.labels)
        assert b.ts.tolist() == e.ts.tolist() and b.values.tolist() == e.values.tolist()


@pytest.mark.parametrize(
    ("damage", "where"),
    [
        ('[[1790000000,"1"],[1790000015,"2","3"]]', "sample 2"),  # a pair of three
        ('[[1790000000,"1"],[1790000015,"two"]]', "sample 2"),  # not a number
        ('[[1790000000,"1"],[1790000015]]', "sample 2"),  # a pair of one
    ],
)
def test_a_values_array_out_of_shape_is_named_by_its_sample(damage: str, where: str, tmp_path: Path) -> None:
    """The bulk reader declines an array not exactly [[t, "v"], ...]; the exact reader names the sample."""
    body = (
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":'
        '"vllm:num_requests_running","instance":"a:8000"},"values":' + damage + "}]}}"
    )
    path = tmp_path / "damaged.json"
    path.write_text(body)
    with pytest.raises(lltrace.TraceFormatError, match=f"series 1 .*{where}"):
        lltrace.ingest([path], store=tmp_path / "store")
    assert not any((tmp_path / "store").glob("engine_stats/run_id=*"))


def test_the_word_values_inside_a_label_is_not_a_series(tmp_path: Path) -> None:
    body = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"__name__": "vllm:num_requests_running", "instance": 'x"values":[[1,"2"]]'},
                    "values": [[1_790_000_000, "3"], [1_790_000_015, "4"]],
                }
            ],
        },
    }
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(body, separators=(",", ":")))
    rows = lltrace.ingest([path], store=tmp_path / "store").table("engine_stats").to_dicts()
    assert [r["running"] for r in rows] == [3, 4] and rows[0]["instance"] == 'x"values":[[1,"2"]]'


def test_a_reset_between_files_is_undone_across_the_run(tmp_path: Path) -> None:
    """Run B's export cut into two files at its 9th scrape, where the server restarted: the second file's
    counters and buckets start again from zero there. The run reads them on top of the first file's last
    values, so each counter's change over the run is its change before the cut plus its change after it."""
    answer = _b_export()
    first, second, expected = [], [], {}
    for s in answer["data"]["result"]:
        name, values = s["metric"]["__name__"], s["values"]
        x = [float(v) for _, v in values]
        counter = name.endswith(("_total", "_sum", "_count", "_bucket"))
        first.append({**s, "values": values[:8]})
        second.append({**s, "values": [[t, repr(float(v) - x[8] if counter else float(v))] for t, v in values[8:]]})
        if counter and "le" not in s["metric"]:
            expected[name] = (x[7] - x[0]) + (x[-1] - x[8])
    folder = tmp_path / "export"
    folder.mkdir()
    for n, result in (("day_1", first), ("day_2", second)):
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        (folder / f"{n}.json").write_text(json.dumps(body))
    with pytest.warns(lltrace.InputWarning, match="counter resets between files"):
        cut = lltrace.ingest([folder], store=tmp_path / "cut")
    assert cut.metadata["counter_resets_between_files"]["engine_stats.preemptions_total"] == 1
    doc = lltrace.analyze(cut).to_dict()
    assert doc["kv"]["preemptions"] == expected["vllm:num_preemptions_total"] > 0
    hist = doc["engine_latency"]
    assert hist["queue_sum_s"] == pytest.approx(expected["vllm:request_queue_time_seconds_sum"], rel=1e-12)
    assert hist["e2e_sum_s"] == pytest.approx(expected["vllm:e2e_request_latency_seconds_sum"], rel=1e-12)
    assert hist["e2e_requests"] == expected["vllm:e2e_request_latency_seconds_count"]
    e2e = next(q for q in doc["engine_quantiles"] if q["metric"] == "e2e")
    assert e2e["observations"] == expected["vllm:e2e_request_latency_seconds_count"]  # the +Inf bucket's


def test_weekly_from_an_export_alone(tmp_path: Path) -> None:
    """weekly on a store holding only run B's export: its window's requests, preemptions, KV and queue share
    are what analyze says of the run, its quantiles the histograms' (labelled estimates, with their bucket)."""
    from lltrace.analysis.weekly import weekly

    path = tmp_path / "query_range.json"
    path.write_text(json.dumps(_b_export()))
    run = lltrace.ingest([path], store=tmp_path / "store")
    doc = weekly(store=tmp_path / "store")
    analysis = lltrace.analyze(run).to_dict()
    assert doc["figures"] == "engine histograms" and len(doc["windows"]) == 1
    (w,) = doc["windows"]
    assert w["requests"] == analysis["engine_latency"]["e2e_requests"] == 60
    assert w["preemptions"] == analysis["kv"]["preemptions"] == 35 and w["peak_kv_usage"] == 1.0
    assert w["queue_share"] == pytest.approx(analysis["engine_latency"]["queue_share"])
    ttft = next(q for q in analysis["engine_quantiles"] if q["metric"] == "ttft")
    assert (w["ttft_p90"], w["ttft_p90_bucket"]) == (ttft["p90"], [ttft["p90_lo"], ttft["p90_hi"]])
    assert w["label"] == "decode-dominant" and w["prefill_dominant_share"] is None


def test_histogram_windows_add_up_to_the_run(tmp_path: Path) -> None:
    """Cut into 20 s windows, run B's histograms count every observation once: the windows' counts add up to
    the whole run's, for every metric."""
    path = tmp_path / "query_range.json"
    path.write_text(json.dumps(_b_export()))
    run = lltrace.ingest([path], store=tmp_path / "store")
    con = run.store.connect([run.id])
    try:
        windows = dict(
            con.execute(
                "SELECT metric, sum(observations) FROM engine_histogram_windows(20, true, NULL, NULL) GROUP BY metric"
            ).fetchall()
        )
        whole = dict(con.execute("SELECT metric, observations FROM engine_histogram_quantiles").fetchall())
        n = con.execute(
            "SELECT count(DISTINCT window_start_s) FROM engine_histogram_windows(20, true, NULL, NULL)"
        ).fetchone()
        assert n[0] > 1
    finally:
        con.close()
    assert windows == whole


def test_diff_of_two_exports(tmp_path: Path) -> None:
    """diff of run B's and run B2's exports (B2: the same load with twice the KV cache, a real what-if), known
    from the engine's histograms alone: each mean per request is the histogram sums' change over the counts',
    computed here from the scrapes directly; B2 queues less."""
    from lltrace.analysis.diff import diff

    b2_scrapes = sorted((DATA / "vllm_cpu" / "B2_kv2x" / "metrics").glob("metrics_*.prom"))
    runs = {}
    for name, scrapes in (("b", SCRAPES), ("b2", b2_scrapes)):
        path = tmp_path / f"{name}.json"
        series = _series(scrapes, f"{name}:8000")
        path.write_text(json.dumps(_matrix(series)))
        runs[name] = lltrace.ingest([path], store=tmp_path / "store", run=name)

        def change(family: str, series: dict = series) -> float:
            (values,) = [v for (n, _), v in series.items() if n == family]
            return float(values[-1][1]) - float(values[0][1])

        runs[name + "_queue"] = change("vllm:request_queue_time_seconds_sum") / change(
            "vllm:request_queue_time_seconds_count"
        )
        runs[name + "_e2e"] = change("vllm:e2e_request_latency_seconds_sum") / change(
            "vllm:e2e_request_latency_seconds_count"
        )
    doc = diff("b", "b2", store=tmp_path / "store")
    assert doc["basis"] == "engine histograms"
    comps = doc["components"]
    assert comps["queue"]["baseline_s"] == pytest.approx(runs["b_queue"], rel=1e-12)
    assert comps["queue"]["incident_s"] == pytest.approx(runs["b2_queue"], rel=1e-12)
    total = runs["b2_e2e"] - runs["b_e2e"]
    assert sum(c["delta_s"] for c in comps.values()) == pytest.approx(total, rel=1e-9)  # the parts add up to e2e
    assert comps["queue"]["delta_s"] < 0 and "faster" in doc["verdict"]
    assert set(doc["quantiles"]) >= {"ttft", "e2e", "queue"}


@pytest.mark.parametrize(
    ("run", "folder"), [("B_kvpressure", "metrics"), ("B2_kv2x", "metrics"), ("D_chunked", "metrics")]
)
def test_the_gauges_name_what_the_spans_name_the_queue_waited_for(run: str, folder: str, tmp_path: Path) -> None:
    """The queue split from the scrapes alone (engine_queue_causes) against the one from the whole run (spans,
    iteration log, server log): where the spans put most of the queue at KV room (B, B2), so do the gauges;
    where they put none there (D, sequence-limited), neither do the gauges, and slots, which need
    max_num_seqs, are unknown from the metrics, never guessed."""
    scrapes = lltrace.ingest([DATA / "vllm_cpu" / run / folder], store=tmp_path / "s")
    whole = lltrace.ingest([DATA / "vllm_cpu" / run], store=tmp_path / "w")
    con = whole.store.connect([whole.id])
    try:
        kv, slot = con.execute(
            "SELECT sum(kv_wait_s) / sum(queue_s), sum(slot_wait_s) / sum(queue_s) FROM attribution_queue_causes"
        ).fetchone()
    finally:
        con.close()
    causes = lltrace.analyze(scrapes).to_dict()["engine_queue_causes"]
    assert causes["slot_share"] is None and causes["budget_wait_s"] is None
    assert (causes["kv_share"] > 0.5) == (kv > 0.5)
    if kv == 0:
        assert causes["kv_share"] == 0 and slot > 0.5


def test_diff_of_two_windows_of_one_export(tmp_path: Path) -> None:
    """One export, two windows (before and after run B's 8th scrape): each side's mean queue time is the
    histogram's change over that side's own samples, computed here from the scrapes directly; a window is
    FROM/TO in ISO-8601 (UTC without a zone) or seconds."""
    from lltrace.analysis.diff import diff, parse_window

    series = _series(SCRAPES, "b:8000")
    path = tmp_path / "export.json"
    path.write_text(json.dumps(_matrix(series)))
    lltrace.ingest([path], store=tmp_path / "store", run="b")
    (queue_sum,) = [v for (n, _), v in series.items() if n == "vllm:request_queue_time_seconds_sum"]
    (queue_n,) = [v for (n, _), v in series.items() if n == "vllm:request_queue_time_seconds_count"]
    cut = queue_sum[8][0]  # the 9th scrape's time: the incident window starts there

    def mean(lo: int, hi: int) -> float:
        return (float(queue_sum[hi][1]) - float(queue_sum[lo][1])) / (float(queue_n[hi][1]) - float(queue_n[lo][1]))

    doc = diff("b", "b", store=tmp_path / "store", baseline_window=(None, cut), incident_window=(cut, None))
    assert doc["basis"] == "engine histograms" and doc["incident"]["window"] == [cut, None]
    assert doc["components"]["queue"]["baseline_s"] == pytest.approx(mean(0, 7), rel=1e-12)
    assert doc["components"]["queue"]["incident_s"] == pytest.approx(mean(8, -1), rel=1e-12)
    assert parse_window("2026-11-30T14:00:00/2026-11-30T15:00:00Z") == (1796047200.0, 1796050800.0)
    assert parse_window(f"{cut}/") == (cut, None)
    with pytest.raises(lltrace.LltraceError, match="expected FROM/TO"):
        parse_window("2026-11-30T14:00:00")


def test_one_file_per_family_reads_as_one_export(tmp_path: Path) -> None:
    """Run B's export taken one query per family (72 files, each its own columns of the same samples) gives
    what the single answer gives: one sample per time, the same figures, queue split and verdict."""
    answer = _b_export()
    families: dict[str, list] = {}
    for s in answer["data"]["result"]:
        name = s["metric"]["__name__"]
        families.setdefault(re.sub(r"_(bucket|sum|count)$", "", name), []).append(s)
    folder = tmp_path / "families"
    folder.mkdir()
    for k, result in enumerate(families.values()):
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        (folder / f"family_{k:03d}.json").write_text(json.dumps(body))
    one = tmp_path / "one.json"
    one.write_text(json.dumps(answer))
    split = lltrace.ingest([folder], store=tmp_path / "a")
    assert split.metadata["samples_merged_across_files"] == 15 and len(families) > 50
    a, b = lltrace.analyze(split).to_dict(), lltrace.analyze(lltrace.ingest([one], store=tmp_path / "b")).to_dict()
    for key in ("kv", "engine_latency", "engine_queue_causes", "classification", "replicas", "engine_quantiles"):
        assert a[key] == b[key], key


def test_files_that_disagree_on_a_sample_leave_it_null(tmp_path: Path) -> None:
    t0 = 1_790_000_000

    def answer(name: str, values: list) -> str:
        series = {"metric": {"__name__": name, "instance": "a:8000"}, "values": values}
        return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [series]}})

    folder = tmp_path / "overlap"
    folder.mkdir()
    (folder / "1.json").write_text(answer("vllm:num_requests_running", [[t0, "3"], [t0 + 15, "4"]]))
    (folder / "2.json").write_text(answer("vllm:num_requests_running", [[t0 + 15, "5"], [t0 + 30, "6"]]))
    with pytest.warns(lltrace.InputWarning, match="1 values of one sample differ between files"):
        run = lltrace.ingest([folder], store=tmp_path / "store")
    rows = sorted(run.table("engine_stats").to_dicts(), key=lambda r: r["ts_s"])
    assert [(r["ts_s"] - t0, r["running"]) for r in rows] == [(0, 3), (15, None), (30, 6)]


def test_sglang_families_per_data_parallel_rank(tmp_path: Path) -> None:
    """SGLang's scheduler families as its collector names and labels them (model_name, engine_type, tp_rank,
    pp_rank, dp_rank: sglang/srt/metrics/collector.py, scheduler_metrics_mixin.py): each data-parallel rank is
    an engine of its own (token usage is per rank, never summed), a tensor rank's copy of rank 0's figures is
    left out and counted, and the retraction counter (not the per-interval gauge) is the preemptions."""
    t0 = 1_790_000_000

    def series(name: str, dp: str, values: list, tp: str = "0") -> dict:
        labels = {"model_name": "m", "engine_type": "unified", "tp_rank": tp, "pp_rank": "0", "dp_rank": dp}
        return {"metric": {"__name__": name, "instance": "s:30000", **labels}, "values": values}

    result = []
    for dp, running, usage, retracted in (("0", "3", "0.25", "2"), ("1", "5", "0.75", "7")):
        result += [
            series("sglang:num_running_reqs", dp, [[t0, running], [t0 + 15, running]]),
            series("sglang:token_usage", dp, [[t0, usage], [t0 + 15, usage]]),
            series("sglang:num_retracted_requests_total", dp, [[t0, "0"], [t0 + 15, retracted]]),
            series("sglang:num_retracted_reqs", dp, [[t0, "9"], [t0 + 15, "0"]]),  # per interval: not a total
        ]
    result.append(series("sglang:num_running_reqs", "0", [[t0, "3"], [t0 + 15, "3"]], tp="1"))
    path = tmp_path / "sglang.json"
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))
    run = lltrace.ingest([path], store=tmp_path / "store")
    rows = {(r["engine"], r["ts_s"] - t0): r for r in run.table("engine_stats").to_dicts()}
    assert {e for e, _ in rows} == {"s:30000/0", "s:30000/1"}
    assert [rows[("s:30000/0", 0)][c] for c in ("running", "kv_usage")] == [3, 0.25]
    assert [rows[("s:30000/1", 15)][c] for c in ("running", "kv_usage")] == [5, 0.75]
    assert run.metadata["sources"][0]["dropped"]["other_rank_series"] == 1
    assert lltrace.analyze(run).to_dict()["kv"]["preemptions"] == 9  # 2 + 7 over the span


def test_a_scrape_of_two_servers_keeps_them_apart(tmp_path: Path) -> None:
    """One exposition holding two servers' families (a gateway's or a federating scrape's /metrics), told apart
    by their model_name: two rows, each the server's own, never a sum (two KV usages are not one 0-2 fraction);
    built from two of run A's real scrapes, one relabelled. A NaN sample is no reading, not a poisoned sum."""
    folder = DATA / "vllm_cpu" / "A_baseline" / "metrics_rate4"
    first, second = (folder / "metrics_05.prom").read_text(), (folder / "metrics_09.prom").read_text()
    lines = second.splitlines(keepends=True)
    other = "".join(x.replace('model_name="tiny-llama"', 'model_name="other"') for x in lines if x[:1] != "#")
    both = tmp_path / "gateway.prom"
    both.write_text(
        first
        + other.replace(
            'vllm:num_requests_waiting{engine="0",model_name="other"} ',
            'vllm:num_requests_waiting{engine="0",model_name="other"} NaN\n#',
        )
    )
    cols = "running, waiting, kv_usage, generation_tokens_total"
    alone = [
        lltrace.ingest([folder / f], store=tmp_path / f).sql(f"SELECT {cols} FROM engine_stats").rows()[0]
        for f in ("metrics_05.prom", "metrics_09.prom")
    ]
    run = lltrace.ingest([both], store=tmp_path / "both")
    rows = run.sql(f"SELECT instance, {cols} FROM engine_stats ORDER BY instance").rows()
    assert [r[0] for r in rows] == ["model_name=other", "model_name=tiny-llama"]
    assert rows[1][1:] == alone[0]
    assert rows[0][1:] == (alone[1][0], None, *alone[1][2:])  # its waiting gauge NaN: NULL
    (src,) = run.metadata["sources"]
    # vllm:cache_config_info carries no model_name: the two servers' copies are one series twice (said so); nor do
    # the API servers' response counters (http_requests_total: 2 series in the page), which no server owns: dropped
    http = len(re.findall(r"^http_requests_total\{", first, re.M))
    assert src["dropped"] == {"nan_samples": 1, "duplicated_series": 1, "http_series_of_no_server": http}
    assert src["replicas_by"] == ["model_name"]


def test_tgis_series_in_an_api_answer_read_as_its_scrape(tmp_path: Path) -> None:
    """TGI's tgi_* series (its router's families) in a query_range answer: its queue and batch gauges as waiting
    and running, its queue-time histogram's sum and count, at each sample time."""
    t0 = 1764547200.0
    series = {
        ("tgi_queue_size", (("instance", "tgi:80"),)): [[t0, "3"], [t0 + 15, "0"]],
        ("tgi_batch_current_size", (("instance", "tgi:80"),)): [[t0, "8"], [t0 + 15, "2"]],
        ("tgi_request_queue_duration_sum", (("instance", "tgi:80"),)): [[t0, "1.5"], [t0 + 15, "1.75"]],
        ("tgi_request_queue_duration_count", (("instance", "tgi:80"),)): [[t0, "5"], [t0 + 15, "9"]],
    }
    path = tmp_path / "tgi_range.json"
    path.write_text(json.dumps(_matrix(series)))
    run = lltrace.ingest([path], store=tmp_path / "s")
    rows = run.sql(
        "SELECT ts_s, waiting, running, queue_time_sum_s, queue_time_count FROM engine_stats ORDER BY ts_s"
    ).rows()
    assert rows == [(t0, 3.0, 8.0, 1.5, 5.0), (t0 + 15, 0.0, 2.0, 1.75, 9.0)]
