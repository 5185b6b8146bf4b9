"""Pair a client's records with an engine's when the client kept no send times but lists its requests in the
order it sent them: an order-preserving alignment.

SGLang's ``bench_serving --output-details`` (and vLLM's bench before ``start_times``) writes per-request lists
with no time of day, in the order the requests were sent: its tasks are created one per request as the
arrival process releases them and their outputs gathered in that order (``asyncio.gather``). The engine saw
the same requests in its own arrival order, with records of its own in between (the client's warm-up
request, other traffic) and without the client's requests that never reached it (a refused connection).

So the pairs are a monotone alignment of the two sequences: a dynamic programme over (client record, engine
record) that either pairs the two, or passes over one of them at a cost. What both sides measured without a
clock decides where the passes go: the time to first token and end to end, and the prompt and output token
counts. Causality rules a pair out: the client sent before the engine's arrival and saw each token after the
engine made it, so its time to first token and end-to-end time are never shorter than the engine's (``_TICK``
allows for the clocks' rounding). Within that, a pair costs its residuals in robust spreads, each capped at
``_CAP`` (a retokenising client's prompt counts, or a cold first request, have heavy tails): as in ``match``, the
scales come from the run, a first alignment scored by how much the client's own records differ from each other,
then each feature's systematic difference (the median over the first pairs: network and frontend, a
tokeniser's difference) and spread (their MAD) for the final one. Passing over a record costs every feature's
cap, so a possible pair always beats leaving both unpaired. Requests sent a moment apart may reach the engine in
the other order, which no order-preserving alignment can follow: where their engine arrivals lie within the trip's
jitter of each other they are re-paired by their measures (``_uncross``); requests neither the order nor the
measures tell apart are reported as ties (``_ties``).
"""

from __future__ import annotations

import numpy as np

from lltrace.ingest.match import hungarian

FEATURES = ("ttft_s", "e2e_s", "input_tokens", "output_tokens")
_FLOOR = {"ttft_s": 1e-3, "e2e_s": 1e-3, "input_tokens": 0.5, "output_tokens": 0.5}
_CAP = 4.0  # spreads: the most one feature's residual adds to a pair's cost
_TICK = 1e-3  # seconds: how much shorter than the engine's a client's time may read (clock rounding)
_CAUSAL = ("ttft_s", "e2e_s")  # the client's time is the engine's plus the network and the frontend
_MARGIN = 8  # records either side may pass over beyond the difference in the two counts (and the client's errors)
_BLOCK = 16  # client records re-paired at once where requests crossed on the way (_uncross)
_CELLS = 20_000_000  # beyond this many states the alignment is not tried (reported so: too_large)


def _band(n: int, m: int, client_errors: int) -> tuple[int, int]:
    """The alignment's band: how far (engine index minus client index) a pair may lie off the diagonal."""
    k = _MARGIN + client_errors
    return min(0, m - n) - k, max(0, m - n) + k


def too_large(n: int, m: int, client_errors: int = 0) -> str | None:
    """Why ``n`` client records against ``m`` engine records are not aligned at all, or None: the alignment's
    states (one per client record and place in the band) beyond ``_CELLS`` (about a million records each side)."""
    lo, hi = _band(n, m, client_errors)
    cells = n * (hi - lo + 1)
    if cells <= _CELLS:
        return None
    return (
        f"not aligned: {n:,} client records against {m:,} engine records make {cells:,} alignment states, beyond the "
        f"{_CELLS:,} lltrace aligns at once (toolkit/ingest/order.py)"
    )


def align_in_order(
    client: dict[str, np.ndarray], engine: dict[str, np.ndarray], client_errors: int = 0
) -> tuple[list[tuple[int, int]], dict[str, float], set[int]]:
    """The pairs (client index, engine index) of an order-preserving alignment (see the module docstring), each
    feature's systematic difference (client minus engine) over them, and the tied client records (``_ties``: the
    measures cannot tell them apart). ``client`` and ``engine`` hold the ``FEATURES`` as arrays (NaN where
    unknown), the client's in send order, the engine's in arrival order with its arrival times (``arrival_s``);
    ``client_errors``: the client's failed requests (they may have no engine record)."""
    n, m = len(client["ttft_s"]), len(engine["ttft_s"])
    lo, hi = _band(n, m, client_errors)
    if n == 0 or m == 0 or too_large(n, m, client_errors):
        return [], {}, set()
    # first: no systematic difference, each feature scaled by how much the client's own records differ
    scale = {f: _spread(client[f], _FLOOR[f]) for f in FEATURES}
    pairs = _align(client, engine, {f: 0.0 for f in FEATURES}, scale, lo, hi)
    if not pairs:
        return [], {}, set()
    ci, ej = (np.array(x) for x in zip(*pairs, strict=True))
    systematic, spread = {}, {}
    for f in FEATURES:
        d = client[f][ci] - engine[f][ej]
        d = d[np.isfinite(d)]
        systematic[f] = float(np.median(d)) if len(d) else 0.0
        spread[f] = _spread(d, _FLOOR[f]) if len(d) else _FLOOR[f]
    told = {f: v for f, v in systematic.items() if np.isfinite(client[f]).any() and np.isfinite(engine[f]).any()}
    pairs = _uncross(client, engine, _align(client, engine, systematic, spread, lo, hi), systematic, spread)
    return pairs, told, _ties(client, engine, pairs, systematic)


