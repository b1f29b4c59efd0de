"""Charts drawn on the server as inline SVG: no JavaScript, no build step.
Colours come from the admin's CSS variables (and the chart classes in
``lanes.css``), so the light and the dark theme both apply. Every label is
escaped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 640, 180, 56, 22, 10


@dataclass(frozen=True, slots=True)
class Line:
    """One series of a line chart: its name, CSS class and values (``None``: no point)."""

    name: str
    css: str
    values: Sequence[float | None]


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    step = 10 ** (len(str(int(value))) - 1)
    return float(((int(value) // step) + 1) * step)


def line_chart(title: str, lines: Sequence[Line], labels: Sequence[str], unit: str) -> SafeString:
    """A line chart of ``lines`` over the x labels ``labels`` (first, middle and
    last are printed), its y axis from 0 to a round maximum in ``unit``."""
    points = [v for line in lines for v in line.values if v is not None]
    top = _nice_max(max(points, default=0.0))
    n = max(len(labels), 2)
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP

    def x(i: int) -> float:
        return LEFT + plot_w * i / (n - 1)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    parts = [
        format_html(
            '<line class="emq-axis" x1="{}" y1="{}" x2="{}" y2="{}"/>',
            LEFT,
            f"{y(0):.1f}",
            WIDTH - 8,
            f"{y(0):.1f}",
        ),
        format_html(
            '<text class="emq-tick" x="{}" y="{}" text-anchor="end">{} {}</text>',
            LEFT - 4,
            TOP + 8,
            f"{top:g}",
            unit,
        ),
        format_html(
            '<text class="emq-tick" x="{}" y="{}" text-anchor="end">0</text>',
            LEFT - 4,
            f"{y(0):.1f}",
        ),
    ]
    for i in sorted({0, (n - 1) // 2, n - 1}):
        if i < len(labels):
            parts.append(
                format_html(
                    '<text class="emq-tick" x="{}" y="{}" text-anchor="{}">{}</text>',
                    f"{x(i):.1f}",
                    HEIGHT - 6,
                    "start" if i == 0 else "end" if i == n - 1 else "middle",
                    labels[i],
                )
            )
    for line in lines:
        coords = " ".join(
            f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(line.values) if v is not None
        )
        if coords:
            parts.append(
                format_html(
                    '<polyline class="emq-line {}" points="{}"><title>{}</title></polyline>',
                    line.css,
                    coords,
                    line.name,
                )
            )
        for i, v in enumerate(line.values):
            if v is not None and v > 0:
                parts.append(
                    format_html(
                        '<circle class="emq-dot {}" cx="{}" cy="{}" r="2">'
                        "<title>{}: {} {}</title></circle>",
                        line.css,
                        f"{x(i):.1f}",
                        f"{y(v):.1f}",
                        line.name,
                        f"{v:g}",
                        unit,
                    )
                )
    legend = mark_safe(
        "".join(
            str(format_html('<span class="emq-key {}">{}</span>', line.css, line.name))
            for line in lines
        )
    )
    return format_html(
        '<figure class="emq-chart"><figcaption>{} {}</figcaption>'
        '<svg role="img" aria-label="{}" viewBox="0 0 {} {}" width="{}" height="{}">'
        "{}</svg></figure>",
        title,
        legend,
        title,
        WIDTH,
        HEIGHT,
        WIDTH,
        HEIGHT,
        mark_safe("".join(str(p) for p in parts)),
    )


def bar_chart(
    title: str, bars: Sequence[tuple[str, float | None]], marker: float | None, unit: str
) -> SafeString:
    """Horizontal bars, one per ``(label, value)``, and a vertical ``marker``
    line (the queue's figure, to compare each bar with)."""
    row_h = 16
    height = TOP + row_h * max(len(bars), 1) + BOTTOM
    label_w = 130
    plot_w = WIDTH - label_w - 60
    top = _nice_max(max([v for _, v in bars if v is not None] + [marker or 0.0], default=0.0))
    parts = []
    for i, (label, value) in enumerate(bars):
        y = TOP + i * row_h
        parts.append(
            format_html(
                '<text class="emq-tick" x="{}" y="{}" text-anchor="end">{}</text>',
                label_w - 4,
                y + 11,
                label,
            )
        )
        if value is not None:
            w = plot_w * value / top
            parts.append(
                format_html(
                    '<rect class="emq-barfill" x="{}" y="{}" width="{}" height="{}">'
                    "<title>{}: {} {}</title></rect>",
                    label_w,
                    y + 2,
                    f"{w:.1f}",
                    row_h - 4,
                    label,
                    f"{value:g}",
                    unit,
                )
            )
            parts.append(
                format_html(
                    '<text class="emq-tick" x="{}" y="{}">{} {}</text>',
                    f"{label_w + w + 4:.1f}",
                    y + 11,
                    f"{value:g}",
                    unit,
                )
            )
    if marker is not None:
        mx = label_w + plot_w * marker / top
        parts.append(
            format_html(
                '<line class="emq-marker" x1="{}" y1="{}" x2="{}" y2="{}"><title>{}</title></line>',
                f"{mx:.1f}",
                TOP,
                f"{mx:.1f}",
                height - BOTTOM,
                f"{marker:g} {unit}",
            )
        )
    return format_html(
        '<figure class="emq-chart"><figcaption>{}</figcaption>'
        '<svg role="img" aria-label="{}" viewBox="0 0 {} {}" width="{}" height="{}">'
        "{}</svg></figure>",
        title,
        title,
        WIDTH,
        height,
        WIDTH,
        height,
        mark_safe("".join(str(p) for p in parts)),
    )


__all__ = ["Line", "bar_chart", "escape", "line_chart"]
