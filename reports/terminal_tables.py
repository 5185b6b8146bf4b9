"""The other commands' terminal output: the diff table and verdict, the estimate line, an SQL result and the
formats list. They format what they are given; they compute nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from lltrace.reports.labels import QUEUE_PARTS
from lltrace.reports.numbers import count_noun, pct, whole, window_label

_PART_LABEL = dict(QUEUE_PARTS)


def diff_table(doc: dict[str, Any]) -> Group:
    """The diff document: each component's mean per request in both runs, the change, and the verdict."""
    if doc.get("basis") in ("profiler steps", "engine log steps"):
        return _profiler_diff_table(doc)
    t = Table(
        title=f"{_side(doc['baseline'])} → {_side(doc['incident'])} (mean per request"
        f"{', on the baseline mix' if doc['mix']['normalised'] else ''}"
        f"{', from the engine histograms' if doc.get('basis') == 'engine histograms' else ''})"
    )
    for col in ("component", "baseline s", "incident s", "delta s", "share of change"):
        t.add_column(col, justify="left" if col == "component" else "right")
    for c, v in doc["components"].items():
        share = "-" if v["share_of_change"] is None else f"{v['share_of_change']:.0%}"
        t.add_row(
            f"  of queue: {_PART_LABEL[c]}" if c in _PART_LABEL else c,
            *("-" if v[k] is None else f"{v[k]:{f}}" for k, f in (("baseline_s", ".3f"), ("incident_s", ".3f"))),
            "-" if v["delta_s"] is None else f"{v['delta_s']:+.3f}",
            share,
        )
    lines = [Text(doc["verdict"])]
    note = (doc["components"].get("preempted") or {}).get("note")
    if note:
        counts = " → ".join(whole(doc[side].get("preemptions")) for side in ("baseline", "incident"))
        lines.append(Text(f"preempted: {counts} preemptions, {note}"))
    return Group(t, *lines)


def _profiler_diff_table(doc: dict[str, Any]) -> Group:
    """The diff of two runs known from their steps alone (profiler traces, or server logs with every step): their
    steps kind by kind, and GPU time per step by kernel class."""

    def ms(v: float | None, f: str = ",.2f") -> str:
        return "-" if v is None else f"{v * 1e3:{f}}"

    def pair(v: dict[str, Any], key: str, fmt) -> str:
        return f"{fmt(v['baseline_' + key])} → {fmt(v['incident_' + key])}"

    whose = "the engine logs'" if doc["basis"] == "engine log steps" else "the profiler's"
    t = Table(title=f"{_side(doc['baseline'])} → {_side(doc['incident'])} ({whose} steps, kind by kind)")
    for col in (
        "kind",
        "steps",
        "baseline ms",
        "incident ms",
        "delta ms",
        "tokens / step",
        "ms / token",
        "GPU busy ms",
    ):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for kind, v in doc["components"].items():
        t.add_row(
            kind,
            pair(v, "steps", whole),
            ms(v["baseline_s"]),
            ms(v["incident_s"]),
            "-" if v["delta_s"] is None else f"{v['delta_s'] * 1e3:+,.2f}",
            pair(v, "tokens_per_step", lambda x: "-" if x is None else f"{x:,.1f}"),
            pair(v, "s_per_token", lambda x: ms(x, ",.3f")),
            pair(v, "gpu_busy_s", ms),
        )
    parts: list[Table | Text] = [t]
    if doc.get("kernel_classes"):
        g = Table(title="GPU time per traced step, by kernel class")
        for col in ("kernel class", "baseline ms", "incident ms", "delta ms"):
            g.add_column(col, justify="left" if col == "kernel class" else "right")
        for c, v in doc["kernel_classes"].items():
            g.add_row(
                c, ms(v["baseline_s_per_step"], ",.3f"), ms(v["incident_s_per_step"], ",.3f"), ms(v["delta_s"], "+,.3f")
            )
        parts.append(g)
    parts.append(Text(doc["verdict"]))
    return Group(*parts)


