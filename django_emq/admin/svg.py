"""Charts drawn on the server as inline SVG: no JavaScript, no build step.
Colours come from the admin's CSS variables (and the chart classes in
``lanes.css``), so the light and the dark theme both apply. Every label is
escaped.

Every chart takes its container's width: positions across are percentages of
the chart's width, and the lines are drawn in a nested ``viewBox`` stretched
to the plot (their strokes keep their width, ``vector-effect``), so text and
dots keep their size at any width. Heights are fixed, in pixels. A value of
``None`` (an interval with nothing to measure) is a gap: the line stops
before it and starts again after it."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

#: Line charts: total height, the plot's top (under the y label) and its
#: height, in pixels; the plot's left and right edges, in % of the width.
HEIGHT, TOP, PLOT_H = 180, 20, 136
LEFT_PC, RIGHT_PC = 1.0, 99.0
#: Units across the nested viewBox the lines are drawn in.
SPAN = 1000
#: Bar charts: a row's height and the top margin, in pixels; where the bars
#: start and how much of the width they may take, in %.
ROW_H, BAR_TOP = 16, 6
BAR_LEFT_PC, BAR_SPAN_PC = 22.0, 64.0


@dataclass(frozen=True, slots=True)
class Line:
    """One series of a line chart: its name, CSS class and values (``None``: no point)."""

    name: str
    css: str
    values: Sequence[float | None]


def _nice_max(value: float) -> float:
    """A round top for the axis above ``value``: 9000 -> 10000, 0.091 -> 0.1."""
    if value <= 0:
        return 1.0
    if value < 1:  # a fraction: the next of 1, 2, 5 times a power of ten
        scale = 10.0 ** math.floor(math.log10(value))
        return next(m * scale for m in (1, 2, 5, 10) if m * scale > value + 1e-12)
    step = 10 ** (len(str(int(value))) - 1)
    return float(((int(value) // step) + 1) * step)


def _pc(value: float) -> str:
    return f"{value:.2f}%"


def runs(values: Sequence[float | None]) -> Iterator[list[tuple[int, float]]]:
    """The unbroken runs of ``values``: each a list of ``(index, value)``, a
    ``None`` ending one."""
    run: list[tuple[int, float]] = []
    for i, v in enumerate(values):
        if v is None:
            if run:
                yield run
            run = []
        else:
            run.append((i, v))
    if run:
        yield run


def line_chart(title: str, lines: Sequence[Line], labels: Sequence[str], unit: str) -> SafeString:
    """A line chart of ``lines`` over the x labels ``labels`` (first, middle and
    last are printed), its y axis from 0 to a round maximum in ``unit`` (the
    maximum and the unit printed above the plot, where nothing clips them)."""
    points = [v for line in lines for v in line.values if v is not None]
    top = _nice_max(max(points, default=0.0))
    n = max(len(labels), 2)
    bottom = TOP + PLOT_H

    def x_units(i: int) -> float:  # across the nested viewBox
        return SPAN * i / (n - 1)

    def x_pc(i: int) -> float:  # across the whole chart
        return LEFT_PC + (RIGHT_PC - LEFT_PC) * i / (n - 1)

    def y(v: float) -> float:
        return PLOT_H * (1 - v / top)

    parts = [
        format_html(
            '<text class="emq-tick emq-ymax" x="0" y="{}">{} {}</text>', TOP - 6, f"{top:g}", unit
        ),
        format_html(
            '<line class="emq-grid" x1="{}" y1="{}" x2="{}" y2="{}"/>',
            _pc(LEFT_PC),
            TOP,
            _pc(RIGHT_PC),
            TOP,
        ),
        format_html(
            '<line class="emq-axis" x1="{}" y1="{}" x2="{}" y2="{}"/>',
            _pc(LEFT_PC),
            bottom,
            _pc(RIGHT_PC),
            bottom,
        ),
    ]
    for i in sorted({0, (n - 1) // 2, n - 1}):
        if i < len(labels):
            parts.append(
                format_html(
                    '<text class="emq-tick" x="{}" y="{}" text-anchor="{}">{}</text>',
                    _pc(x_pc(i)),
                    HEIGHT - 6,
                    "start" if i == 0 else "end" if i == n - 1 else "middle",
                    labels[i],
                )
            )
    paths = []
    for line in lines:
        segments = [
            "M" + " L".join(f"{x_units(i):.1f},{y(v):.1f}" for i, v in run)
            for run in runs(line.values)
        ]
        if segments:
            paths.append(
                format_html(
                    '<path class="emq-line {}" d="{}"><title>{}</title></path>',
                    line.css,
                    " ".join(segments),
                    line.name,
                )
            )
        for run in runs(line.values):
            for i, v in run:
                if v > 0 or len(run) == 1:  # a lone point has no line to show it
                    parts.append(
                        format_html(
                            '<circle class="emq-dot {}" cx="{}" cy="{}" r="2.5">'
                            "<title>{} {}: {} {}</title></circle>",
                            line.css,
                            _pc(x_pc(i)),
                            f"{TOP + y(v):.1f}",
                            labels[i] if i < len(labels) else "",
                            line.name,
                            f"{v:g}",
                            unit,
                        )
                    )
    plot = format_html(
        '<svg class="emq-plot" x="{}" y="{}" width="{}" height="{}" viewBox="0 0 {} {}" '
        'preserveAspectRatio="none" overflow="visible">{}</svg>',
        _pc(LEFT_PC),
        TOP,
        _pc(RIGHT_PC - LEFT_PC),
        PLOT_H,
        SPAN,
        PLOT_H,
        mark_safe("".join(str(p) for p in paths)),
    )
    legend = mark_safe(
        "".join(
            str(format_html('<span class="emq-key {}">{}</span>', line.css, line.name))
            for line in lines
        )
    )
    return format_html(
        '<figure class="emq-chart"><figcaption>{} {}</figcaption>'
        '<svg role="img" aria-label="{}" width="100%" height="{}">{}{}</svg></figure>',
        title,
        legend,
        title,
        HEIGHT,
        plot,
        mark_safe("".join(str(p) for p in parts)),
    )


def bar_chart(
    title: str,
    bars: Sequence[tuple[str, float | None]],
    marker: float | None,
    unit: str,
    empty: str = "",
) -> SafeString:
    """Horizontal bars, one per ``(label, value)``, and a vertical ``marker``
    line (the queue's figure, to compare each bar with). Labels take the
    left part of the width, bars the middle, values follow their bar. With no
    bars, the words ``empty`` instead of a chart."""
    if not bars:
        return format_html(
            '<figure class="emq-chart"><figcaption>{}</figcaption><p class="emq-empty">{}</p>'
            "</figure>",
            title,
            empty,
        )
    height = BAR_TOP + ROW_H * max(len(bars), 1) + BAR_TOP
    top = _nice_max(max([v for _, v in bars if v is not None] + [marker or 0.0], default=0.0))

    def x_pc(value: float) -> float:
        return BAR_LEFT_PC + BAR_SPAN_PC * value / top

    parts = []
    for i, (label, value) in enumerate(bars):
        y = BAR_TOP + i * ROW_H
        parts.append(
            format_html(
                '<text class="emq-tick" x="{}" dx="-4" y="{}" text-anchor="end">{}</text>',
                _pc(BAR_LEFT_PC),
                y + 11,
                label,
            )
        )
        if value is not None:
            parts.append(
                format_html(
                    '<rect class="emq-barfill" x="{}" y="{}" width="{}" height="{}">'
                    "<title>{}: {} {}</title></rect>",
                    _pc(BAR_LEFT_PC),
                    y + 2,
                    _pc(x_pc(value) - BAR_LEFT_PC),
                    ROW_H - 4,
                    label,
                    f"{value:g}",
                    unit,
                )
            )
            parts.append(
                format_html(
                    '<text class="emq-tick" x="{}" dx="4" y="{}">{} {}</text>',
                    _pc(x_pc(value)),
                    y + 11,
                    f"{value:g}",
                    unit,
                )
            )
    if marker is not None:
        parts.append(
            format_html(
                '<line class="emq-marker" x1="{}" y1="{}" x2="{}" y2="{}"><title>{}</title></line>',
                _pc(x_pc(marker)),
                BAR_TOP,
                _pc(x_pc(marker)),
                height - BAR_TOP,
                f"{marker:g} {unit}",
            )
        )
    return format_html(
        '<figure class="emq-chart"><figcaption>{}</figcaption>'
        '<svg role="img" aria-label="{}" width="100%" height="{}">{}</svg></figure>',
        title,
        title,
        height,
        mark_safe("".join(str(p) for p in parts)),
    )


__all__ = ["Line", "bar_chart", "escape", "line_chart", "runs"]
