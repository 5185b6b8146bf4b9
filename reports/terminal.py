"""The terminal summary of an analysis document (rich). It formats; it computes nothing."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from lltrace.documents.vocabulary import SUSPECT_SKIPS, SkipReason
from lltrace.reports.labels import QUEUE_PARTS
from lltrace.reports.numbers import count_noun, pct, per_s, whole
from lltrace.reports.numbers import ms as _ms
from lltrace.reports.terminal_clients import client_tables
from lltrace.reports.terminal_tables import (
    api_responses_line,
    cause_lines,
    client_attribution_table,
    engine_queue_note,
    kv_lines,
    tail_table,
)


def render(doc: dict[str, Any]) -> Group:
    """Build the renderables of the summary from the analysis document."""
    parts: list[Any] = []
    run = doc["run"]
    head = Text()
    head.append(f"run {run['id']}\n", style="bold")
    for group in _source_groups(run["sources"]):
        s = group[0]
        dropped = ", ".join(f"{k} {v:,}" for k, v in (s.get("dropped") or {}).items()) or "none"
        last = str(group[-1]["path"]).rpartition("/")[2]
        where = s["path"] if len(group) == 1 else f"{s['path']} … {last} ({len(group):,} files)"
        records = sum(g.get("records") or 0 for g in group) if any(g.get("records") for g in group) else None
        head.append(
            f"  {where}\n    {s['format']} · {s.get('version') or 'version unknown'} · "
            f"{count_noun(records, 'event')} · dropped: {dropped}\n"
        )
        for w in s.get("warnings") or []:
            head.append(f"    warning: {w}\n", style="yellow")
    if run.get("skipped"):
        # a file that cannot be read, or that nearly sniffs as a format of the run, may be a damaged part of it
        kinds = [SkipReason(k.get("kind") or SkipReason.UNKNOWN) for k in run["skipped"]]
        suspect = [k for k, kind in zip(run["skipped"], kinds, strict=True) if kind in SUSPECT_SKIPS]
        # files a tool writes beside the read ones with nothing more in them (their reason says what they are)
        known = [
            k for k, kind in zip(run["skipped"], kinds, strict=True) if kind not in (*SUSPECT_SKIPS, SkipReason.UNKNOWN)
        ]
        other = len(run["skipped"]) - len(suspect) - len(known)
        if other:
            head.append(f"  skipped {other} file(s) of no known format\n", style="yellow")
        for k in known:
            head.append(f"  skipped {k['path']}: {k['reason']}\n", style="dim")
        for k in suspect:
            head.append(f"  warning: skipped {k['path']}: {k['reason']} (a damaged part of the run?)\n", style="yellow")
    checks = run.get("checks") or {}
    if checks.get("violations"):
        head.append(
            f"  physical checks: {len(checks['violations'])} broken of {checks['rules_checked']:,} checked; "
            "those values are NULL:\n",
            style="yellow",
        )
        for v in checks["violations"][:8]:
            head.append(
                f"    {v['table']}.{'/'.join(v['columns'])} {v['rule']}: {v['rows']:,} rows"
                + (f" ({v['source']})" if v.get("source") else "")
                + "\n",
                style="yellow",
            )
    for a in run.get("clock_alignment") or []:
        if "residual_median_s" in a:
            head.append(
                f"  clock: {a['source']} aligned to the engine's spans by {a['offset_s']:+,.3f} s "
                f"(residual median {a['residual_median_s'] * 1e3:,.2f} ms, p90 "
                f"{a['residual_p90_s'] * 1e3:,.2f} ms over {a['matched_events']:,} requests)\n"
            )
        elif a.get("source") == "server log":
            head.append(f"  clock: server log — {a['method']}; zone {a['zone']}\n")
    join = run.get("join")
    for c in (join or {}).get("clients", []):
        if c.get("method") == "request_id":
            how = f"by request id ({c.get('prefix_from')})"
        elif c.get("method") == "features":
            how = "on what both saw (send/arrival, first and last token, token counts)"
        elif c.get("method") == "order":
            how = "in the order it sent them (no send times: aligned with the engine's arrivals on TTFT, e2e, sizes)"
        else:
            how = "not joined"
        line = f"  join: {c['client_id']}: {whole(c['matched'])} of {whole(c['requests'])} {how}"
        if c.get("ties"):
            line += f" · {whole(c['ties'])} tied (indistinguishable: same sizes and times)"
        if c.get("output_token_mismatches"):
            line += (
                f" · the client counted other output tokens than the engine for {whole(c['output_token_mismatches'])}"
                " (its own count in its summary; the engine's in requests)"
            )
        if c.get("unmatched"):
            line += f" · {whole(c['unmatched'])} unmatched ({c.get('unmatched_why') or 'no engine record'})"
        if c.get("not_counted"):
            line += (
                f" · {whole(c['not_counted'])} of them not counted: no send time places them beside the engine's "
                "records without a client record, which may be the same requests"
            )
        head.append(line + "\n", style="yellow" if c.get("unmatched") else None)
    if join and join.get("features"):
        res = join["features"].get("residuals") or {}
        shown = [
            f"{name} {res[key]['median'] * 1e3:,.2f} / {res[key]['p90'] * 1e3:,.2f} ms"
            for key, name in (("arrival", "arrival"), ("first_token", "first token"), ("last_token", "last token"))
            if key in res
        ]
        if shown:
            head.append(f"  join residuals (median / p90): {', '.join(shown)}\n")
    if join and join.get("unmatched_spans"):
        head.append(
            f"  join: {whole(join['unmatched_spans'])} engine records with no client record (their own rows)\n",
            style="yellow",
        )
    gpu = run.get("gpu")
    model = run.get("model")
    seen = run.get("gpu_not_in_catalog")
    named = f" ({seen['origin'] or 'named'}: {seen['name']}, not in lltrace's GPU catalog)" if seen else ""
    head.append(
        f"  GPU: {gpu['name'] + ' (' + gpu['origin'] + ')' if gpu else 'unknown'}{named}"
        f" · model: {model['name'] if model else 'unknown'}"
    )
    parts.append(Panel(head, title="lltrace analyze", expand=False))
    parts += client_tables(doc.get("client_summary") or [], per_request=bool((doc.get("requests") or {}).get("count")))

    cls = doc.get("classification")
    if cls:
        head = Text()
        head.append(f"{cls['label']}", style="bold red" if cls["label"].endswith("bound") else "bold")
        head.append(f": {cls['why']}")
        if cls.get("crossover_input_tokens"):
            head.append(
                f"\nCrossover input length L* = {cls['crossover_input_tokens']:,.0f} tokens "
                "(prompts longer than this spend more time in prefill than in decode)"
            )
        parts.append(Panel(head, title="Verdict", expand=False))
    att = doc.get("attribution")
    if att:
        t = Table(
            title=f"Where the time went ({att['requests']:,} requests, summed end-to-end {att['e2e_s_total']:,.2f} s)"
        )
        for col in ("component", "total s", "share", "basis"):
            t.add_column(col, justify="left" if col in ("component", "basis") else "right")
        for c in ("queue", "prefill", "decode", "preempted", "overhead"):
            row = att[c]
            t.add_row(c, f"{row['total_s']:,.3f}", pct(row["share"]), row["basis"] or "-")
        unknown = []
        for key, label in QUEUE_PARTS:
            part = att.get(key)
            if not part:
                continue
            if part["total_s"] is None:
                unknown.append(f"{label}: {part.get('note') or 'unknown'}")
                continue
            t.add_row(f"  of queue: {label}", f"{part['total_s']:,.3f}", pct(part["share_of_parent"]), part["basis"])
        parts.append(t)
        split = any((att.get(key) or {}).get("total_s") is not None for key, _ in QUEUE_PARTS)
        if unknown and att["queue"]["total_s"] and not split:  # one reason for all: no request placed
            parts.append(Text(f"queue split, not known: {(att.get('load_wait') or {}).get('note') or 'unknown'}"))
        elif unknown and att["queue"]["total_s"]:
            parts.append(Text("queue split, not known: " + "; ".join(unknown)))
        preemptions = (doc.get("kv") or {}).get("preemptions")
        if preemptions and not att["preempted"]["total_s"] and att["preempted"].get("note"):
            parts.append(Text(f"preempted: {whole(preemptions)} preemptions, {att['preempted']['note']}"))
        rates = []
        if att.get("prefill_tokens_per_s"):
            basis = (att.get("prefill") or {}).get("basis") or "measured"  # an estimated prefill: an estimated rate
            rate = f"{basis} prefill rate {att['prefill_tokens_per_s']:,.0f} tok/s"
            if att.get("prefill_cached_tokens") and att.get("prefill_computed_tokens_per_s"):
                rate += (
                    f" of prompt tokens ({att['prefill_computed_tokens_per_s']:,.0f} tok/s of those computed: "
                    f"{att['prefill_cached_tokens']:,.0f} came from the prefix cache)"
                )
            rates.append(rate)
        if att.get("decode_s_per_token"):
            rates.append(f"decode {att['decode_s_per_token'] * 1e3:,.2f} ms/token")
        if att.get("clock_errors"):
            rates.append(f"{att['clock_errors']} requests with negative overhead (clock misalignment)")
        if rates:
            parts.append(Text(" · ".join(rates)))
        if att.get("by_client"):
            parts.append(client_attribution_table(att["by_client"]))
        if att.get("tail"):
            parts.append(tail_table(att["tail"]))
    if lines := kv_lines(doc.get("kv"), doc.get("speculative")):
        parts.append(Text(lines))
    advice = doc.get("advice") or []
    if advice:
        t = Table(title="Advice (most valuable first)")
        for col in ("bottleneck", "setting", "action", "expected gain"):
            t.add_column(col)
        for a in advice[:5]:
            g = a["expected_gain"]
            t.add_row(
                a["bottleneck"],
                a.get("engine_setting") or a.get("setting") or "-",
                a["action"],
                f"{g['metric']}: {_gain_figures(g)}\n({a['formula']})",
            )
        parts.append(t)

    mix = doc.get("workload")
    if mix:
        line = f"Workload: {count_noun(mix['requests'], 'request')}"
        if mix["sized"]:
            some = "" if mix["sized"] == mix["requests"] else f" (of the {mix['sized']:,} with sizes)"
            line += (
                f" · prompt p50 {whole(mix['input_p50'])} / p90 {whole(mix['input_p90'])} tokens · output p50 "
                f"{whole(mix['output_p50'])} / p90 {whole(mix['output_p90'])} tokens{some}"
            )
        line += "" if mix["sized"] else " (their sizes not given)"
        if mix.get("rate_per_s"):
            line += f" · arriving {per_s(mix['rate_per_s'])} req/s"
        elif mix.get("arrival_resolution_s") and mix.get("span_s") is not None:
            line += f" · arrivals over {mix['span_s']:,g} s, stamped to {mix['arrival_resolution_s']:g} s: no rate"
        if mix.get("throughput_per_s"):
            line += f" · finished {per_s(mix['throughput_per_s'])} req/s over {mix['window_s']:,.1f} s"
        if mix.get("prefix_reuse") is not None:
            line += f" · prefix blocks reused {pct(mix['prefix_reuse'])}"
        if mix.get("mean_concurrency"):
            line += f" · mean in flight {mix['mean_concurrency']:,.2f}"
        if mix.get("peak_concurrency"):
            line += f" · peak {whole(mix['peak_concurrency'])}"
        parts.append(Text(line))

    hist = doc.get("engine_latency")
    if hist and hist.get("e2e_requests"):
        parts.append(
            Text(
                f"Engine's own latency histograms ({hist['basis']}): {count_noun(hist['e2e_requests'], 'request')} · "
                "mean "
                f"e2e {_ms(hist['e2e_mean_s'])} ms · TTFT {_ms(hist['ttft_mean_s'])} ms · queue "
                f"{_ms(hist['queue_mean_s'])} ms"
                + (f" · queue {pct(hist['queue_share'])} of e2e" if hist.get("queue_share") is not None else "")
            )
        )
    if hist and hist.get("http_4xx") is not None:  # what the API server answered, refusals and failures apart
        parts.append(Text(api_responses_line(hist)))

    note = engine_queue_note(doc)
    if note:
        parts.append(Text(note))

    timeline = doc.get("engine_timeline")
    if timeline and len(timeline["windows"]) > 1 and not doc.get("attribution"):
        t = Table(
            title=f"The engine window by window ({timeline['width_s']:g} s; p90s are histogram estimates, "
            "\\[bucket] their precision)"
        )
        relative = timeline["windows"][0]["window_start_s"] <= 1e9  # a clock of its own: no date to say
        for col in (
            "window (from its start)" if relative else "window (UTC)",
            "requests",
            "running",
            "waiting",
            "peak KV",
            "preempted",
            "TTFT p90 s",
            "queue p90 s",
            "e2e p90 s",
        ):
            t.add_column(col, justify="left" if col.startswith("window") else "right")
        for w in timeline["windows"]:
            t.add_row(
                _utc(w["window_start_s"]),
                whole(w["requests"]),
                "-" if w["mean_running"] is None else f"{w['mean_running']:,.1f}",
                "-" if w["mean_waiting"] is None else f"{w['mean_waiting']:,.1f}",
                pct(w["peak_kv_usage"]),
                whole(w["preemptions"]),
                *(_p90(w, m) for m in ("ttft", "queue", "e2e")),
            )
        parts.append(t)

    replicas = doc.get("replicas") or []
    if len(replicas) > 1:
        t = Table(title=f"Replicas: {len(replicas)} (the engine's own gauges and counters)")
        for col in (
            "replica",
            "samples",
            "peak running",
            "mean running",
            "peak waiting",
            "peak KV",
            "preempted",
            "requests",
            "mean e2e ms",
        ):
            t.add_column(col, justify="left" if col == "replica" else "right")
        for r in replicas:
            t.add_row(
                r["engine"],
                whole(r["samples"]),
                whole(r["peak_running"]),
                "-" if r["mean_running"] is None else f"{r['mean_running']:,.1f}",
                whole(r["peak_waiting"]),
                pct(r["peak_kv_usage"]),
                whole(r["preemptions"]),
                whole(r["requests"]),
                _ms(r["e2e_mean_s"]),
            )

        def total(k: str) -> float:
            return sum(r[k] or 0 for r in replicas)

        t.add_row(
            "all",
            whole(total("samples")),
            "",
            f"{total('mean_running'):,.1f}",
            "",
            "",
            whole(total("preemptions")),
            whole(total("requests")),
            "",
        )
        parts.append(t)

    quantiles = [q for q in doc.get("engine_quantiles") or [] if q["observations"]]
    if quantiles:
        t = Table(
            title="Engine's own histograms: quantile estimates (the bucket holding each is its precision; "
            "≤: at most this: the bucket's upper edge, or the bound its mean sets)"
        )
        for col in ("metric", "observations", "p50", "p90", "p99", "unit"):
            t.add_column(col, justify="left" if col in ("metric", "unit") else "right")

        def fig(v: float) -> str:
            return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"

        def est(q: dict[str, Any], p: str, scale: float) -> str:
            hi = q[f"{p}_hi"]
            if hi is not None and q[p] == hi:  # the estimate is its bucket's upper edge, or the mean's bound on it
                return f"≤ {fig(hi * scale)}"
            return f"{fig(q[p] * scale)} [{fig(q[f'{p}_lo'] * scale)}-{'inf' if hi is None else fig(hi * scale)}]"

        for q in quantiles:
            tokens = q["metric"].endswith("_tokens")
            scale = 1.0 if tokens else 1e3
            t.add_row(
                q["metric"],
                whole(q["observations"]),
                est(q, "p50", scale),
                est(q, "p90", scale),
                est(q, "p99", scale),
                "tokens" if tokens else "ms",
            )
        parts.append(t)

    req = doc.get("requests")
    if req:
        left_out = ", ".join(f"{e['requests']:,} {e['outcome']}" for e in req.get("excluded") or [])
        counted = f"{req['counted']:,} counted, {left_out} left out" if left_out else "all counted"
        basis = f"latencies measured by the {req['basis']}" if req.get("basis") else "no latencies"
        t = Table(title=f"Requests: {req['count']:,} ({counted}; {basis})")
        for col in ("metric", "p50 ms", "p90 ms", "p99 ms", "mean ms"):
            t.add_column(col, justify="left" if col == "metric" else "right")
        for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "e2e"), ("queue_s", "engine queue")):
            d = req.get(key)
            if d:
                t.add_row(label, _ms(d["p50"]), _ms(d["p90"]), _ms(d["p99"]), _ms(d["mean"]))
        if t.row_count:
            parts.append(t)
        else:
            parts.append(Text(f"Requests: {req['count']:,} ({counted}): the sources give no latencies"))
        for e in req.get("excluded") or []:
            parts.append(Text(f"  left out: {e['requests']:,} {e['outcome']}: {e['why']}"))
            parts.extend(Text(f"    {line}") for line in cause_lines(e))

    steps = doc.get("steps")
    if steps:
        t = Table(title=f"Engine steps: {steps['count']:,} (detected from: {', '.join(steps['detection']) or 'none'})")
        for col in (
            "kind",
            "steps",
            "mean ms",
            "p50 ms",
            "p99 ms",
            "total ms",
            "GPU busy ms",
            "prefill tok",
            "decode tok",
            "CUDA graph",
        ):
            t.add_column(col, justify="left" if col == "kind" else "right")
        for row in steps["by_kind"]:
            t.add_row(
                row["kind"] or "unknown",
                whole(row["steps"]),
                _ms(row["wall_s_mean"]),
                _ms(row["wall_s_p50"]),
                _ms(row["wall_s_p99"]),
                _ms(row["wall_s_total"]),
                _ms(row["gpu_busy_s"]),
                *_token_sums(row),
                whole(row["cuda_graph_steps"]),
            )
        if not steps["count"]:
            t.caption = "no engine step markers, ProfilerStep, execute_model or CUDA graph launches found"
        parts.append(t)
        beyond = steps.get("decode_tokens_beyond_requests")
        if (doc.get("speculative") or {}).get("draft_tokens"):
            parts.append(Text("decode tok: the tokens the steps verified, each request's draft tokens included"))
        elif beyond:
            parts.append(
                Text(
                    f"decode tok: {whole(beyond['tokens'])} beyond one a decoding request, in {whole(beyond['steps'])} "
                    f"of {whole(beyond['decode_steps'])} decode steps: speculative decoding's draft tokens verified, "
                    "or requests resumed after preemption recomputing theirs"
                )
            )
        outlasted = [r for r in steps["by_kind"] if r.get("gpu_longer_steps")]
        if outlasted:
            parts.append(Text(_gpu_outlasted(outlasted)))
        by_kernels = (steps.get("count_by_kind_from") or {}).get("kernels")
        if by_kernels:
            parts.append(
                Text(
                    f"step kinds of {count_noun(by_kernels, 'step')} inferred from their kernels (no marker, no input "
                    "shapes: parsers/step_kinds.csv); their token and request counts are unknown"
                )
            )
        for u in steps.get("undecided") or []:
            parts.append(Text(f"{count_noun(u['steps'], 'step')} without a kind: {u['why']}", style="yellow"))
        ranks = steps.get("ranks")
        if ranks and not ranks["agree"]:
            parts.append(
                Text(
                    f"ranks disagree: steps per rank {ranks['steps_per_rank']}; parts {ranks['disagree_parts']} "
                    "differ from the first rank in count or kinds",
                    style="yellow",
                )
            )
        share = steps.get("phase_share")
        if share:
            basis = "GPU busy time" if share["basis"] == "gpu_busy" else "step wall time (no GPU data)"
            outside = share.get("outside_steps_s")
            shown = share.get("steps_hold") is not None
            parts.append(
                Text(
                    f"Share of {basis}{' in steps' if shown else ''}: prefill {pct(share['prefill_share'])} · "
                    f"decode {pct(share['decode_share'])} · mixed {pct(share['mixed_share'])} · other "
                    f"{pct(share['other_share'])}"
                    + (
                        f" · outside any step: {_ms(outside)} of the GPU's {_ms(share['gpu_busy_s'])} ms busy"
                        if shown
                        else ""
                    )
                )
            )
        bounds = [it["bound"] for it in steps["items"] if it.get("bound")]
        if bounds:
            parts.append(
                Text(f"Roofline: {bounds.count('compute')} compute-bound, {bounds.count('memory')} memory-bound steps")
            )
        elif steps.get("bound_note") and steps["count"]:
            parts.append(Text(steps["bound_note"], style="dim"))

    prof = doc.get("profile")
    if prof and prof["gpu_ops"]:
        t = Table(title=f"GPU time by kernel class ({prof['gpu_ops']:,} GPU ops)")
        for col in ("class", "ops", "total ms", "share"):
            t.add_column(col, justify="left" if col == "class" else "right")
        for row in prof["kernel_time"]:
            t.add_row(row["kernel_class"], whole(row["kernels"]), _ms(row["total_s"]), pct(row["share"]))
        parts.append(t)
        busy = ", ".join(
            f"device {b['device']}: {_ms(b['busy_s'])} ms = {pct(b.get('traced_fraction'))} of the "
            f"{_ms(b.get('traced_s'))} ms traced ({pct(b['busy_fraction'])} between its first and last op)"
            for b in prof["gpu_busy"]
        )
        parts.append(Text(f"GPU busy: {busy}"))
        summed, union = sum(r["total_s"] for r in prof["kernel_time"]), sum(b["busy_s"] for b in prof["gpu_busy"])
        if summed > union and _ms(summed) != _ms(union):  # the two figures on screen disagree: say why
            parts.append(
                Text(
                    f"The classes sum to {_ms(summed)} ms, more than the {_ms(union)} ms the GPU was busy: GPU ops ran "
                    "at the same time (on concurrent streams, or on one stream with programmatic dependent launch), "
                    "each counted in full above and the overlap once in the busy time",
                    style="dim",
                )
            )
        variants = ", ".join(
            f"{v['variant'] or 'phase not in name'} {_ms(v['total_s'])} ms" for v in prof["attention_variants"]
        )
        if variants:
            parts.append(Text(f"Attention kernels: {variants}"))
        if prof["orphans"]:
            parts.append(
                Text(
                    f"{prof['orphans']:,} GPU ops were launched before the trace window opened "
                    "(no launch event; kept and flagged `orphan`)",
                    style="yellow",
                )
            )
    elif prof is not None:
        parts.append(
            Text(
                "No GPU kernels in this trace: a CPU-only profile, or a device whose activity lltrace does not read "
                "(MTIA's, HPU's: only CUDA and ROCm kernels, copies and sets)",
                style="dim",
            )
        )
    if len(parts) == 1:  # the header alone: nothing these sources measured
        parts.append(
            Text(
                "Nothing measured in these sources: no requests, engine steps or statistics, profiler events or "
                "client summaries (a configuration, or an empty file). Give them beside the run's measurements.",
                style="yellow",
            )
        )
    return Group(*parts)


def print_summary(doc: dict[str, Any], console: Console | None = None) -> None:
    """Print the summary to the console (stdout by default)."""
    (console or Console()).print(render(doc))


def _token_sums(row: dict[str, Any]) -> tuple[str, str]:
    """A kind's prefill and decode token sums, saying over how many of its steps where not every step gives them
    (steps whose kind came from their kernels have no counts)."""
    some = row.get("token_steps") is not None and 0 < row["token_steps"] < row["steps"]
    tail = f" ({whole(row['token_steps'])} of {whole(row['steps'])} steps)" if some else ""
    return tuple(whole(row[k]) + (tail if row[k] else "") for k in ("prefill_tokens", "decode_tokens"))


def _gain_figures(g: dict[str, Any]) -> str:
    """An expected gain's from -> to, in milliseconds where both are times under a second (a decode step's 9.70 ms
    would read 0.010 s, and its best case 0.000 s)."""
    if g["unit"] == "s" and max(abs(g["from"]), abs(g["to"])) < 1:
        return f"{g['from'] * 1e3:,.2f} -> {g['to'] * 1e3:,.2f} ms"
    return f"{g['from']:,.3f} -> {g['to']:,.3f} {g['unit']}"


def _utc(t: float) -> str:
    """A window's start as a UTC time (an offset for a relative clock)."""
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%m-%d %H:%M:%S") if t > 1e9 else f"+{t:,.0f} s"


