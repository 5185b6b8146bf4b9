"""The weekly document (``lltrace weekly --json``): the store's traffic window by window (hour, day or week): the
request mix and its label, latency, failures, the engine's load and KV, and what changed from one window to the
next. From the requests where the store has them, else from the engine's own metrics (estimates)."""

from __future__ import annotations

from typing import Annotated

from lltrace.documents.base import UNSET, Doc, UnsetType, field_doc
from lltrace.documents.vocabulary import Label

_F = float | int | None


class WeeklyIncident(Doc, kw_only=True):
    """An incident of one run that started in the window, as ``lltrace analyze`` says it."""

    run: Annotated[str, field_doc("the run")]
    start_s: Annotated[float, field_doc("its start on the run clock (epoch seconds where absolute)", "s")]
    end_s: Annotated[float, field_doc("its end on the run clock", "s")]
    metric: Annotated[str, field_doc("the metric that departed furthest (ttft, tpot, e2e, queue)")]
    typical: Annotated[float | None, field_doc("its typical p90 in the run", "s")]
    worst: Annotated[float, field_doc("its worst window's p90", "s")]
    requests_over: Annotated[int, field_doc("requests over the threshold", "requests")]
    trigger: Annotated[str, field_doc("what changed at its start: new_requests, arrival_rate, engine_slowdown")]
    verdict: Annotated[str, field_doc("the incident in one sentence, without its mechanism (analyze adds it)")]