def client_attribution_table(rows: list[dict[str, Any]]) -> Table:
    """The run's attribution per client (``attribution.by_client``: a sweep's load levels, clients run at once), as
    means per request in ms, in the order the clients began."""
    t = Table(title="By client (mean per request, ms)")
    cols = ("client", "requests", "arrivals/s", "in/out tok", "e2e", "e2e p90", "queue", "prefill", "decode")
    for col in (*cols, "overhead"):
        t.add_column(col, justify="left" if col == "client" else "right", no_wrap=col in ("client", "in/out tok"))

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1e3:,.1f}"

    for r in rows:
        rate = r["arrival_rate_per_s"]
        t.add_row(
            str(r["client_id"]),
            whole(r["requests"]),
            "-" if rate is None else f"{rate:.3g}",
            f"{r['mean_input_tokens']:,.0f} / {r['mean_output_tokens']:,.0f}",
            *(ms(r[k]) for k in ("e2e_s", "e2e_p90_s", "queue_s", "prefill_s", "decode_s", "overhead_s")),
        )
    return t


def tail_table(tail: dict[str, Any]) -> Group:
    """The slowest tenth of the requests against the rest (``attribution.tail``): means per request in ms, their
    sizes, and the sentence on what makes the gap."""
    t = Table(title="The slowest 10% against the rest (mean per request, ms)")
    cols = ("requests", "e2e", "queue", "prefill", "decode", "preempted", "overhead", "in/out tok", "ms/token")
    for col in ("", *cols):
        t.add_column(col, justify="left" if not col else "right", no_wrap=col in ("", "in/out tok"))

    def ms(v: float | None, f: str = ",.1f") -> str:
        return "-" if v is None else f"{v * 1e3:{f}}"

    for label, r in (("slowest 10%", tail["slowest"]), ("rest", tail["rest"])):
        known = r["mean_input_tokens"] is not None and r["mean_output_tokens"] is not None
        sizes = f"{r['mean_input_tokens']:,.0f} / {r['mean_output_tokens']:,.0f}" if known else "-"
        t.add_row(
            label,
            whole(r["requests"]),
            *(ms(r[f"{p}_s"]) for p in ("e2e", "queue", "prefill", "decode", "preempted", "overhead")),
            sizes,
            ms(r["decode_s_per_token"], ",.2f"),
        )
    return Group(t, Text(tail["verdict"]))


def _side(side: dict[str, Any]) -> str:
    """A diff side: its run, and its window where it has one (UTC)."""
    window = side.get("window")
    if not window:
        return side["run"]

    def at(t: float | None) -> str:
        if t is None:
            return ""
        return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if t > 1e9 else f"{t:g} s"

    return f"{side['run']} [{at(window[0])} – {at(window[1])})"


def estimate_line(doc: dict[str, Any]) -> Text:
    """The estimate document in one line."""
    return Text(
        f"prefill {doc['prefill_s'] * 1e3:,.1f} ms ({doc['prefill_share']:.0%}) at "
        f"{doc['prefill_tokens_per_s']:,.0f} tok/s · decode {doc['decode_s'] * 1e3:,.1f} ms "
        f"({doc['decode_share']:.0%}) at {doc['decode_s_per_token'] * 1e3:,.2f} ms/token · crossover "
        f"input length {doc['crossover_input_tokens']:,.0f} tokens (estimates)"
    )


def sql_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """An SQL result as a table (NULL shown as NULL)."""
    t = Table()
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*("NULL" if v is None else str(v) for v in r))
    return t


def formats_text(formats: Sequence[Any]) -> Group:
    """The formats lltrace reads (``lltrace.parsers.FORMATS`` entries), with what each can attribute."""
    parts: list[Text] = []
    for f in formats:
        head = Text()
        head.append(f.name, style="bold")
        head.append(f" ({f.family})")
        parts += [
            head,
            Text(f"  reads: {f.description}"),
            Text(f"  tables: {', '.join(f.tables)}"),
            Text(f"  can attribute: {f.attributes}"),
        ]
        parts += [Text(f"  version: {v}") for v in f.versions]
    return Group(*parts)


