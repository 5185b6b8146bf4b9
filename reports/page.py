"""What every page and chart here shares: inline data, long-form rows, thinning, and the offline page that
inlines the Vega bundle once (vl-convert), so a report opens with no network."""

from __future__ import annotations

import html
import json
from typing import Any

import altair as alt

from lltrace.errors import visible

Rows = list[dict[str, Any]]
WIDTH = 640


def esc(text: str) -> str:
    """A string for the page: its control characters shown (``lltrace.errors.visible``: an escape as ``\\x1b``, a
    right-to-left override as ``\\u202e``) and cut at ``lltrace.errors.SHOWN_LIMIT`` characters, then its markup
    escaped. Every string lltrace did not write goes through it."""
    return html.escape(visible(str(text)))


def data(rows: Rows) -> alt.Data:
    """Rows as a chart's inline data."""
    return alt.Data(values=rows)


def melt(rows: Rows, ids: list[str], values: list[str], var: str, value: str) -> Rows:
    """Long form of ``rows`` (one row per id and value column), leaving out missing values."""
    return [
        {**{k: r.get(k) for k in ids}, var: v, value: r.get(v)} for r in rows for v in values if r.get(v) is not None
    ]


def thin(rows: Rows, limit: int = 2000) -> Rows:
    """Every k-th row so that at most about ``limit`` reach the page."""
    return rows[:: max(1, len(rows) // limit)] if len(rows) > limit else rows


def offline_page(charts: dict[str, Any], header_html: str, title: str) -> str:
    """One HTML page with each chart in its own view (no scale shared across charts), the Vega, Vega-Lite
    and vega-embed bundle inlined once (vl-convert), so the page needs no network."""
    shell = alt.Chart(data([{"x": 0}])).mark_point().encode(x="x:Q").to_html(inline=True)
    # the last </head>: the inlined bundle itself contains "<head>"/"<body>" strings
    head = shell[: shell.rindex("</head>") + len("</head>")]
    # a chart whose div the header already places (the incident's, under its sentence) is drawn there
    divs = "\n".join(
        f"<div class='chart' id='chart-{name}'></div>" for name in charts if f"id='chart-{name}'" not in header_html
    )
    # "<" as \u003c: a string in the charts' data ("</script>" in a client's id) cannot end the script early
    specs = json.dumps({f"chart-{name}": chart.to_dict() for name, chart in charts.items()}).replace("<", "\\u003c")
    style = (
        "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:1em auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        ".verdict{font-size:1.2em}.chart{margin:1.5em 0}</style>"
    )
    script = (
        "<script type='text/javascript'>\n"
        f"const specs = {specs};\n"
        "for (const [id, spec] of Object.entries(specs)) {\n"
        "  vegaEmbed('#' + id, spec, {mode: 'vega-lite', renderer: 'svg'}).catch(console.error);\n"
        "}\n</script>"
    )
    return (
        f"{head.replace('<head>', '<head><title>' + esc(title) + '</title>', 1)}<body>{style}\n"
        f"{header_html}\n{divs}\n{script}\n</body>\n</html>\n"
    )
