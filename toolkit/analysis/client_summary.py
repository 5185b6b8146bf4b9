"""The summaries benchmark clients wrote for their own runs, in one shape: the document's ``client_summary``.

One entry per summary a client wrote (each result object of a vLLM / SGLang bench file, each benchmark of a
guidellm report, an LLMPerf summary), with the figures as the tool computed them, converted to seconds and
named alike; a figure the tool did not write is NULL. These are the client's numbers, labelled as such: where
lltrace computes the same quantity from the per-request rows it may differ for a reason the tool's source
gives (vLLM's request_throughput divides by a duration that starts before the first request's delay:
``tests/test_client_figures.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lltrace.parsers.inference_perf import kv_unread, server_kv_usage

_LATENCIES = ("ttft", "tpot", "itl", "e2e")
_STATS = ("mean", "median", "p90", "p99")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _whole(v: Any) -> int | float | None:
    """A count as the tool wrote it: an int when it is whole."""
    n = _num(v)
    return int(n) if n is not None and n.is_integer() else n


def _entry(source: str, tool: str, stage: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": source,
        "tool": tool,
        "stage": stage,
        "requested_rate_per_s": None,
        "achieved_rate_per_s": None,
        "goodput_per_s": None,
        "goodput_slos": None,
        "max_concurrency": None,
        "completed": None,
        "failed": None,
        "duration_s": None,
        "send_delay_s": None,
        "sent_behind": None,
        "mean_input_tokens": None,
        "mean_output_tokens": None,
        "output_tokens_per_s": None,
        "total_tokens_per_s": None,
    }
    for lat in _LATENCIES:
        out[f"{lat}_s"] = None
    return out


def _dist(values: dict[str, float | None]) -> dict[str, float | None] | None:
    return None if all(v is None for v in values.values()) else values


def _bench(source: dict[str, Any], slos: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """vLLM ``bench serve`` / ``benchmark_serving.py`` and SGLang ``bench_serving`` result objects: ms figures
    named ``{mean,median,p90,p99}_{ttft,tpot,itl,e2el}_ms`` (SGLang: ``..._e2e_latency_ms``)."""
    out = []
    for k, b in enumerate(source["bench"]):
        stage = "warmup" if b.get("phase") == "warmup" else k if len(source["bench"]) > 1 else None
        e = _entry(source["path"], source["format"], stage)
        rate = b.get("request_rate")  # a number, "inf" (all at once) or SGLang's "trace" (a trace's own times)
        e["requested_rate_per_s"] = rate if isinstance(rate, str) else _num(rate)
        e["achieved_rate_per_s"] = _num(b.get("request_throughput"))
        e["completed"], e["failed"] = _whole(b.get("completed")), _whole(b.get("failed"))
        e["duration_s"] = _num(b.get("duration"))
        if e["achieved_rate_per_s"] is None and e["completed"] is not None and e["duration_s"]:
            # SGLang's 2024 result lines leave it out; both tools define it as completed / duration
            e["achieved_rate_per_s"] = e["completed"] / e["duration_s"]
        # requests/s that met every SLO the client was given (vLLM's --goodput; NULL where none was)
        e["goodput_per_s"] = _num(b.get("request_goodput"))
        e["goodput_slos"] = slos if e["goodput_per_s"] is not None else None  # (ttft, tpot, e2el: ms)
        e["max_concurrency"] = _whole(b.get("max_concurrency"))
        for side in ("input", "output"):  # SGLang 2026 writes total_input / total_output (its metrics' names)
            total, done = _num(_first(b, f"total_{side}_tokens", f"total_{side}")), e["completed"]
            e[f"mean_{side}_tokens"] = total / done if total is not None and done else None
        e["output_tokens_per_s"] = _num(b.get("output_throughput"))
        e["total_tokens_per_s"] = _num(_first(b, "total_token_throughput", "total_throughput"))
        for lat, names in (
            ("ttft", ("ttft",)),
            ("tpot", ("tpot",)),
            ("itl", ("itl",)),
            ("e2e", ("e2el", "e2e_latency")),
        ):
            figures = {}
            for stat in _STATS:
                ms = next(
                    (_num(b.get(f"{stat}_{n}_ms")) for n in names if _num(b.get(f"{stat}_{n}_ms")) is not None), None
                )
                figures[stat] = ms / 1e3 if ms is not None else None
            e[f"{lat}_s"] = _dist(figures)
        out.append(e)
    return out


def _first(d: dict[str, Any], *keys: str) -> Any:
    """The value of the first of ``keys`` that ``d`` has a value for."""
    return next((d[k] for k in keys if d.get(k) is not None), None)


def _llmperf(source: dict[str, Any]) -> list[dict[str, Any]]:
    """LLMPerf ``*_summary.json``: ``results_{metric}_s_mean`` and ``_quantiles_p{50,90,99}`` in seconds; its
    inter-token latency is each request's mean gap (no separate TPOT)."""
    s = source["summary"]
    e = _entry(source["path"], source["format"])
    if "num_valid" in s and "mean_ttft" in s:
        return [_llmperf_v1(s, e)]
    e["max_concurrency"] = _whole(s.get("num_concurrent_requests"))
    e["completed"] = _whole(s.get("results_num_completed_requests"))
    e["failed"] = _whole(s.get("results_number_errors"))
    per_min = _num(s.get("results_num_completed_requests_per_min"))
    e["achieved_rate_per_s"] = per_min / 60 if per_min is not None else None
    e["mean_input_tokens"] = _num(s.get("results_number_input_tokens_mean"))
    e["mean_output_tokens"] = _num(s.get("results_number_output_tokens_mean"))
    e["output_tokens_per_s"] = _num(s.get("results_mean_output_throughput_token_per_s"))
    for lat, name in (("ttft", "ttft"), ("itl", "inter_token_latency"), ("e2e", "end_to_end_latency")):
        e[f"{lat}_s"] = _dist(
            {
                "mean": _num(s.get(f"results_{name}_s_mean")),
                "median": _num(s.get(f"results_{name}_s_quantiles_p50")),
                "p90": _num(s.get(f"results_{name}_s_quantiles_p90")),
                "p99": _num(s.get(f"results_{name}_s_quantiles_p99")),
            }
        )
    return [e]


