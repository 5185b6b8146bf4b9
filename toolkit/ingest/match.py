"""One request, one row, without ids: pair a client's records with an engine's on what both of them saw.

Both sides of one request saw its send (client) / arrival (engine), its first and last token, and its prompt
and output lengths. The client's clock is unknown (``perf_counter``, another machine), so first the offset
between the two clocks is found from the arrival sequences alone: every client-engine pair proposes an
offset, and the true one is where they crowd (the shortest window holding half the sampled client records:
the *shorth*, a robust estimator that tolerates up to half the records without a partner), refined to the
median residual of nearest neighbours. Then every pair close enough in every feature is a candidate, and the
pairs are chosen by an optimal assignment (most pairs, then the least total mismatch in units of each
feature's robust spread): never a record matched twice, never a greedy zip. Records left without a partner
are unmatched. Pairs that could be swapped at almost no cost are ties: the features cannot tell those
requests apart, and nothing that sums over requests depends on how they were broken.

Scales and windows come from the run itself: each feature's systematic offset (the median over first-pass
pairs: network, frontend) and spread (the MAD, as a normal sigma), and each window is twice the largest
residual of those pairs that agree on their token counts; the estimate is made from mutual nearest neighbours
in arrival, then once more from the assignment. A token count whose most common difference holds for at least
``threshold_join_exact_tokens()`` of the pairs (a majority: the same tokenizer on both sides, or a constant
template) must show that difference on every pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lltrace.queries import thresholds

TIME_FEATURES = ("arrival", "first_token", "last_token")
TOKEN_FEATURES = ("input_tokens", "output_tokens")
_SAMPLE = 256  # client records that propose clock offsets
_PAIRS = 4_000_000  # beyond this many proposals the arrival histograms are cross-correlated instead
_FLOOR = {"arrival": 1e-6, "first_token": 1e-6, "last_token": 1e-6, "input_tokens": 0.5, "output_tokens": 0.5}


@dataclass
class Side:
    """One source's records, as arrays of one length (NaN where the source does not give a value): the send
    (client) or arrival (engine) time on the source's own clock, first- and last-token times on that clock, and
    the prompt and output token counts."""

    arrival: np.ndarray
    first_token: np.ndarray
    last_token: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray

    @classmethod
    def of(cls, rows: list[dict[str, Any]], keys: dict[str, str]) -> Side:
        """From row dicts: ``keys`` names the row key of each feature (absent keys are NaN)."""

        def col(feature: str) -> np.ndarray:
            key = keys.get(feature)
            return np.array([np.nan if key is None or r.get(key) is None else float(r[key]) for r in rows], dtype=float)

        return cls(*(col(f) for f in (*TIME_FEATURES, *TOKEN_FEATURES)))

    def __len__(self) -> int:
        return len(self.arrival)

    def feature(self, name: str) -> np.ndarray:
        """One feature's array."""
        return getattr(self, name)


@dataclass
class Matching:
    """The pairs (client index, engine index), the clock offset (engine time = client time + offset), per-feature
    residuals of the pairs (median and p90 of the absolute residual after the systematic offset), the tied
    client records, and who stayed unmatched."""

    pairs: list[tuple[int, int]]
    offset_s: float | None
    residuals: dict[str, dict[str, float]] = field(default_factory=dict)
    systematic: dict[str, float] = field(default_factory=dict)
    exact_tokens: list[str] = field(default_factory=list)
    tied: set[int] = field(default_factory=set)
    unmatched_client: list[int] = field(default_factory=list)
    unmatched_engine: list[int] = field(default_factory=list)


def clock_offset(client: np.ndarray, engine: np.ndarray) -> float | None:
    """The offset that puts client send times on the engine's clock, from the two arrival sequences alone."""
    c = np.sort(client[np.isfinite(client)])
    e = np.sort(engine[np.isfinite(engine)])
    if len(c) == 0 or len(e) == 0:
        return None
    sample = c[np.linspace(0, len(c) - 1, min(len(c), _SAMPLE)).round().astype(int)]
    if len(sample) * len(e) <= _PAIRS:
        guess = _shorth_offset(sample, e)
    else:
        guess, width = _correlated_offset(c, e)
        guess = _local_shorth(c, e, guess, 2 * width)
    # refine: the median residual of every client record's nearest engine arrival
    return guess + float(np.median(_nearest(c + guess, e)[1]))


