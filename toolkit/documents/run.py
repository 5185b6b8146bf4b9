"""The ``run`` section of the analysis document: what was read (each source file, the files skipped), the checks
its values passed, how its clocks were aligned and its client records joined, and the GPU and model it ran."""

from __future__ import annotations

from typing import Annotated

from lltrace.documents.base import UNSET, Doc, UnsetType, field_doc
from lltrace.documents.vocabulary import SkipReason


class Source(Doc, kw_only=True):
    """One file of the run, as ingest read it."""

    path: Annotated[str, field_doc("the file as given (inside an archive: <archive>/<member>)")]
    format: Annotated[str, field_doc("the format it was read as (`lltrace formats` lists them)")]
    version: Annotated[str | None, field_doc("the format's version or schema, where the file tells")]
    records: Annotated[int | None, field_doc("records read from it (events, lines, requests: the format's unit)")]
    dropped: Annotated[
        dict[str, int] | None, field_doc("records left out, by why (a reason -> how many), as the parser counted")
    ]
    warnings: Annotated[list[str], field_doc("what was wrong with it and what was done about it, one line each")]
    rank: Annotated[int | None, field_doc("the distributed rank a profiler trace belongs to, where it says")]


class Skipped(Doc, kw_only=True):
    """A file of a folder given as the run that was not read."""

    path: Annotated[str, field_doc("the file")]
    reason: Annotated[str, field_doc("why, in words (the closest formats where it nearly sniffs as one)")]
    kind: Annotated[SkipReason | UnsetType, field_doc("why, as a word of the vocabulary")] = UNSET


class Violation(Doc, kw_only=True):
    """Values that broke a declared rule of a canonical table (``lltrace.tables``): set to NULL at ingest."""

    table: Annotated[str, field_doc("the canonical table")]
    columns: Annotated[list[str], field_doc("the columns the rule reads")]
    rule: Annotated[str, field_doc("the rule broken (a range, a row rule such as `ttft_s <= e2e_s`, whole number)")]
    rows: Annotated[int, field_doc("rows that broke it", "count")]
    part: Annotated[int | None, field_doc("the source file's number in `sources` (null: the table has no parts)")]
    source: Annotated[str | None, field_doc("the source file")]


class Checks(Doc, kw_only=True):
    """The declared rules checked on every value ingest wrote."""

    rules_checked: Annotated[int, field_doc("distinct (table, rule, columns) checked", "count")]
    violations: Annotated[list[Violation], field_doc("each rule a file broke, with how many rows")]
    values_nulled: Annotated[int, field_doc("values set to NULL for breaking a rule", "count")]


class ClockAlignment(Doc, kw_only=True):
    """How one source's clock was put on the run clock."""

    source: Annotated[str, field_doc("the source (file and clock) aligned")]
    method: Annotated[str, field_doc("how, in words")]
    offset_s: Annotated[float | None | UnsetType, field_doc("the offset added to its times", "s")] = UNSET
    residual_median_s: Annotated[float | None | UnsetType, field_doc("median residual of the matched events", "s")] = (
        UNSET
    )
    residual_p90_s: Annotated[float | None | UnsetType, field_doc("90th percentile residual", "s")] = UNSET
    matched_events: Annotated[int | UnsetType, field_doc("events seen by both clocks", "count")] = UNSET
    zone: Annotated[str | UnsetType, field_doc("the time zone a log's stamps were read in, and how it was checked")] = (
        UNSET
    )
    zone_offset_h: Annotated[
        int | None | UnsetType, field_doc("that zone's offset from UTC, hours (null: unknown)")
    ] = UNSET
    first_iteration_minus_first_span_s: Annotated[
        float | UnsetType, field_doc("the log's first iteration less the first span's start: the zone's check", "s")
    ] = UNSET
    first_stats_line_minus_first_span_s: Annotated[
        float | UnsetType, field_doc("the log's first stats line less the first span's start: the zone's check", "s")
    ] = UNSET


class Systematic(Doc, kw_only=True):
    """A client's systematic difference from the engine's records it joined (client less engine)."""

    ttft_s: Annotated[float, field_doc("TTFT", "s")]
    input_tokens: Annotated[float, field_doc("prompt tokens", "tokens")]
    output_tokens: Annotated[float, field_doc("output tokens", "tokens")]