def _llmperf_v1(s: dict[str, Any], e: dict[str, Any]) -> dict[str, Any]:
    """The first release's means (``llmperf.py`` ``results_analysis``, Oct-Dec 2023), over the requests that
    did not raise (mismatched replies included): ``mean_ttft`` in ms rounded to a whole ms, ``total_time`` the
    mean e2e in s. Its ``out_tokens_per_s`` is a mean of per-request rates and its ``inter_token_delay`` is e2e
    per output token (TTFT included), neither the quantity of the columns here: left NULL."""
    e["max_concurrency"] = _whole(s.get("concur_requests"))
    valid, mismatch = _whole(s.get("num_valid")), _whole(s.get("num_mismatch"))
    e["completed"] = valid + mismatch if valid is not None and mismatch is not None else None
    e["failed"] = _whole(s.get("num_exceptions"))
    e["mean_input_tokens"] = _num(s.get("mean_tokens_in"))
    e["mean_output_tokens"] = _num(s.get("mean_tokens_out"))
    ttft_ms, e2e = _num(s.get("mean_ttft")), _num(s.get("total_time"))
    e["ttft_s"] = _dist(
        {"mean": ttft_ms / 1e3 if ttft_ms is not None else None, "median": None, "p90": None, "p99": None}
    )
    e["e2e_s"] = _dist({"mean": e2e, "median": None, "p90": None, "p99": None})
    return e