def _ties(
    client: dict[str, np.ndarray], engine: dict[str, np.ndarray], pairs: list[tuple[int, int]], systematic: dict
) -> set[int]:
    """Client records neither the order nor the measures can tell apart: two whose engine records arrived within
    the trip's jitter of each other (so either may have been sent first), of the same prompt and output sizes on
    both sides, each as close to the other's engine record as the p90 of all the pairs' residuals (time to first
    token, end to end) and causally possible. Which got which is arbitrary."""
    if len(pairs) < 2:
        return set()
    jitter = _jitter(client, engine, pairs, systematic)
    ci, ej = (np.array(x) for x in zip(*pairs, strict=True))
    p90 = {}
    for f in _CAUSAL:
        dev = np.abs(client[f][ci] - engine[f][ej] - systematic[f])
        dev = dev[np.isfinite(dev)]
        if len(dev):
            p90[f] = float(np.quantile(dev, 0.9))

    def fits(c: int, e: int) -> bool:
        return all(
            not np.isfinite(d := client[f][c] - engine[f][e]) or (d >= -_TICK and abs(d - systematic[f]) <= p90[f])
            for f in p90
        )

    def sizes(c: int, e: int) -> list[float]:
        return [client[f][c] for f in ("input_tokens", "output_tokens")] + [
            engine[f][e] for f in ("input_tokens", "output_tokens")
        ]

    by_arrival = np.argsort(engine["arrival_s"][ej], kind="stable")
    tied: set[int] = set()
    for k, a in enumerate(by_arrival):
        for b in by_arrival[k + 1 :]:
            if engine["arrival_s"][ej[b]] - engine["arrival_s"][ej[a]] > jitter:
                break
            x, y = (int(ci[a]), int(ej[a])), (int(ci[b]), int(ej[b]))
            if np.array_equal(sizes(*x), sizes(*y), equal_nan=True) and fits(x[0], y[1]) and fits(y[0], x[1]):
                tied.update((x[0], y[0]))
    return tied