def _p90(w: dict[str, Any], metric: str) -> Text:
    """A window's histogram p90 with the bucket it fell in (plain text: brackets are not markup)."""
    v, b = w.get(f"{metric}_p90"), w.get(f"{metric}_p90_bucket")
    if v is None:
        return Text("-")
    if b is not None and b[1] is not None and v == b[1]:  # the bucket's upper edge, or the mean's bound on it
        return Text(f"≤ {v:.3g}")
    hi = "inf" if b is None or b[1] is None else f"{b[1]:g}"
    return Text(f"{v:,.2f} [{'' if b is None else f'{b[0]:g}'}-{hi}]")


def _gpu_outlasted(rows: list[dict[str, Any]]) -> str:
    """The line for steps whose GPU busy time exceeds their CPU span (the table's ms columns are CPU spans)."""
    kinds = ", ".join(f"{whole(r['gpu_longer_steps'])} of {whole(r['steps'])} {r['kind'] or 'unknown'}" for r in rows)
    means = "; ".join(
        f"{r['kind'] or 'unknown'} {_ms(r['gpu_longer_busy_s_mean'])} ms, its first kernel "
        f"{_ms(r['gpu_longer_start_s_mean'])} ms after the step began"
        for r in rows
    )
    return (
        f"The GPU was busy longer than the CPU span of {kinds} steps: launched without waiting for their kernels "
        f"(CUDA graphs, asynchronous scheduling), so the ms columns (CPU spans) are not their time. GPU busy per "
        f"step, mean: {means}"
    )


def _source_groups(sources: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The run's sources in order, consecutive ones of one folder, format and version that dropped nothing and
    warned of nothing (a Prometheus scrape every 15 s, for an hour) together: three or more are one entry."""

    def key(s: dict[str, Any]) -> tuple | None:
        if s.get("dropped") or s.get("warnings"):
            return None
        return (str(s["path"]).rpartition("/")[0], s["format"], s.get("version"))

    groups: list[list[dict[str, Any]]] = []
    for s in sources:
        if groups and key(s) is not None and key(s) == key(groups[-1][-1]):
            groups[-1].append(s)
        else:
            groups.append([s])
    return [g for group in groups for g in ([group] if len(group) >= 3 else [[s] for s in group])]