def _guidellm(source: dict[str, Any]) -> list[dict[str, Any]]:
    """guidellm ``benchmarks[].metrics``: the successful requests' distributions (``mean``, ``median``,
    ``percentiles.p90/p99``), latencies in ms except ``request_latency`` (s)."""
    out = []
    benches = source["guidellm_metrics"]
    for b in benches:
        e = _entry(source["path"], source["format"], b.get("label") if len(benches) > 1 else None)
        e["requested_rate_per_s"] = _num(b.get("rate"))
        totals = _obj(b.get("request_totals"))
        e["completed"], e["failed"] = _whole(totals.get("successful")), _whole(totals.get("errored"))
        e["duration_s"] = _num(b.get("duration"))
        m = _obj(b.get("metrics"))

        def ok(name: str, m: dict[str, Any] = m) -> dict[str, Any]:
            return _obj(_obj(m.get(name)).get("successful"))

        e["achieved_rate_per_s"] = _num(ok("requests_per_second").get("mean"))
        e["output_tokens_per_s"] = _num(ok("output_tokens_per_second").get("mean"))
        e["total_tokens_per_s"] = _num(ok("tokens_per_second").get("mean"))
        e["mean_input_tokens"] = _num(ok("prompt_token_count").get("mean"))
        e["mean_output_tokens"] = _num(ok("output_token_count").get("mean"))
        for lat, name, scale in (
            ("ttft", "time_to_first_token_ms", 1e-3),
            ("tpot", "time_per_output_token_ms", 1e-3),
            ("itl", "inter_token_latency_ms", 1e-3),
            ("e2e", "request_latency", 1.0),
        ):
            d = ok(name)
            pct = _obj(d.get("percentiles"))
            raw = {"mean": d.get("mean"), "median": d.get("median"), "p90": pct.get("p90"), "p99": pct.get("p99")}
            e[f"{lat}_s"] = _dist({s: (_num(v) * scale if _num(v) is not None else None) for s, v in raw.items()})
        out.append(e)
    return out


def _aiperf(source: dict[str, Any]) -> list[dict[str, Any]]:
    """AIPerf / GenAI-Perf aggregates (already in seconds): ``avg``, ``p50``, ``p90``, ``p99`` per metric;
    ``ttft`` was renamed ``time_to_first_token`` by aiperf #343. Its inter-token latency is per request,
    (e2e - TTFT) / (output tokens - 1): lltrace's TPOT."""
    summary = source["aiperf_summary"]
    m = summary["metrics"]
    e = _entry(source["path"], source["format"])

    def one(*tags: str) -> dict[str, Any]:
        return next((m[t] for t in tags if t in m), {})

    e["requested_rate_per_s"] = _num(summary.get("request_rate"))
    e["max_concurrency"] = _whole(summary.get("concurrency"))
    e["achieved_rate_per_s"] = _num(one("request_throughput").get("avg"))
    # good requests (every --goodput SLO met) over the benchmark's duration: written only where SLOs were given
    e["goodput_per_s"] = _num(one("goodput").get("avg"))
    e["goodput_slos"] = summary.get("slos")  # as AIPerf was given them: metric tag -> value in its display unit
    e["completed"] = _whole(one("request_count").get("avg"))
    e["failed"] = _whole(one("error_request_count").get("avg"))
    if e["failed"] is None and summary.get("errors_listed") is not None:  # AIPerf's error_summary: [] when none
        e["failed"] = _whole(summary["errors_listed"])
    e["duration_s"] = _num(one("benchmark_duration").get("avg"))
    e["mean_input_tokens"] = _num(one("input_sequence_length").get("avg"))
    e["mean_output_tokens"] = _num(one("output_sequence_length").get("avg"))
    e["output_tokens_per_s"] = _num(one("output_token_throughput").get("avg"))
    for key, tags in (
        ("ttft", ("time_to_first_token", "ttft")),
        ("tpot", ("inter_token_latency",)),
        ("e2e", ("request_latency",)),
    ):
        d = one(*tags)
        e[f"{key}_s"] = _dist({"mean": d.get("avg"), "median": d.get("p50"), "p90": d.get("p90"), "p99": d.get("p99")})
    return [e]