class JoinedClient(Doc, kw_only=True):
    """How one client's records were joined to the engine's."""

    client_id: Annotated[str, field_doc("the client (bench file)")]
    method: Annotated[str | None, field_doc("request_id, features (what both saw) or order (the order it sent)")]
    requests: Annotated[int, field_doc("the client's records", "count")]
    matched: Annotated[int, field_doc("joined to an engine record", "count")]
    unmatched: Annotated[int, field_doc("joined to none", "count")]
    unmatched_why: Annotated[str | UnsetType, field_doc("why those were not joined")] = UNSET
    ties: Annotated[int | UnsetType, field_doc("pairs the features cannot tell apart", "count")] = UNSET
    prefix_from: Annotated[str | UnsetType, field_doc("where the id prefix of the id join was read")] = UNSET
    output_token_mismatches: Annotated[
        int | UnsetType, field_doc("joined pairs whose output token counts differ", "count")
    ] = UNSET
    systematic: Annotated[Systematic | UnsetType, field_doc("a systematic difference between the two sides")] = UNSET
    not_counted: Annotated[int | UnsetType, field_doc("records left out of the figures", "count")] = UNSET


class Residual(Doc, kw_only=True):
    """A feature's residuals over the joined pairs."""

    median: Annotated[float | None, field_doc("median residual, in the feature's unit")]
    p90: Annotated[float | None, field_doc("90th percentile residual")]


class Residuals(Doc, kw_only=True):
    """The residuals of each feature the join compared (seconds for times, tokens for counts)."""

    arrival: Annotated[Residual | UnsetType, field_doc("send time against arrival (s)")] = UNSET
    first_token: Annotated[Residual | UnsetType, field_doc("first token (s)")] = UNSET
    last_token: Annotated[Residual | UnsetType, field_doc("last token (s)")] = UNSET
    input_tokens: Annotated[Residual | UnsetType, field_doc("prompt tokens")] = UNSET
    output_tokens: Annotated[Residual | UnsetType, field_doc("output tokens")] = UNSET


class FeatureJoin(Doc, kw_only=True):
    """The join on what both sides saw (no ids in common)."""

    method: Annotated[str, field_doc("the method, in words")]
    residuals: Annotated[Residuals, field_doc("per feature: its residuals")]
    ties: Annotated[int, field_doc("pairs the features cannot tell apart", "count")]
    exact_token_counts: Annotated[list[str], field_doc("the token counts that matched exactly")]


class Join(Doc, kw_only=True):
    """How the client's records were joined to the engine's."""

    clients: Annotated[list[JoinedClient], field_doc("per client")]
    unmatched_spans: Annotated[int | None, field_doc("engine records no client record took", "count")]
    features: Annotated[FeatureJoin | None, field_doc("the feature join, where one was made")]


class Named(Doc, kw_only=True):
    """A GPU or model the analysis used, and where it came from."""

    name: Annotated[str, field_doc("its name")]
    origin: Annotated[str | None, field_doc("where it came from (an option, the trace's deviceProperties)")]


class RunSection(Doc, kw_only=True):
    """The run and its sources."""

    id: Annotated[str, field_doc("the run's id in the store")]
    lltrace_version: Annotated[str | None, field_doc("the lltrace that ingested it")]
    sources: Annotated[list[Source], field_doc("every file read, in the order of their parts")]
    skipped: Annotated[list[Skipped], field_doc("files of the given folders not read, with why")]
    checks: Annotated[Checks | None, field_doc("the declared rules checked at ingest")]
    clock_alignment: Annotated[list[ClockAlignment], field_doc("how each source's clock was aligned")]
    join: Annotated[Join | None, field_doc("how client records were joined to the engine's (null: no join)")]
    gpu: Annotated[Named | None, field_doc("the GPU of the catalog the analysis used")]
    gpu_not_in_catalog: Annotated[Named | None, field_doc("a GPU a source names that the catalog does not know")]
    model: Annotated[Named | None, field_doc("the model of the catalog the analysis used")]
