"""Replay accuracy on real vLLM runs: the replay's own validations and the real what-if pairs, predicted against
measured.

The runs: the five in ``sample_traces/vllm_cpu/`` (A, B, B2 on one machine; D, E on another, as its README says)
and lltrace's own in ``sample_traces/vllm_cpu_limits/`` (F, G, H_on, H_off, H2_on, H2_off, I, J, Z_off, Z_cap64,
DP2: two data-parallel engines, all on a third: its README). For every run: the held-out validation (step cost
fitted before the last 30 % of the requests no stall or profiler window touched, every request replayed, those
scored). For pairs of runs of one machine: ``--calibrate-on`` the other run, all of this run's requests scored. Then
the real what-ifs: B replayed with ``kv_blocks=80`` against B2, which is B's workload really run with 80 blocks;
H_on (and H2_on, the same shape at 60 req/s) replayed with ``prefix_caching=off`` against H_off (H2_off), which is
its workload (same prompts, same arrival times) really run without the prefix cache, beside the rise the extra
tokens alone would make at the fitted prefill rate; Z_off with ``long_prefill_token_threshold=64`` against Z_cap64,
its workload really run with that cap (and back); and E with ``prefix_caching=off`` (its prompt tokens all
prefilled; no real run to compare with).

The real pairs in ``sample_traces/vllm_cpu_pairs/`` (L_long's workload, one setting moved, each made twice: its
README) are checked with ``--check-against``: 16 and 32 slots, a 2,048- and a 256-token budget, chunked prefill on
and off, and no cap and a 256-token cap on one request's prompt chunk, each way; and, a workload of their own, one
client's requests at 2 and 4 req/s on 4 slots (``rate_scale``), each way.

The held-out table also gives how the engine's own decode-only steps changed speed between the calibration and the
scored window at the same batch (``validation.speed_change``): the part of the error no cost fitted before the
split can know.

Prints Markdown tables (MAPE of the mean, or the absolute error of a figure measured under 1 ms, marked ±):
docs/replay.md's accuracy tables are this output. Measured figures come from the runs' own files (client latencies,
engine spans, the engine's preemption counter), never from the replay.

    python benchmarks/replay_accuracy.py
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from pathlib import Path
from typing import Any

from lltrace import ingest
from lltrace.replay.document import replay
from lltrace.version import __version__

VLLM_CPU = Path(__file__).resolve().parents[1] / "sample_traces" / "vllm_cpu"
OWN = Path(__file__).resolve().parents[1] / "sample_traces" / "vllm_cpu_limits"
INCIDENTS = Path(__file__).resolve().parents[1] / "sample_traces" / "vllm_cpu_incidents"
PAIRED = Path(__file__).resolve().parents[1] / "sample_traces" / "vllm_cpu_pairs"
RUNS = {
    "A": VLLM_CPU / "A_baseline",
    "B": VLLM_CPU / "B_kvpressure",
    "B2": VLLM_CPU / "B2_kv2x",
    "D": VLLM_CPU / "D_chunked",
    "E": VLLM_CPU / "E_prefix",
    "F": OWN / "F_slots",
    "G": OWN / "G_budget",
    "H_on": OWN / "H_pfx_on",
    "H_off": OWN / "H_pfx_off",
    "H2_on": OWN / "H2_pfx_on",
    "H2_off": OWN / "H2_pfx_off",
    "I": OWN / "I_chunk256",
    "J": OWN / "J_batch",
    "Z_off": OWN / "Z_cap_off",
    "Z_cap64": OWN / "Z_cap64",
    "DP2": OWN / "DP2_slots",
    "K": INCIDENTS / "K_steady",
    "L": INCIDENTS / "L_long",
    "M": INCIDENTS / "M_spike",
    "N": INCIDENTS / "N_hog",
    **{name: PAIRED / name for name in (f"P_{k}_{r}" for r in "ab" for k in ("seqs16", "seqs32", "budget256"))},
    **{name: PAIRED / name for name in (f"P_{k}_{r}" for r in "cd" for k in ("seqs16", "nochunk", "cap256"))},
    **{name: PAIRED / name for name in (f"R_rate{k}_{r}" for r in "ab" for k in (2, 4))},
}
RUNS = {k: v for k, v in RUNS.items() if v.exists()}  # a pair not made yet on this checkout is left out

# the real what-ifs checked against the runs that answer them (`--check-against`): base, what-if, real; a pair made
# twice (a, b) counts a direction only where both repeats agree
CHECKS = [
    ("B", "kv_blocks=80", "B2"),
    ("H_on", "prefix_caching=off", "H_off"),
    ("H2_on", "prefix_caching=off", "H2_off"),
    ("Z_off", "long_prefill_token_threshold=64", "Z_cap64"),
    ("Z_cap64", "long_prefill_token_threshold=0", "Z_off"),
    *[
        (f"P_{base}_{r}", what_if, f"P_{real}_{r}")
        for reps, moves in (
            (
                "ab",
                (
                    ("seqs16", "max_num_seqs=32", "seqs32"),
                    ("seqs32", "max_num_seqs=16", "seqs16"),
                    ("seqs16", "max_num_batched_tokens=256", "budget256"),
                    ("budget256", "max_num_batched_tokens=2048", "seqs16"),
                ),
            ),
            (
                "cd",
                (
                    ("seqs16", "chunked_prefill=off", "nochunk"),
                    ("nochunk", "chunked_prefill=on", "seqs16"),
                    ("seqs16", "long_prefill_token_threshold=256", "cap256"),
                    ("cap256", "long_prefill_token_threshold=0", "seqs16"),
                ),
            ),
        )
        for r in reps
        for base, what_if, real in moves
    ],
    *[(f"R_rate{a}_{r}", f"rate_scale={b / a:g}", f"R_rate{b}_{r}") for r in "ab" for a, b in ((2, 4), (4, 2))],
]
PAIRS = [
    ("A", "B"),
    ("B", "A"),
    ("B", "B2"),
    ("B2", "B"),
    ("D", "E"),
    ("E", "D"),
    ("H_on", "H_off"),
    ("H_off", "H_on"),
    ("H2_off", "H2_on"),
    ("F", "G"),
    ("G", "F"),
    ("Z_cap64", "Z_off"),
    ("Z_off", "Z_cap64"),
]
METRICS = ("queue_s", "ttft_s", "tpot_s", "e2e_s")


def _cell(scores: dict[str, Any] | None, metric: str, q: str = "mean") -> str:
    if not scores:
        return "-"
    if scores["scored_by"][metric][q] == "abs_error":
        err = scores["abs_error_s"][metric][q]
        return "-" if err is None else f"±{abs(err) * 1e3:.2f} ms"
    mape = scores["mape"][metric][q]
    return "-" if mape is None else f"{mape:.0%}"


def _row(label: str, scores: dict[str, Any] | None, extra: str = "") -> str:
    n = "-" if not scores else str(scores["requests"])
    cells = " | ".join(_cell(scores, m) for m in METRICS)
    return f"| {label} | {n} | {cells} |{extra}"


def _prefix_pair(on: str, off: str, what_if_doc: dict[str, Any], real_doc: dict[str, Any]) -> None:
    """Rows of the real prefix-cache pair: ``on`` replayed with ``prefix_caching=off`` against ``off``, the same
    workload really run without the cache."""
    h_off, h_base, h_real = what_if_doc["whatifs"][0], what_if_doc["baseline"], real_doc["baseline"]
    for figure, pred, real in [
        ("prompt tokens prefilled", h_off["prefill_tokens"], h_real["prefill_tokens"]),
        ("mean TTFT, s", h_off["summary"]["ttft_s"]["mean"], h_real["measured"]["ttft_s"]["mean"]),
        ("median TTFT, s", h_off["summary"]["ttft_s"]["p50"], h_real["measured"]["ttft_s"]["p50"]),
        ("median queue, s", h_off["summary"]["queue_s"]["p50"], h_real["measured"]["queue_s"]["p50"]),
        ("mean TPOT, s", h_off["summary"]["tpot_s"]["mean"], h_real["measured"]["tpot_s"]["mean"]),
        ("median e2e, s", h_off["summary"]["e2e_s"]["p50"], h_real["measured"]["e2e_s"]["p50"]),
        (
            "mean TTFT rise, s",
            h_off["summary"]["ttft_s"]["mean"] - h_base["summary"]["ttft_s"]["mean"],
            h_real["measured"]["ttft_s"]["mean"] - h_base["measured"]["ttft_s"]["mean"],
        ),
        (
            "mean TTFT rise, the extra tokens at the fitted prefill rate alone (no waiting)",
            (h_off["prefill_tokens"] - h_base["prefill_tokens"])
            / what_if_doc["requests"]["replayed"]
            * what_if_doc["calibration"]["c_prefill_s_per_token"],
            h_real["measured"]["ttft_s"]["mean"] - h_base["measured"]["ttft_s"]["mean"],
        ),
    ]:
        err = "-" if not real else f"{abs(pred - real) / abs(real):.0%}"
        if not figure.startswith("prompt") and abs(real) < 1e-3:  # under 1 ms: its absolute error, as validations
            err = f"±{abs(pred - real) * 1e3:.2f} ms"
        fmt = "{:,.0f}" if figure.startswith("prompt") else "{:,.4f}"
        print(f"| {on} prefix_caching=off → {off} | {figure} | {fmt.format(pred)} | {fmt.format(real)} | {err} |")


CAP = "long_prefill_token_threshold"


def _cap_pair(
    base: str, cap: int, real: str, what_if_doc: dict[str, Any], real_doc: dict[str, Any], store: Path
) -> None:
    """Rows of the real prompt-chunk cap pair: ``base`` replayed with the cap ``real`` ran with, against ``real``;
    the steps that computed prompt tokens counted in ``real``'s own log."""
    w, r = what_if_doc["whatifs"][0], real_doc["baseline"]["measured"]
    (logged,) = (
        ingest([RUNS[real]], store=store)
        .sql("SELECT count(*) FROM engine_steps WHERE source = 'log' AND prefill_tokens > 0")
        .row(0)
    )
    for figure, pred, got in [
        ("steps computing prompt tokens", w["prompt_steps"], logged),
        ("mean TTFT, s", w["summary"]["ttft_s"]["mean"], r["ttft_s"]["mean"]),
        ("mean TPOT, s", w["summary"]["tpot_s"]["mean"], r["tpot_s"]["mean"]),
        ("median e2e, s", w["summary"]["e2e_s"]["p50"], r["e2e_s"]["p50"]),
    ]:
        fmt = "{:,.0f}" if figure.startswith("steps") else "{:,.4f}"
        err = f"{abs(pred - got) / got:.0%}"
        print(f"| {base} {CAP}={cap} → {real} | {figure} | {fmt.format(pred)} | {fmt.format(got)} | {err} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", type=Path, help="also write the tables as this docs page (docs/replay-accuracy.md)")
    args = parser.parse_args()
    if args.write is None:
        _tables()
        return
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        _tables()
    text = buffer.getvalue()
    print(text, end="")
    tables = "\n".join(line for line in text.splitlines() if not line.endswith("s (ingest included)"))
    args.write.write_text(PAGE.format(version=__version__, date=time.strftime("%Y-%m-%d"), tables=tables.strip()))