def _trtllm(source: dict[str, Any]) -> list[dict[str, Any]]:
    """``trtllm-bench --report_json`` (``get_statistics_dict``): ms figures, PercentileStats objects whose
    ``average`` is the mean and ``p50`` the median (the value at index int(n * q) of the sorted list, not
    interpolated: ``PercentileStats.from_iterable``). Its statistics count every request it registered, errored
    ones too (``StatsKeeper.generate_statistics_summary``), so it has no failed count; its TPOT is per request,
    (last - first token) / (output tokens - 1) (``RequestRecord.intertoken_latency``). TTFT and TPOT exist only
    for a streamed run."""
    r = source["trtllm_report"]
    info, perf, stream = _obj(r.get("request_info")), _obj(r.get("performance")), _obj(r.get("streaming_metrics"))
    e = _entry(source["path"], source["format"])
    e["completed"] = _whole(info.get("num_requests"))
    e["mean_input_tokens"] = _num(info.get("avg_input_length"))
    e["mean_output_tokens"] = _num(info.get("avg_output_length"))
    e["achieved_rate_per_s"] = _num(perf.get("request_throughput_req_s"))
    total_ms = _num(perf.get("total_latency_ms"))
    e["duration_s"] = total_ms / 1e3 if total_ms is not None else None
    e["output_tokens_per_s"] = _num(perf.get("system_output_throughput_tok_s"))
    e["total_tokens_per_s"] = _num(perf.get("system_total_throughput_tok_s"))
    for lat, pct, mean in (
        ("e2e", _obj(perf.get("request_latency_percentiles_ms")), perf.get("avg_request_latency_ms")),
        ("ttft", _obj(stream.get("ttft_percentiles")), stream.get("avg_ttft_ms")),
        ("tpot", _obj(stream.get("tpot_percentiles")), stream.get("avg_tpot_ms")),
    ):
        average = pct.get("average") if pct.get("average") is not None else mean
        ms = {"mean": average, "median": pct.get("p50"), "p90": pct.get("p90"), "p99": pct.get("p99")}
        e[f"{lat}_s"] = _dist({k: (_num(v) / 1e3 if _num(v) is not None else None) for k, v in ms.items()})
    return [e]


def _llmd(source: dict[str, Any]) -> list[dict[str, Any]]:
    """An llm-d benchmark report (``lltrace.parsers.llmd_report``: already in seconds and per second): its
    requests ``total`` are those sent, of which ``failures`` answered with an error and ``incomplete`` never
    finished (schema 0.2's ``AggregateRequests``); the rest completed."""
    r = source["llmd_report"]
    e = _entry(source["path"], source["format"], r.get("stage"))
    e["requested_rate_per_s"] = r.get("rate_qps")
    e["max_concurrency"] = r["concurrency"] if r.get("concurrency") != "inf" else None
    total, failed, incomplete = r.get("total"), r.get("failures"), r.get("incomplete")
    e["failed"] = failed
    e["completed"] = total - (failed or 0) - (incomplete or 0) if total is not None else None
    e["duration_s"] = r.get("duration_s")

    def mean(key: str) -> float | None:
        return (r.get(key) or {}).get("mean")

    e["achieved_rate_per_s"] = mean("requests_per_s")
    e["output_tokens_per_s"] = mean("output_tokens_per_s")
    e["total_tokens_per_s"] = mean("total_tokens_per_s")
    e["mean_input_tokens"], e["mean_output_tokens"] = mean("input_tokens"), mean("output_tokens")
    for lat in _LATENCIES:
        e[f"{lat}_s"] = r.get(f"{lat}_s")
    if r.get("tool") == "aiperf" and e["tpot_s"] is None:
        # llm-d copies AIPerf's inter_token_latency as its ITL; AIPerf's is per request, (e2e - TTFT) / (output
        # tokens - 1): lltrace's TPOT, as where AIPerf's own file is read (_aiperf)
        e["tpot_s"], e["itl_s"] = e["itl_s"], None
    return [e]