class WeeklyWindow(Doc, kw_only=True):
    """One window of the store's traffic (figures from the requests that arrived in it, or the engine's)."""

    window_start_s: Annotated[float | None, field_doc("the window's start (epoch seconds, or the run clock)", "s")]
    requests: Annotated[_F, field_doc("requests that arrived (or that the engine finished) in it", "requests")]
    runs: Annotated[int | UnsetType, field_doc("runs with requests in it", "count")] = UNSET
    engines: Annotated[_F | UnsetType, field_doc("engines with a sample in it", "count")] = UNSET
    failed: Annotated[_F | UnsetType, field_doc("requests that failed (or 4xx and 5xx responses)", "requests")] = UNSET
    counted: Annotated[int | UnsetType, field_doc("requests the figures count", "requests")] = UNSET
    prefill_dominant_share: Annotated[
        float | None, field_doc("counted requests on the prefill side of the crossover", "fraction")
    ]
    classified: Annotated[int | None, field_doc("requests whose side is known", "requests")]
    label: Annotated[Label | None, field_doc("the window's label by the classification rule")]
    changes: Annotated[list[str], field_doc("what changed from the window before, in words")]
    incidents: Annotated[list[WeeklyIncident], field_doc("the runs' incidents that started in it")]
    input_p50: Annotated[_F | UnsetType, field_doc("median prompt tokens", "tokens")] = UNSET
    input_p90: Annotated[_F | UnsetType, field_doc("90th percentile prompt tokens", "tokens")] = UNSET
    output_p50: Annotated[_F | UnsetType, field_doc("median output tokens", "tokens")] = UNSET
    output_p90: Annotated[_F | UnsetType, field_doc("90th percentile output tokens", "tokens")] = UNSET
    input_p50_drift: Annotated[float | UnsetType, field_doc("median prompt length over the last window's, less 1")] = (
        UNSET
    )
    output_p50_drift: Annotated[float | UnsetType, field_doc("median output length over the last window's, less 1")] = (
        UNSET
    )
    ttft_p50: Annotated[_F | UnsetType, field_doc("median TTFT", "s")] = UNSET
    ttft_p90: Annotated[_F | UnsetType, field_doc("90th percentile TTFT", "s")] = UNSET
    e2e_p50: Annotated[_F | UnsetType, field_doc("median e2e", "s")] = UNSET
    e2e_p90: Annotated[_F | UnsetType, field_doc("90th percentile e2e", "s")] = UNSET
    peak_kv_usage: Annotated[_F | UnsetType, field_doc("highest KV-cache usage", "fraction")] = UNSET
    preemptions: Annotated[_F | UnsetType, field_doc("preemptions", "count")] = UNSET
    peak_waiting_capacity: Annotated[_F | UnsetType, field_doc("most requests waiting for capacity", "requests")] = (
        UNSET
    )
    mean_running: Annotated[_F | UnsetType, field_doc("requests running, mean", "requests")] = UNSET
    mean_waiting: Annotated[_F | UnsetType, field_doc("requests waiting, mean", "requests")] = UNSET
    queue_share: Annotated[_F | UnsetType, field_doc("summed queue over summed e2e (engine)", "fraction")] = UNSET
    prefill_time_share: Annotated[_F | UnsetType, field_doc("prefill over prefill and decode time", "fraction")] = UNSET
    e2e_mean_s: Annotated[_F | UnsetType, field_doc("mean e2e (engine)", "s")] = UNSET
    prompt_tokens: Annotated[_F | UnsetType, field_doc("prompt tokens (engine)", "tokens")] = UNSET
    generation_tokens: Annotated[_F | UnsetType, field_doc("tokens generated (engine)", "tokens")] = UNSET
    e2e_sum_s: Annotated[_F | UnsetType, field_doc("summed e2e (engine)", "s")] = UNSET
    queue_sum_s: Annotated[_F | UnsetType, field_doc("summed queue (engine)", "s")] = UNSET
    queue_n: Annotated[_F | UnsetType, field_doc("requests the queue histogram counted", "requests")] = UNSET
    prefill_sum_s: Annotated[_F | UnsetType, field_doc("summed prefill (engine)", "s")] = UNSET
    decode_sum_s: Annotated[_F | UnsetType, field_doc("summed decode (engine)", "s")] = UNSET
    http_2xx: Annotated[_F | UnsetType, field_doc("2xx responses", "count")] = UNSET
    http_4xx: Annotated[_F | UnsetType, field_doc("4xx responses", "count")] = UNSET
    http_5xx: Annotated[_F | UnsetType, field_doc("5xx responses", "count")] = UNSET
    http_responses: Annotated[_F | UnsetType, field_doc("2xx, 4xx or 5xx responses", "count")] = UNSET
    http_failed: Annotated[_F | UnsetType, field_doc("4xx or 5xx responses", "count")] = UNSET
    ttft_p90_bucket: Annotated[list[float | None] | None | UnsetType, field_doc("the p90's bucket (s)")] = UNSET
    e2e_p90_bucket: Annotated[list[float | None] | None | UnsetType, field_doc("the p90's bucket (s)")] = UNSET
    queue_p50: Annotated[_F | UnsetType, field_doc("median queue time (engine)", "s")] = UNSET
    queue_p90: Annotated[_F | UnsetType, field_doc("90th percentile queue time (engine)", "s")] = UNSET
    queue_p90_bucket: Annotated[list[float | None] | None | UnsetType, field_doc("the p90's bucket (s)")] = UNSET
    tpot_p50: Annotated[_F | UnsetType, field_doc("median TPOT (engine)", "s")] = UNSET
    tpot_p90: Annotated[_F | UnsetType, field_doc("90th percentile TPOT (engine)", "s")] = UNSET
    tpot_p90_bucket: Annotated[list[float | None] | None | UnsetType, field_doc("the p90's bucket (s)")] = UNSET
    input_p90_bucket: Annotated[list[float | None] | None | UnsetType, field_doc("the p90's bucket")] = UNSET
    output_p90_bucket: Annotated[list[float | None] | None | UnsetType, field_doc("the p90's bucket")] = UNSET


class WeeklyDocument(Doc, kw_only=True):
    """What ``lltrace weekly`` says of a store's traffic over time."""

    window: Annotated[str, field_doc("hour, day or week")]
    window_s: Annotated[int | float, field_doc("its width", "s")]
    figures: Annotated[str, field_doc("requests, or engine histograms: what the windows' figures come from")]
    classification_basis: Annotated[str, field_doc("what each window's label rests on")]
    windows: Annotated[list[WeeklyWindow], field_doc("the windows, in time order")]
    relative_clock: Annotated[bool, field_doc("whether the times are a run's own clock rather than epoch seconds")]