def _shorth(proposals: np.ndarray, records: int) -> float:
    """The median of the shortest window holding half the records' worth of the proposed offsets (the shorth:
    it tolerates up to half the records without a partner)."""
    d = np.sort(proposals)
    k = max(1, records // 2)
    if len(d) <= k:
        return float(np.median(d))
    start = int(np.argmin(d[k:] - d[:-k]))
    return float(np.median(d[start : start + k + 1]))


def _ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every index of every half-open range [lo[i], hi[i]), flattened: (the range's i, the index)."""
    counts = np.maximum(hi - lo, 0)
    owner = np.repeat(np.arange(len(lo)), counts)
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, np.repeat(lo, counts) + within


def _shorth_offset(sample: np.ndarray, e: np.ndarray) -> float:
    """Every sampled client record against every engine record proposes an offset; the true one is where the
    proposals crowd (their shorth)."""
    return _shorth((e[None, :] - sample[:, None]).ravel(), len(sample))


def _correlated_offset(c: np.ndarray, e: np.ndarray) -> tuple[float, float]:
    """For long runs: the lag that best lines up the two arrival histograms (their cross-correlation, by FFT),
    on bins a quarter of the engine's mean gap between arrivals (so a bin holds a quarter of an arrival on
    average: the true lag stands out by the records that land in the same bin; no finer than 2^22 bins);
    returns the lag and the bin width."""
    base = float(e[0] - c[0])
    span = max(float(c[-1] - c[0]), float(e[-1] - e[0]), 1e-9)
    width = max(span / (4 * len(e)), span / 2**22)
    bins = int(span / width) + 1
    hc = np.bincount(((c - c[0]) / width).astype(np.int64), minlength=bins)[:bins]
    he = np.bincount(((e - e[0]) / width).astype(np.int64), minlength=bins)[:bins]
    size = 1 << int(np.ceil(np.log2(2 * bins)))
    corr = np.fft.irfft(np.fft.rfft(he, size) * np.conj(np.fft.rfft(hc, size)), size)
    lag = int(np.argmax(corr))
    if lag > size // 2:
        lag -= size
    return base + lag * width, width


def _local_shorth(c: np.ndarray, e: np.ndarray, guess: float, radius: float) -> float:
    """The shorth of the offsets every client record proposes with the engine arrivals within ``radius`` of
    ``guess``: the coarse lag made as fine as the records allow."""
    owner, at = _ranges(np.searchsorted(e, c + guess - radius, "left"), np.searchsorted(e, c + guess + radius, "right"))
    if len(at) < max(1, len(c) // 2):
        return guess
    return _shorth(e[at] - c[owner], len(c))


def _nearest(x: np.ndarray, sorted_e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each x, the index of the nearest value of ``sorted_e`` and the signed residual (e - x)."""
    pos = np.clip(np.searchsorted(sorted_e, x), 1, len(sorted_e) - 1) if len(sorted_e) > 1 else np.zeros(len(x), int)
    left, right = sorted_e[pos - 1], sorted_e[pos]
    take_left = np.abs(x - left) <= np.abs(right - x)
    idx = np.where(take_left, pos - 1, pos) if len(sorted_e) > 1 else pos
    return idx, sorted_e[idx] - x


def _robust(values: np.ndarray, floor: float) -> tuple[float, float]:
    """(median, MAD as a normal sigma, at least ``floor``) of the finite values."""
    v = values[np.isfinite(values)]
    if len(v) == 0:
        return 0.0, floor
    med = float(np.median(v))
    return med, max(1.4826 * float(np.median(np.abs(v - med))), floor)


def _features(client: Side, engine: Side, offset: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each feature as (client value on the engine's clock, engine value)."""
    out = {}
    for f in TIME_FEATURES:
        out[f] = (client.feature(f) + offset, engine.feature(f))
    for f in TOKEN_FEATURES:
        out[f] = (client.feature(f), engine.feature(f))
    return out


def match(client: Side, engine: Side, offset: float | None = None) -> Matching:
    """Pair client and engine records one to one (see the module docstring); ``offset`` if already known."""
    if offset is None:
        offset = clock_offset(client.arrival, engine.arrival)
    if offset is None or len(client) == 0 or len(engine) == 0:
        return Matching(
            [], offset, unmatched_client=list(range(len(client))), unmatched_engine=list(range(len(engine)))
        )
    feats = _features(client, engine, offset)
    order = np.argsort(np.where(np.isfinite(engine.arrival), engine.arrival, np.inf), kind="stable")
    timed = order[np.isfinite(engine.arrival[order])]
    e_sorted = engine.arrival[timed]
    c_arrival = feats["arrival"][0]
    # first pass: mutual nearest neighbours in arrival time
    first: list[tuple[int, int]] = []
    if len(e_sorted):
        finite = np.flatnonzero(np.isfinite(c_arrival))
        idx, gap = _nearest(c_arrival[finite], e_sorted)
        nn_engine = timed[idx]
        # each engine record keeps the client nearest to it
        order = np.lexsort((np.abs(gap), nn_engine))
        firsts = np.ones(len(order), dtype=bool)
        firsts[1:] = nn_engine[order][1:] != nn_engine[order][:-1]
        chosen = order[firsts]
        first = list(zip(finite[chosen].tolist(), nn_engine[chosen].tolist(), strict=True))
    # estimate each feature's systematic offset, spread and window from the pairs at hand, assign, and once more
    # from the assignment (which holds the pairs the first pass missed)
    for _ in range(2):
        systematic, scale, window, exact = _estimate(feats, first)
        first = _assign(feats, timed, e_sorted, systematic, scale, window, exact)
    pairs = first
    res = {}
    if pairs:
        ci = np.array([p[0] for p in pairs])
        ej = np.array([p[1] for p in pairs])
        for f in (*TIME_FEATURES, *TOKEN_FEATURES):
            c, e = feats[f]
            dev = np.abs(e[ej] - c[ci] - systematic[f])
            dev = dev[np.isfinite(dev)]
            if len(dev):
                res[f] = {"median": float(np.median(dev)), "p90": float(np.quantile(dev, 0.9))}
    tied = _ties(pairs, feats, res)
    matched_c = {p[0] for p in pairs}
    matched_e = {p[1] for p in pairs}
    return Matching(
        pairs=sorted(pairs),
        offset_s=offset,
        residuals=res,
        systematic=systematic,
        exact_tokens=exact,
        tied=tied,
        unmatched_client=[i for i in range(len(client)) if i not in matched_c],
        unmatched_engine=[j for j in range(len(engine)) if j not in matched_e],
    )


def _estimate(
    feats: dict[str, tuple[np.ndarray, np.ndarray]], pairs: list[tuple[int, int]]
) -> tuple[dict[str, float], dict[str, float], dict[str, float], list[str]]:
    """Each feature's systematic offset and spread over ``pairs``, the tight-side window of each time feature,
    and the token counts that must agree (up to their most common difference) on every pair."""
    ci0 = np.array([p[0] for p in pairs], dtype=int)
    ej0 = np.array([p[1] for p in pairs], dtype=int)
    exact_share = thresholds()["join_exact_tokens"]
    systematic: dict[str, float] = {}
    scale: dict[str, float] = {}
    exact: list[str] = []
    agree = np.ones(len(pairs), dtype=bool)
    for f in TOKEN_FEATURES:
        c, e = feats[f]
        diff = e[ej0] - c[ci0]
        known = diff[np.isfinite(diff)]
        systematic[f], scale[f] = _robust(diff, _FLOOR[f])
        if len(known):
            values, counts = np.unique(known, return_counts=True)
            mode = float(values[np.argmax(counts)])
            if counts.max() / len(known) >= exact_share:
                exact.append(f)
                systematic[f] = mode
                agree &= ~np.isfinite(diff) | (diff == mode)
    window: dict[str, float] = {}
    for f in TIME_FEATURES:
        c, e = feats[f]
        diff = e[ej0] - c[ci0]
        systematic[f], scale[f] = _robust(diff[agree], _FLOOR[f])
        dev = diff[agree] - systematic[f]
        dev = dev[np.isfinite(dev)]
        # the tight side of each residual (the engine cannot see a request before it was sent, nor send a token
        # after the client got it): twice the furthest pair; the other side is bounded by the client's own
        # lifetime of the request
        if not len(dev):
            window[f] = -np.inf if f == "arrival" else np.inf
        elif f == "arrival":
            window[f] = 2 * min(float(dev.min()), -scale[f])
        else:
            window[f] = 2 * max(float(dev.max()), scale[f])
    return systematic, scale, window, exact


def _costs(
    ci: np.ndarray,
    ej: np.ndarray,
    feats: dict[str, tuple[np.ndarray, np.ndarray]],
    systematic: dict[str, float],
    scale: dict[str, float],
    window: dict[str, float],
    exact: list[str],
) -> np.ndarray:
    """The mismatch of each pair (ci[k], ej[k]) in units of each feature's spread; inf where the pair is not a
    candidate (a token count off its exact difference, an engine arrival before any pair allows, an engine token
    after the client had it). A feature one side lacks adds nothing."""
    total = np.zeros(len(ci))
    for f, (c, e) in feats.items():
        r = e[ej] - c[ci]
        known = np.isfinite(r)
        dev = np.where(known, r - systematic[f], 0.0)
        if f in exact:
            total[known & (r != systematic[f])] = np.inf
            continue
        if f == "arrival":
            total[known & (dev < window[f])] = np.inf
        elif f in window:
            total[known & (dev > window[f])] = np.inf
        total += np.abs(dev) / scale[f]
    return total


def _candidates(
    feats: dict[str, tuple[np.ndarray, np.ndarray]],
    timed: np.ndarray,
    e_sorted: np.ndarray,
    systematic: dict[str, float],
    window: dict[str, float],
) -> tuple[np.ndarray, np.ndarray]:
    """Every (client, engine) pair whose engine arrival lies within the client's lifetime of the request (on the
    engine's clock, from the tight arrival window on), as two index arrays."""
    c_arrival = feats["arrival"][0]
    c_end = np.fmax(feats["last_token"][0], feats["first_token"][0])
    c_end = np.where(np.isfinite(c_end), c_end, c_arrival)
    clients = np.flatnonzero(np.isfinite(c_arrival))
    lo = np.searchsorted(e_sorted, c_arrival[clients] + systematic["arrival"] + window["arrival"], side="left")
    hi = np.searchsorted(e_sorted, np.fmax(c_end[clients], c_arrival[clients] + systematic["arrival"]), side="right")
    owner, at = _ranges(lo, hi)
    return clients[owner], timed[at]


def _assign(
    feats: dict[str, tuple[np.ndarray, np.ndarray]],
    timed: np.ndarray,
    e_sorted: np.ndarray,
    systematic: dict[str, float],
    scale: dict[str, float],
    window: dict[str, float],
    exact: list[str],
) -> list[tuple[int, int]]:
    """The optimal one-to-one assignment over the candidate pairs, solved per connected group (a client and an
    engine record that are each other's only candidate pair up directly)."""
    ci, ej = _candidates(feats, timed, e_sorted, systematic, window)
    cost = _costs(ci, ej, feats, systematic, scale, window, exact)
    keep = np.isfinite(cost)
    ci, ej, cost = ci[keep], ej[keep], cost[keep]
    if len(ci) == 0:
        return []
    per_client = np.bincount(ci)
    per_engine = np.bincount(ej)
    alone = (per_client[ci] == 1) & (per_engine[ej] == 1)
    pairs = list(zip(ci[alone].tolist(), ej[alone].tolist(), strict=True))
    edges: dict[int, dict[int, float]] = {}
    for c, e, k in zip(ci[~alone].tolist(), ej[~alone].tolist(), cost[~alone].tolist(), strict=True):
        edges.setdefault(c, {})[e] = k
    for group_c, group_e in _components(edges):
        matrix = np.full((len(group_c), len(group_e)), np.inf)
        col = {e: k for k, e in enumerate(group_e)}
        for r, c in enumerate(group_c):
            for e, k in edges[c].items():
                matrix[r, col[e]] = k
        for r, k in hungarian(matrix):
            pairs.append((group_c[r], group_e[k]))
    return pairs


def _components(edges: dict[int, dict[int, float]]) -> list[tuple[list[int], list[int]]]:
    """Connected groups of the bipartite candidate graph (client indices, engine indices)."""
    by_engine: dict[int, list[int]] = {}
    for ci, row in edges.items():
        for ej in row:
            by_engine.setdefault(ej, []).append(ci)
    seen: set[int] = set()
    out = []
    for start in edges:
        if start in seen:
            continue
        stack, cs, es, es_seen = [start], [], [], set()
        seen.add(start)
        while stack:
            ci = stack.pop()
            cs.append(ci)
            for ej in edges[ci]:
                if ej in es_seen:
                    continue
                es_seen.add(ej)
                es.append(ej)
                for other in by_engine[ej]:
                    if other not in seen:
                        seen.add(other)
                        stack.append(other)
        out.append((sorted(cs), sorted(es)))
    return out


def hungarian(cost: np.ndarray) -> list[tuple[int, int]]:
    """Most pairs, then least total cost, over the finite entries of ``cost`` (rows x cols; inf = no pair).

    The rectangular problem is squared with "unmatched" entries dearer than any set of real pairs, so a real pair
    is always preferred to none; solved by the shortest-augmenting-path Hungarian method (O(n^3))."""
    n_r, n_c = cost.shape
    finite = cost[np.isfinite(cost)]
    unmatched = (float(finite.sum()) + 1.0) * 2 if len(finite) else 1.0
    forbidden = unmatched * 2
    n = n_r + n_c
    big = np.full((n, n), unmatched)
    big[:n_r, :n_c] = np.where(np.isfinite(cost), cost, forbidden)
    big[n_r:, n_c:] = 0.0  # dummy rows to dummy columns cost nothing
    u = np.zeros(n + 1)
    v = np.zeros(n + 1)
    p = np.zeros(n + 1, dtype=int)  # p[j]: row assigned to column j (1-based; 0 = none)
    way = np.zeros(n + 1, dtype=int)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(n + 1, np.inf)
        used = np.zeros(n + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            cur = big[i0 - 1] - u[i0] - v[1:]
            free = ~used[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            u[p[used]] += delta
            v[used] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    out = []
    for j in range(1, n + 1):
        r, c = p[j] - 1, j - 1
        if r < n_r and c < n_c and np.isfinite(cost[r, c]):
            out.append((r, c))
    return out


def _ties(
    pairs: list[tuple[int, int]],
    feats: dict[str, tuple[np.ndarray, np.ndarray]],
    residuals: dict[str, dict[str, float]],
) -> set[int]:
    """Client records the features cannot tell apart: the same prompt and output sizes, sent within the arrival
    residual (p90) of each other, and their engine records' first and last tokens within those residuals too.
    Which of them got which engine record is arbitrary; the set of pairs is not."""
    if len(pairs) < 2 or "arrival" not in residuals:
        return set()
    send = feats["arrival"][0]
    by_send = sorted(pairs, key=lambda p: send[p[0]])
    within = {f: residuals[f]["p90"] for f in TIME_FEATURES if f in residuals}
    tied: set[int] = set()
    for k, (ci, ej) in enumerate(by_send):
        for m in range(k + 1, len(by_send)):
            cj, ek = by_send[m]
            if send[cj] - send[ci] > within["arrival"]:
                break
            same = all(
                feats[f][0][ci] == feats[f][0][cj] and feats[f][1][ej] == feats[f][1][ek]
                for f in TOKEN_FEATURES
                if np.isfinite(feats[f][0][ci]) or np.isfinite(feats[f][1][ej])
            )
            close = all(
                not np.isfinite(feats[f][1][ej]) or abs(feats[f][1][ej] - feats[f][1][ek]) <= within[f]
                for f in ("first_token", "last_token")
                if f in within
            )
            if same and close:
                tied.update((ci, cj))
    return tied