def _uncross(
    client: dict[str, np.ndarray],
    engine: dict[str, np.ndarray],
    pairs: list[tuple[int, int]],
    systematic: dict[str, float],
    scale: dict[str, float],
) -> list[tuple[int, int]]:
    """The alignment with requests that crossed on the way re-paired. Two requests reach the engine in the other
    order than they were sent only when the later one's trip was shorter by more than the time between their
    sends, so their arrivals lie within the variation of the trip: bounded here by ``_jitter`` (twice the p90 of
    how far the pairs' time-to-first-token lag strays from its median, which holds the trip's variation). Over
    windows of ``_BLOCK`` consecutive client records (overlapping by half), the optimal assignment (most pairs,
    then the least cost: ``hungarian``) of those records to the engine records no record outside the window
    holds, each record to those arriving within the jitter of its place in the order (its partner, or between
    its paired neighbours'). A tie keeps the order (a cost of a millionth per place moved)."""
    n, m = len(client["ttft_s"]), len(engine["ttft_s"])
    arrival = engine["arrival_s"]
    jitter = _jitter(client, engine, pairs, systematic)
    partner = np.full(n, -1)
    owner = np.full(m, -1)
    for ci, ej in pairs:
        partner[ci], owner[ej] = ej, ci
    for start in range(0, n, _BLOCK // 2):
        stop = min(n, start + _BLOCK)
        near = partner[max(0, start - 1) : stop + 1]
        near = near[near >= 0]
        if not len(near):
            continue
        js = np.arange(max(0, int(near.min()) - _BLOCK), min(m, int(near.max()) + _BLOCK + 1))
        js = js[(owner[js] < 0) | ((owner[js] >= start) & (owner[js] < stop))]
        allowed, at = [], []
        for ci in range(start, stop):
            before, after = partner[max(0, ci - _BLOCK) : ci], partner[ci + 1 : ci + 1 + _BLOCK]
            before, after = before[before >= 0], after[after >= 0]
            at.append(partner[ci] if partner[ci] >= 0 else (int(before[-1]) if len(before) else int(near.min())))
            lo = arrival[partner[ci]] if partner[ci] >= 0 else (arrival[before[-1]] if len(before) else -np.inf)
            hi = arrival[partner[ci]] if partner[ci] >= 0 else (arrival[after[0]] if len(after) else np.inf)
            allowed.append((arrival[js] >= lo - jitter) & (arrival[js] <= hi + jitter))
        # only the records that may have crossed are re-paired: those unpaired or with another candidate, and
        # those whose partner one of them could take
        ok, mine = np.array(allowed), partner[start:stop]
        active = (mine < 0) | (ok.sum(axis=1) > 1)
        while (grow := (mine >= 0) & ~active & np.isin(mine, js[ok[active].any(axis=0)])).any():
            active |= grow
        if not active.any():
            continue  # every record's only candidate is its partner: nothing here can have crossed
        cols = np.flatnonzero(ok[active].any(axis=0))
        rows = [
            np.where(ok[r, cols], _pair_cost(client, engine, start + r, js[cols], systematic, scale), np.inf)
            + 1e-6 * np.abs(js[cols] - at[r])
            for r in np.flatnonzero(active)
        ]
        owner[mine[active & (mine >= 0)]] = -1
        partner[start + np.flatnonzero(active)] = -1
        for r, k in hungarian(np.array(rows)):
            ci, ej = start + int(np.flatnonzero(active)[r]), int(js[cols[k]])
            partner[ci], owner[ej] = ej, ci
    return [(ci, int(ej)) for ci, ej in enumerate(partner) if ej >= 0]


def _jitter(
    client: dict[str, np.ndarray], engine: dict[str, np.ndarray], pairs: list[tuple[int, int]], systematic: dict
) -> float:
    """How far apart two requests' engine arrivals may lie and the two still have crossed on the way: twice the
    p90 of the pairs' time-to-first-token lag (client minus engine: the trip both ways and the frontend) from its
    median, else of the end-to-end lag; ``_TICK`` at least."""
    if not pairs:
        return _TICK
    ci, ej = (np.array(x) for x in zip(*pairs, strict=True))
    for f in _CAUSAL:
        dev = np.abs(client[f][ci] - engine[f][ej] - systematic[f])
        dev = dev[np.isfinite(dev)]
        if len(dev):
            return max(2 * float(np.quantile(dev, 0.9)), _TICK)
    return _TICK


def _spread(values: np.ndarray, floor: float) -> float:
    """The MAD of the finite values as a normal sigma, at least ``floor``."""
    v = values[np.isfinite(values)]
    if len(v) == 0:
        return floor
    return max(1.4826 * float(np.median(np.abs(v - np.median(v)))), floor)


def _align(
    client: dict[str, np.ndarray],
    engine: dict[str, np.ndarray],
    systematic: dict[str, float],
    scale: dict[str, float],
    lo: int,
    hi: int,
) -> list[tuple[int, int]]:
    """The least-cost monotone alignment within the band ``lo <= j - i <= hi``: a pair costs its features'
    scaled residuals (``_pair_cost``), passing over a record every feature's cap."""
    n, m = len(client["ttft_s"]), len(engine["ttft_s"])
    width = hi - lo + 1
    skip = _CAP * len(FEATURES)
    inf = np.inf
    # cost[i, d]: the least cost of aligning the first i client records with the first i + lo + d engine records
    cost = np.full((n + 1, width), inf)
    step = np.zeros((n + 1, width), dtype=np.int8)  # 1 pair, 2 pass a client record, 3 pass an engine record
    d_idx = np.arange(width)
    # every pair the band holds, at once: client r with engine r + lo + d (the move into row r + 1)
    r_idx = np.arange(n)[:, None]
    e_idx = r_idx + lo + d_idx[None, :]
    inside = (e_idx >= 0) & (e_idx < m)
    pair = np.where(inside, _pair_cost(client, engine, r_idx, np.clip(e_idx, 0, m - 1), systematic, scale), inf)
    for i in range(n + 1):
        j = i + lo + d_idx
        valid = (j >= 0) & (j <= m)
        row = np.full(width, inf)
        how = np.zeros(width, dtype=np.int8)
        if i == 0:
            row[valid & (j == 0)] = 0.0
        else:
            prev = cost[i - 1]
            paired = prev + pair[i - 1]  # a pair: (i-1, j-1) at the same d
            # pass over client record i-1: from (i-1, j), one d higher there
            passed = np.full(width, inf)
            passed[:-1] = prev[1:] + skip
            row = np.where(valid, np.minimum(paired, passed), inf)
            how = np.where(paired <= passed, 1, 2).astype(np.int8)
        # pass over engine records along the row: cost[d] = min over e <= d of row[e] + (d - e) * skip
        shifted = row - d_idx * skip
        best = np.minimum.accumulate(np.where(np.isfinite(shifted), shifted, inf))
        along = best + d_idx * skip
        take = valid & (along < row - 1e-9 * skip)  # (the subtraction and addition round: ties stay put)
        how = np.where(take, 3, how).astype(np.int8)
        row = np.where(take, along, row)
        cost[i], step[i] = row, how
    d = m - n - lo
    if not (0 <= d < width) or not np.isfinite(cost[n, d]):
        return []
    pairs: list[tuple[int, int]] = []
    i = n
    while i > 0 or i + lo + d > 0:
        how = step[i, d]
        if how == 1:
            pairs.append((i - 1, i + lo + d - 1))
            i -= 1
        elif how == 2:
            i, d = i - 1, d + 1
        else:
            d -= 1
    return pairs[::-1]


def _pair_cost(
    client: dict[str, np.ndarray],
    engine: dict[str, np.ndarray],
    ci: int | np.ndarray,
    js: np.ndarray,
    systematic: dict[str, float],
    scale: dict[str, float],
) -> np.ndarray:
    """The cost of pairing client record(s) ``ci`` with the engine records ``js`` (broadcast together): the sum
    over the features both know of the residual in spreads, each at most ``_CAP``; infinite where the client's
    time is shorter than the engine's (causality)."""
    total = np.zeros(np.broadcast(ci, js).shape)
    for f in FEATURES:
        diff = client[f][ci] - engine[f][js]
        known = np.isfinite(diff)
        if f in _CAUSAL:
            total[known & (diff < -_TICK)] = np.inf
        r = np.abs(diff - systematic[f]) / scale[f]
        total += np.where(known, np.minimum(r, _CAP), 0.0)
    return total


ORDER_METHOD = (
    "order: the client's records, listed in the order it sent them (no send times), aligned with the engine's "
    "records in arrival order on time to first token, end-to-end time and token counts (toolkit/ingest/order.py)"
)


def join_in_order(
    unjoined: dict[str, list[dict]], free: list[dict]
) -> tuple[list[tuple[dict, dict]], list[dict], dict[str, list[dict]]]:
    """Join the bench clients among ``unjoined`` that kept no send time (their rows in send order, ``idx``) with
    the ``free`` spans, one file after another in the order given; returns the (client row, span) pairs, each
    such client's report entry, and the clients left for the join on features. The results of one file (a run
    per line, appended as each ended: SGLang's ``--output-file``) are one sequence in send order, aligned at once:
    so a run cannot take the spans of a later run of the same shape."""
    pairs: list[tuple[dict, dict]] = []
    entries: list[dict] = []
    rest: dict[str, list[dict]] = {}
    files: dict[str, list[str]] = {}
    for client_id, rows in unjoined.items():
        if rows[0].get("_row") is not None or any(b["client_start_s"] is not None for b in rows):
            rest[client_id] = rows
        else:
            files.setdefault(rows[0]["client_file"], []).append(client_id)
    taken: set[str] = set()
    for ids in files.values():
        rows = [b for client_id in ids for b in sorted(unjoined[client_id], key=lambda b: b["idx"])]
        spans = sorted(
            (s for s in free if s["request_id"] not in taken and s["start_ns"] is not None), key=lambda s: s["start_ns"]
        )
        client = {f: np.array([np.nan if b[f] is None else float(b[f]) for b in rows]) for f in FEATURES}
        span_keys = {
            "ttft_s": "ttft_s",
            "e2e_s": "e2e_s",
            "input_tokens": "prompt_tokens",
            "output_tokens": "completion_tokens",
        }
        engine = {f: np.array([np.nan if s[k] is None else float(s[k]) for s in spans]) for f, k in span_keys.items()}
        engine["arrival_s"] = np.array([s["start_ns"] / 1e9 for s in spans])
        errors = sum(1 for b in rows if b["status"] == "error")
        found, systematic, tied = align_in_order(client, engine, errors)
        why = too_large(len(rows), len(spans), errors) or (
            "no engine record in its place in the arrival order with its measures"
        )
        for ci, ej in found:
            pairs.append((rows[ci], spans[ej]))
            taken.add(spans[ej]["request_id"])
        for client_id in ids:
            mine = [ci for ci, b in enumerate(rows) if b["client_id"] == client_id]
            matched = sum(1 for ci, _ in found if rows[ci]["client_id"] == client_id)
            entries.append(
                {
                    "client_id": client_id,
                    "requests": len(mine),
                    "method": "order",
                    "method_note": ORDER_METHOD,
                    "matched": matched,
                    "unmatched": len(mine) - matched,
                    "unmatched_why": why,
                    "systematic": systematic,
                    "ties": sum(1 for ci in tied if rows[ci]["client_id"] == client_id),
                }
            )
    return pairs, entries, rest