def _obj(v: Any) -> dict[str, Any]:
    """A nested object of a client's summary, or an empty one where the file has something else there."""
    return v if isinstance(v, dict) else {}


def _dist_s(d: Any) -> dict[str, float | None] | None:
    """An inference-perf ``summarize`` distribution (seconds: mean, median, p90, p99 among others)."""
    if not isinstance(d, dict):
        return None
    return _dist({stat: _num(d.get(stat)) for stat in _STATS})


def _inference_perf(client: dict[str, Any], server: dict[str, Any] | None) -> dict[str, Any]:
    """An inference-perf stage: the client's ``summarize_requests`` report and, beside it, the server's
    ``summarize_prometheus_metrics`` of the same stage (labelled ``server``: the engine's own figures)."""
    rep = client["inference_perf"]["summary"]
    stage = client["inference_perf"]["stage"]
    e = _entry(client["path"], client["format"], stage)
    load, ok, bad = _obj(rep.get("load_summary")), _obj(rep.get("successes")), _obj(rep.get("failures"))
    e["requested_rate_per_s"] = _num(load.get("requested_rate"))
    e["achieved_rate_per_s"] = _num(load.get("achieved_rate"))
    e["max_concurrency"] = _whole(load.get("concurrency"))
    e["completed"], e["failed"] = _whole(ok.get("count")), _whole(bad.get("count"))
    e["duration_s"] = _num(load.get("send_duration"))
    # how late each request left the client against its schedule: waiting for a free slot of the client's own
    # concurrency (workers x worker_max_concurrency), time its latencies leave out
    e["send_delay_s"] = _dist_s(load.get("schedule_delay"))
    e["sent_behind"] = _sent_behind(e["requested_rate_per_s"], e["achieved_rate_per_s"], _num(load.get("count")))
    e["mean_input_tokens"] = _num(_obj(ok.get("prompt_len")).get("mean"))
    e["mean_output_tokens"] = _num(_obj(ok.get("output_len")).get("mean"))
    tput = _obj(ok.get("throughput"))
    e["output_tokens_per_s"] = _num(tput.get("output_tokens_per_sec"))
    e["total_tokens_per_s"] = _num(tput.get("total_tokens_per_sec"))
    lat = _obj(ok.get("latency"))
    for key, name in (
        ("ttft", "time_to_first_token"),
        ("tpot", "time_per_output_token"),
        ("itl", "inter_token_latency"),
        ("e2e", "request_latency"),
    ):
        e[f"{key}_s"] = _dist_s(lat.get(name))
    if server is not None:
        e["server"] = _server_side(server, e)
    return e


def _sent_behind(asked: float | None, sent: float | None, n: float | None) -> bool | None:
    """Whether the client sent its requests slower than it was asked to, beyond the randomness of its own schedule:
    ``n`` arrivals of a Poisson schedule span a time whose relative spread is 1/sqrt(n), so a send rate short of
    the asked one by more than three such spreads is the client falling behind (a constant schedule has none)."""
    if asked is None or sent is None or not n:
        return None
    return sent < asked * (1 - 3 / n**0.5)


def _server_only(server: dict[str, Any]) -> dict[str, Any]:
    """A stage's ``summarize_prometheus_metrics`` report with no client report of the same stage beside it: an
    entry whose client figures are NULL (the client's report was not given) and whose ``server`` is the report."""
    e = _entry(server["path"], server["format"], server["inference_perf"]["stage"])
    e["server"] = _server_side(server, e)
    return e