PAGE = """<!-- written by `python benchmarks/replay_accuracy.py --write docs/replay-accuracy.md`: rerun it -->

# Replay accuracy

What `lltrace replay` gets right and wrong on the real runs in `sample_traces/`, as
`benchmarks/replay_accuracy.py` measures it (lltrace {version}, {date}). The replay is arithmetic on the runs' own
files, so these figures are the same on any machine. How to read them: [Replay](replay.md).

{tables}
"""


def _tables() -> None:
    """Print every table (Markdown)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        docs = {k: replay(v, store=store) for k, v in RUNS.items()}
        _scheduler_table(docs)
        print("\nHeld-out validation (MAPE of the mean; ± absolute error where the measured mean is under 1 ms), and")
        print("the same replayed at the scored window's own speed level (drift-corrected: the criterion's score)\n")
        print(
            "| run | scored | queue | TTFT | TPOT | e2e | left out | same-batch step time, scored / before "
            "| drift-corrected: queue | TTFT | TPOT | e2e | TTFT p90 |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for k, d in docs.items():
            v = d["validation"]
            left = (v or {}).get("left_out") or {}
            change = (v or {}).get("speed_change")
            ratio = "- (no step log)" if not change else f"x{change['ratio']:.2f} ({change['steps_after']:,} steps)"
            dc = (v or {}).get("drift_corrected")
            corrected = " | ".join(_cell(dc, m) for m in METRICS) + f" | {_cell(dc, 'ttft_s', 'p90')}"
            print(_row(k, v, f" {left.get('requests', 0)} | {ratio} | {corrected} |"))
        print("\nCalibrated on one run, replaying another of the same machine (`--calibrate-on`)\n")
        print(
            "| replayed ← calibrated on | scored | queue | TTFT | TPOT | e2e | queue p50 "
            "| preemptions (replayed / measured) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for run, on in PAIRS:
            x = replay(RUNS[run], store=store, calibrate_on=RUNS[on])["cross_validation"]
            p = x["preemptions"]
            measured = "-" if p["measured"] is None else f"{p['measured']:.0f}"
            print(_row(f"{run} ← {on}", x, f" {_cell(x, 'queue_s', 'p50')} | {p['replayed']} / {measured} |"))
        print("\nThe real what-ifs: predicted against the run that really had the setting\n")
        print("| what-if | figure | predicted | measured | error |")
        print("|---|---|---|---|---|")
        b = replay(RUNS["B"], store=store, what_ifs=["kv_blocks=80"])
        kv80 = b["whatifs"][0]
        b2 = docs["B2"]["baseline"]
        pairs = [
            ("median queue, s", kv80["summary"]["queue_s"]["p50"], b2["measured"]["queue_s"]["p50"]),
            ("median TTFT, s", kv80["summary"]["ttft_s"]["p50"], b2["measured"]["ttft_s"]["p50"]),
            ("median e2e, s", kv80["summary"]["e2e_s"]["p50"], b2["measured"]["e2e_s"]["p50"]),
            ("preemptions", kv80["preemptions"], b2["measured_preemptions"]),
        ]
        for figure, pred, real in pairs:
            err = "-" if not real else f"{abs(pred - real) / real:.0%}"
            print(f"| B kv_blocks=80 → B2 | {figure} | {pred:,.3f} | {real:,.3f} | {err} |")
        for on, off in (("H_on", "H_off"), ("H2_on", "H2_off")):
            _prefix_pair(on, off, replay(RUNS[on], store=store, what_ifs=["prefix_caching=off"]), docs[off])
        for base, cap, real in (("Z_off", 64, "Z_cap64"), ("Z_cap64", 0, "Z_off")):
            _cap_pair(base, cap, real, replay(RUNS[base], store=store, what_ifs=[f"{CAP}={cap}"]), docs[real], store)
        e = replay(RUNS["E"], store=store, what_ifs=["prefix_caching=off"])
        off, base = e["whatifs"][0], e["baseline"]
        extra = off["prefill_tokens"] - base["prefill_tokens"]
        prefill_only = extra / e["requests"]["replayed"] * e["calibration"]["c_prefill_s_per_token"]
        rise = off["summary"]["ttft_s"]["mean"] - base["summary"]["ttft_s"]["mean"]
        print(
            f"| E prefix_caching=off | prompt tokens prefilled | {off['prefill_tokens']:,} | "
            f"{base['prefill_tokens']:,} with the cache | - |"
        )
        print(
            f"| E prefix_caching=off | mean TTFT rise, s | {rise:.3f} | {prefill_only:.3f} (the extra {extra:,} tokens "
            f"at the fitted prefill rate alone) | {rise / prefill_only - 1:+.0%} |"
        )
        _check_table(store)
    print(f"\n{time.perf_counter() - started:.0f} s (ingest included)")


def _scheduler_table(docs: dict[str, dict[str, Any]]) -> None:
    """The scheduler check of every run with a step log: the engine's own step times, requests entering when the
    core took them, scored against the spans (MAPE of the mean and of the p90)."""
    print("Scheduler check: the replay with each logged step's time, against the engine's spans (MAPE, mean / p90)\n")
    print("| run | requests | queue | TTFT | TPOT | e2e | steps replayed / logged | first request to part |")
    print("|---|---|---|---|---|---|---|---|")
    for k, d in docs.items():
        x = d.get("scheduler_check")
        if not x:
            print(f"| {k} | - | - | - | - | - | - | no step log, or several engines |")
            continue
        cells = " | ".join(f"{_cell(x, m)} / {_cell(x, m, 'p90')}" for m in METRICS)
        f = x["first_divergence"]
        first = "none" if f is None else f"{f['request_id']} at {f['arrival_s']:.2f} s ({f['requests_parted']} part)"
        print(f"| {k} | {x['requests']} | {cells} | {x['steps_replayed']:,} / {x['steps_logged']:,} | {first} |")


def _check_table(store: Path) -> None:
    """Every real what-if pair, checked against the run that answers it: the hosts' speed difference taken out,
    each mean's error, and the direction of every mean the real run moved by more than 5 %; where a pair was made
    twice, a direction counts only where both repeats moved the same way."""
    print("\nThe real what-ifs checked against the runs that answer them (`--check-against`): predicted / real - 1\n")
    print(
        "| base → what-if → real | speed, real / base | queue | TTFT | TPOT | e2e | preemptions "
        "| moved (real, predicted) | right way |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    moved: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for base, what_if, real in CHECKS:
        if base not in RUNS or real not in RUNS:
            continue
        c = replay(RUNS[base], store=store, what_ifs=[what_if], check_against=RUNS[real])["whatifs"][0]["check"]
        moved.setdefault((base[:-2] if base[-2:] in ("_a", "_b", "_c", "_d") else base, what_if), []).append(
            c["directions"]
        )
        speed = "-" if c["speed_ratio"] is None else f"x{c['speed_ratio']:.2f}"
        errs = " | ".join(
            "-" if c[f"{m}_mean_err"] is None else f"{c[f'{m}_mean_err']:+.0%}"
            for m in ("queue", "ttft", "tpot", "e2e")
        )
        p = c["preemptions"]
        said = ", ".join(f"{m.removesuffix('_s')} {d['real']}/{d['predicted']}" for m, d in c["directions"].items())
        print(
            f"| {base} → {what_if} → {real} | {speed} | {errs} | {p['predicted']} / {p['real']} | {said or 'none'} "
            f"| {'yes' if c['direction_ok'] else 'NO'} |"
        )
    for (base, what_if), repeats in moved.items():
        if len(repeats) < 2:
            continue
        agreed = {m for m in repeats[0] if all(m in r and r[m]["real"] == repeats[0][m]["real"] for r in repeats)}
        right = all(r[m]["predicted"] == r[m]["real"] for r in repeats for m in agreed)
        print(
            f"| {base} (both repeats) → {what_if}: the repeats agree on {', '.join(sorted(agreed)) or 'nothing'} "
            f"| | | | | | | | {'yes' if right else 'NO'} |"
        )


if __name__ == "__main__":
    main()