def weekly_table(doc: dict[str, Any]) -> Group:
    """The weekly document on the terminal, one row per window: its traffic (the verdict, request count and median
    lengths), tail latency and KV pressure, then what changed between windows. The HTML report draws these and the
    rest (prefill share, p50s) as charts."""
    by_requests = doc.get("figures", "requests") == "requests"
    t = Table(
        title=f"{len(doc['windows'])} windows of one {doc['window']} (UTC; latencies in s; traffic classified by "
        f"{doc['classification_basis']}{'' if by_requests else '; engine histograms: estimates within a bucket'})"
    )
    heads = ["window", "requests", "traffic", "in/out p50", "TTFT p90", "e2e p90", "queue", "KV peak", "preempted"]
    failures = any(w.get("failed") for w in doc["windows"])
    if failures:  # a column only where some window had failures
        heads.insert(2, "failed")
    labels = max((len(w.get("label") or "-") for w in doc["windows"]), default=7)
    for col in heads:
        t.add_column(
            col,
            justify="left" if col in ("window", "traffic") else "right",
            no_wrap=col == "window",
            min_width=labels if col == "traffic" else None,
        )

    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else f"{v:{fmt}}"

    for w in doc["windows"]:
        t.add_row(
            window_label(w["window_start_s"]),
            whole(w.get("requests")),
            *([whole(w.get("failed"))] if failures else []),
            w.get("label") or "-",
            f"{num(w.get('input_p50'), ',.0f')}/{num(w.get('output_p50'), ',.0f')}",
            num(w.get("ttft_p90"), ",.3f"),
            num(w.get("e2e_p90"), ",.3f"),
            pct(w.get("queue_share")),
            pct(w.get("peak_kv_usage")),
            whole(w.get("preemptions")),
        )
    changes = [(window_label(w["window_start_s"]), "; ".join(w["changes"])) for w in doc["windows"] if w["changes"]]
    lines = [Text("What changed: " + ("" if changes else "nothing beyond the thresholds"))]
    lines += [Text(f"  {when}: {what}") for when, what in changes]
    return Group(t, *lines)


def engine_queue_note(doc: dict[str, Any]) -> str | None:
    """What the queue waited for by the engine's own record (``engine_queue_causes``), where no request's queue
    was placed on it (the requests' own split says it where it can): the terminal and the report say it alike."""
    causes = doc.get("engine_queue_causes")
    att = doc.get("attribution") or {}
    if not causes or not causes.get("waiting_request_s"):
        return None
    if any((att.get(key) or {}).get("total_s") is not None for key, _ in QUEUE_PARTS):
        return None
    known = {
        "KV room": causes["kv_share"],
        "a sequence slot": causes["slot_share"],
        "the token budget": causes.get("budget_share"),
    }
    said = [f"{name} {pct(v)}" for name, v in known.items() if v is not None]
    unknown = [name for name, v in known.items() if v is None]
    steps = causes.get("basis") == "steps"
    return (
        f"What the queue waited for, from the engine's {'step log' if steps else 'gauges'} "
        f"({whole(causes['samples'])} {'steps' if steps else 'sample intervals'}, "
        f"{causes['waiting_request_s']:,.1f} request-seconds waiting; estimates): "
        + (" · ".join(said) if said else "nothing they can tell")
        + (f" · not knowable from them: {', '.join(unknown)}" if unknown else "")
    )