def _server_side(server: dict[str, Any], e: dict[str, Any]) -> dict[str, Any]:
    """The server's figures of a stage (its ``summarize_prometheus_metrics`` report), with the notes on what makes
    them other than the stage's own requests (``e``: the stage's client entry)."""
    srv = _obj(server["inference_perf"]["summary"].get("successes"))
    side = {
        "source": server["path"],
        "requests": _whole(srv.get("count")),
        "rate_per_s": _num(srv.get("rate")),
        "queue_len_mean": _num(_obj(srv.get("queue_len")).get("mean")),
        "running_mean": _num(_obj(srv.get("num_requests_running")).get("mean")),
        "ttft_s": _dist_s(srv.get("time_to_first_token")),
        "tpot_s": _dist_s(srv.get("time_per_output_token")),
        "e2e_s": _dist_s(srv.get("request_latency")),
        "kv_usage_mean": server_kv_usage(srv),
        "preemptions": _num(_obj(srv.get("num_preemptions_total")).get("mean")),
        "prefix_cache_hit_share": _num(_obj(srv.get("prefix_cache_hit_percent")).get("mean")),
    }
    side["notes"] = _server_notes(e["completed"], side["requests"], srv)
    return side


def _server_notes(done: int | float | None, seen: int | float | None, written: dict[str, Any]) -> list[str]:
    """What makes a stage's server figures other than the stage's own requests: the server's count of requests
    (``seen``) is not the client's (``done``, beyond the few percent a rate over a window rounds to), or its KV
    usage was written as 0 while it ran requests (no reading, left NULL: ``kv_unread``); ``written`` the report's
    ``successes``."""
    notes: list[str] = []
    if done and seen and abs(seen - done) > 0.1 * done:
        notes.append(
            f"the server counted {seen:,} requests where the client completed {done:,}: its figures are not those "
            "requests' alone (the client's query window or series)"
        )
    if kv_unread(written):
        notes.append("KV usage reads 0 while the server ran requests: no reading of that metric, not an empty cache")
    return notes


def _stage_order(entry: dict[str, Any]) -> tuple[int, int]:
    stage = entry["stage"]
    return (1, 0) if stage == "summary" else (0, stage if isinstance(stage, int) else 0)


def client_summary(sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every client-written summary among a run's sources (metadata ``sources``), in source order; an
    inference-perf sweep's stages in stage order, the run's summary last, each with its server side (a server
    report given without the client's report of its stage: an entry of its own, the client's figures NULL)."""
    out: list[dict[str, Any]] = []
    servers = {
        (str(Path(s["path"]).parent), s["inference_perf"]["stage"]): s
        for s in sources
        if (s.get("inference_perf") or {}).get("side") == "server"
    }
    # vllm bench serve's --goodput SLOs, from its stdout (the client log) of the same result file
    slos = {
        (s.get("client") or {}).get("result_filename"): (s.get("client") or {}).get("goodput")
        for s in sources
        if (s.get("client") or {}).get("goodput")
    }
    sweep = []
    for s in sources:
        if s.get("bench"):
            # a result file's SLOs from the stdout that names it; a printed table's from its own stdout
            out += _bench(s, slos.get(Path(s["path"]).name) or (s.get("client") or {}).get("goodput"))
        elif s.get("format") == "llmperf-summary" and isinstance(s.get("summary"), dict):
            out += _llmperf(s)
        elif s.get("guidellm_metrics"):
            out += _guidellm(s)
        elif s.get("aiperf_summary"):
            out += _aiperf(s)
        elif s.get("trtllm_report"):
            out += _trtllm(s)
        elif s.get("llmd_report"):
            out += _llmd(s)
        elif (s.get("inference_perf") or {}).get("side") == "client":
            key = (str(Path(s["path"]).parent), s["inference_perf"]["stage"])
            sweep.append(_inference_perf(s, servers.pop(key, None)))
    sweep += [_server_only(s) for s in servers.values()]  # a server report given without its client's
    return out + sorted(sweep, key=lambda e: (str(Path(e["source"]).parent), *_stage_order(e)))
