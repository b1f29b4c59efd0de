"""The admin's charts as SVG (django_emq/admin/svg.py): gaps where nothing was
measured, labels where nothing clips them, widths that follow the container."""

from __future__ import annotations

import re
from xml.etree import ElementTree

from django_emq.admin.svg import Line, bar_chart, line_chart, runs

NS = {"svg": "http://www.w3.org/2000/svg"}
LABELS = [f"10:{m:02d}" for m in range(8)]


def parse(html: str) -> ElementTree.Element:
    """The chart's outer ``<svg>`` as XML (the SVG is well-formed)."""
    svg = html[html.index("<svg") : html.rindex("</svg>") + len("</svg>")]
    return ElementTree.fromstring(
        svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    )


def paths(html: str) -> list[str]:
    return [p.get("d", "") for p in parse(html).iter("{http://www.w3.org/2000/svg}path")]


def test_runs_split_at_every_gap() -> None:
    assert list(runs([1.0, None, 2.0, 3.0, None, None, 4.0])) == [
        [(0, 1.0)],
        [(2, 2.0), (3, 3.0)],
        [(6, 4.0)],
    ]
    assert list(runs([None, None])) == []


def test_idle_minutes_are_gaps_not_lines_across() -> None:
    """Waits measured at minutes 0-2 and 5-7, none at 3-4: two separate
    segments (two moves), no segment spanning the idle minutes."""
    values: list[float | None] = [1.0, 2.0, 1.5, None, None, 3.0, 2.0, 1.0]
    html = line_chart("Wait", [Line("p95", "emq-s3", values)], LABELS, "s")
    (d,) = paths(html)
    segments = re.findall(r"M[^M]+", d)
    assert len(segments) == 2
    assert [len(re.findall(r"[\d.]+,[\d.]+", s)) for s in segments] == [3, 3]


def test_a_lone_point_between_gaps_gets_a_dot() -> None:
    values: list[float | None] = [None, None, 0.0, None, None, None, None, None]
    html = line_chart("Wait", [Line("p50", "emq-s1", values)], LABELS, "s")
    dots = list(parse(html).iter("{http://www.w3.org/2000/svg}circle"))
    assert len(dots) == 1
    assert "10:02 p50: 0 s" in "".join(dots[0].itertext())


def test_a_series_with_no_values_draws_no_line() -> None:
    html = line_chart("Wait", [Line("p50", "emq-s1", [None] * 8)], LABELS, "s")
    assert paths(html) == []
    assert "1 s" in html, "an empty chart still has its axis"


def test_the_y_label_starts_at_the_left_edge_so_nothing_clips_it() -> None:
    """The maximum and its unit sit above the plot from x=0, left-aligned: a
    long one ("10000 jobs") is never cut at the chart's left edge."""
    html = line_chart("Jobs", [Line("enqueued", "emq-s1", [9000.0] * 8)], LABELS, "jobs")
    (ymax,) = [
        t
        for t in parse(html).iter("{http://www.w3.org/2000/svg}text")
        if t.get("class") == "emq-tick emq-ymax"
    ]
    assert ymax.text == "10000 jobs"
    assert ymax.get("x") == "0"
    assert ymax.get("text-anchor") in (None, "start")
    assert float(ymax.get("y", "0")) > 0


def test_charts_take_the_width_of_their_container() -> None:
    """No fixed pixel width: the chart is 100 % wide, positions across are
    percentages, the lines live in a viewBox stretched to the plot."""
    line = parse(line_chart("Jobs", [Line("a", "emq-s1", [1.0, 2.0] * 4)], LABELS, "jobs"))
    assert line.get("width") == "100%"
    assert "viewBox" not in line.attrib
    (plot,) = [e for e in line if e.get("class") == "emq-plot"]
    assert plot.get("viewBox") == "0 0 1000 136"
    assert plot.get("preserveAspectRatio") == "none"
    for element in line.iter():
        for attribute in ("x", "x1", "x2", "cx"):
            value = element.get(attribute)
            if value is not None and element is not plot:
                assert value == "0" or value.endswith("%"), (element.tag, attribute, value)
    bars = parse(bar_chart("Waits", [("USR1", 2.0), ("USR2", None), ("USR3", 9.0)], 4.0, "s"))
    assert bars.get("width") == "100%"
    widths = [
        float(r.get("width", "").rstrip("%")) for r in bars.iter("{http://www.w3.org/2000/svg}rect")
    ]
    assert widths == [12.8, 57.6], "2 s and 9 s of a 10 s scale, on 64 % of the width"
    (marker,) = bars.iter("{http://www.w3.org/2000/svg}line")
    assert marker.get("x1") == "47.60%", "4 s: 22 % of labels, then 4/10 of 64 %"


def test_labels_are_escaped() -> None:
    html = line_chart("<b>", [Line("<i>", "emq-s1", [1.0] * 8)], ["<u>"] * 8, "<s>")
    assert "<b>" not in html
    assert "<i>" not in html
    assert "<u>" not in html
    html = bar_chart("<b>", [("<i>", 1.0)], None, "<s>")
    assert "<b>" not in html
    assert "<i>" not in html


def test_a_bar_chart_of_no_lanes_says_so_instead_of_a_lone_marker() -> None:
    html = bar_chart("Waits", [], 3.0, "s", empty="No lane has pending jobs now.")
    assert "<svg" not in html
    assert '<p class="emq-empty">No lane has pending jobs now.</p>' in html


def test_the_axis_tops_are_round_for_small_and_large_values() -> None:
    tops = []
    for value in (0.0, 0.091, 0.1, 0.3, 0.7, 1.0, 9.0, 20.0, 9000.0):
        html = line_chart("x", [Line("a", "emq-s1", [value] * 2)], LABELS[:2], "s")
        tops.append(parse(html).find("svg:text", NS).text)  # type: ignore[union-attr]
    assert tops == ["1 s", "0.1 s", "0.2 s", "0.5 s", "1 s", "2 s", "10 s", "30 s", "10000 s"]