def kv_lines(kv: dict[str, Any] | None, spec: dict[str, Any] | None) -> str | None:
    """The KV cache's line (peak usage, preemptions, waiting), the prefix cache's and speculative decoding's, where
    the run has them."""
    lines = []
    if kv and any(v is not None for v in kv.values()):
        wait = f"{kv['kv_wait_s']:,.2f} s" if kv["kv_wait_s"] is not None else ""
        line = (
            f"KV cache: peak usage {pct(kv['peak_usage'])} · preemptions {whole(kv['preemptions'])} · "
            f"peak requests waiting {whole(kv.get('peak_waiting'))}"
            + (
                f" ({whole(kv['peak_waiting_capacity'])} for scheduling capacity)"
                if kv.get("peak_waiting_capacity") is not None
                else ""
            )
            + (f" · queue time waiting for KV room {wait}" if kv["kv_wait_s"] is not None else "")
        )
        prefix = []
        if kv.get("prefix_cache_hit_rate") is not None:
            prefix.append(
                f"hit rate {pct(kv['prefix_cache_hit_rate'])} ({whole(kv['prefix_cache_hit_tokens'])} of "
                f"{whole(kv['prefix_cache_queried_tokens'])} queried tokens, {kv['prefix_cache_hit_basis']})"
            )
        if kv.get("prefix_cached_share") is not None:
            prefix.append(f"prompt tokens cached {pct(kv['prefix_cached_share'])} ({kv['prefix_cached_basis']})")
        if kv.get("prefix_cached_requests"):
            prefix.append(
                f"cached tokens per request for {count_noun(kv['prefix_cached_requests'], 'request')} "
                f"({kv['prefix_cached_requests_basis']})"
            )
        if prefix:
            line += "\nprefix cache: " + " · ".join(prefix)
        lines.append(line)
    if spec:
        lines.append(speculative_line(spec))
    return "\n".join(lines) or None


def speculative_line(spec: dict[str, Any]) -> str:
    """What speculative decoding gained: the share of draft tokens kept and the tokens a decoding request took a
    step, with where the counts come from."""
    k = spec.get("speculative_tokens")
    head = "speculative decoding" + (f" (up to {whole(k)} draft tokens a step)" if k else "")
    if spec.get("draft_tokens") is None:
        if spec.get("acceptance_length"):  # SGLang counts no drafts: its accept length per interval
            return f"{head}: {spec['acceptance_length']:.2f} tokens a request gained per verify step ({spec['basis']})"
        return f"{head}: on, its drafts not counted (no spec-decode counters or SpecDecoding log lines in the run)"
    if not spec["draft_tokens"]:
        return f"{head}: on, no draft proposed ({spec['basis']})"
    said = [f"{pct(spec['acceptance_rate'])} of {whole(spec['draft_tokens'])} draft tokens accepted"]
    basis = spec["basis"]
    if spec.get("tokens_per_decode_step"):
        said.append(f"{spec['tokens_per_decode_step']:.2f} tokens a step per decoding request")
        basis += "; the steps from the iteration log"
    elif spec.get("acceptance_length"):
        said.append(f"{spec['acceptance_length']:.2f} tokens per drafting step (vLLM's mean acceptance length)")
    return f"{head}: " + " · ".join(said) + f" ({basis})"


def cause_lines(excluded: dict[str, Any]) -> list[str]:
    """An outcome's causes as its sources state them, a line each (``requests.excluded[].causes``): the count, the
    cause, the error text where it says more than the cause (not a status's own reason phrase), and when the
    requests arrived, where the sources place them."""
    out = []
    for c in excluded.get("causes") or []:
        text = c.get("error")
        more = f", and {c['texts'] - 1:,} other texts" if (c.get("texts") or 0) > 1 else ""
        said = f' ("{text}"{more})' if text and text not in c["cause"] else ""
        first, last = c.get("first_arrival_s"), c.get("last_arrival_s")
        when = ""
        if first is not None and last is not None:
            when = f", arrived {first:,.1f} s" if c["requests"] == 1 else f", arrived {first:,.1f} to {last:,.1f} s"
            when += " into the run"
        out.append(f"{c['requests']:,} {c['cause']}{said}{when}")
    if excluded.get("other_causes"):
        out.append(f"{excluded['other_causes']:,} of other causes")
    if excluded.get("causes") and excluded.get("no_cause_given"):
        out.append(f"{excluded['no_cause_given']:,} with no cause given")
    return out


def api_responses_line(hist: dict[str, Any]) -> str:
    """What the API server answered over the scrapes' span, by status class (``engine_latency``'s ``http_*``: vLLM's
    ``http_requests_total``), with the share of the answers that were refusals (4xx) and failures (5xx)."""
    said = " · ".join(f"{whole(hist.get(f'http_{k}') or 0)} {k}" for k in ("2xx", "4xx", "5xx"))
    share = f": {pct(hist['http_failed_share'])} refused or failed" if hist.get("http_failed_share") else ""
    return f"API server's responses ({hist['basis']}, its http_requests_total): {said}{share}"
