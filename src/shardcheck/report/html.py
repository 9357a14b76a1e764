"""A self-contained HTML report (``shardcheck report run.sh -o report.html``, ``diff --format html``).

One file, nothing fetched: inline CSS, inline SVG drawn here, a few lines of inline JavaScript (hovering a
rank highlights its group) and the figures as JSON in a ``<script type="application/json">``. Per script:
the verdict and the findings with the script lines they point at; the memory of each pipeline stage class
as a stacked bar (weights, grads, optimizer, activations, logits, …) against the device's capacity, and
the rollout phase beside it; the rank grid per node with the TP, EP and PP groups coloured. A diff shows
the before and after sides next to each other, under the summary and the table of changes.

Every bar segment carries ``data-term`` and ``data-bytes``; each chart carries ``data-capacity-bytes`` and
the pixel height of the capacity (``data-capacity-px``): a segment's height is bytes / capacity ×
capacity-px (tests measure it in a real browser against ``diff --format json`` / ``memory``).

Every value in text or an attribute goes through ``escape.html`` and the JSON through ``escape.script_json``
(report/escape.py): no value closes, opens or comments out an element, the report's scripts included.
"""

from __future__ import annotations

import json

from shardcheck.report import escape
from shardcheck.report.diff_report import diff_to_dict, layout_rows, placement_rows
from shardcheck.review.diff import LABELS, LAYOUT_FIELDS, ROLLOUT_FIELDS, ScriptDiff, Side, verdict_word

TERM_COLOURS = {
    "weights": "#4e79a7",
    "grads": "#f28e2b",
    "optimizer": "#e15759",
    "gathered": "#76b7b2",
    "activations": "#59a14f",
    "logits": "#edc948",
    "ref_weights": "#b07aa1",
    "critic_state": "#ff9da7",
    "workspace": "#9c755f",
    "overhead": "#d4a6c8",
    "kv_cache": "#bab0ac",
    "reserve": "#86bcb6",
    "training_resident": "#d37295",
}
CHART_PX = 220  # the height of the device's capacity in a chart
BAR_W, GAP = 26, 10
CELL = 13
MAX_NODES_DRAWN = 32
MAX_DEVICES_DRAWN = 256
GRID_KINDS = ("tp", "ep", "pp")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d232a;background:#fff}
h1{font-size:20px;margin:0 0 12px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d8dee4}
h3{font-size:15px;margin:16px 0 6px}code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
.verdict{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:600}
.valid{background:#dafbe1;color:#116329}.bad{background:#ffebe9;color:#a40e26}.undecided{background:#fff8c5;color:#7d4e00}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:24px}.side{min-width:0}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #d8dee4;padding:2px 8px;text-align:right}
th{background:#f6f8fa}td:first-child,th:first-child{text-align:left}tr.changed td{background:#fff8c5}
.finding{border-left:4px solid #d8dee4;padding:4px 10px;margin:6px 0;background:#f6f8fa}
.finding.error{border-color:#cf222e}.finding.warning{border-color:#bf8700}.finding.info{border-color:#0969da}
.finding pre{margin:4px 0;padding:4px 6px;background:#fff;border:1px solid #d8dee4;overflow-x:auto}
.fix{color:#116329}.legend span{display:inline-block;margin-right:10px}.legend i{display:inline-block;width:10px;
height:10px;margin-right:4px;vertical-align:middle}svg text{font:10px system-ui,sans-serif;fill:#57606a}
.rank.dim{opacity:.25}mark{background:#fff8c5;display:inline-block;width:100%}
.summary{font-weight:600;margin:8px 0}.note{color:#57606a}
"""

JS = """
(function(){
  document.querySelectorAll('svg.ranks').forEach(function(svg){
    svg.addEventListener('mouseover',function(e){
      var g=e.target.getAttribute&&e.target.getAttribute('data-group');
      if(g===null||g===undefined){return;}
      svg.querySelectorAll('.rank').forEach(function(c){
        c.classList.toggle('dim',c.getAttribute('data-group')!==g);});
    });
    svg.addEventListener('mouseleave',function(){
      svg.querySelectorAll('.rank').forEach(function(c){c.classList.remove('dim');});});
  });
})();
"""


def _verdict_badge(word: str) -> str:
    cls = {"valid": "valid", "will not start": "bad", "unusable input": "bad"}.get(word, "undecided")
    return f'<span class="verdict {cls}">{escape.html(word)}</span>'


def _finding_html(f, context: dict) -> str:
    where = f.origin.first_script_line() if getattr(f, "origin", None) else None
    loc = f"{f.path}:{f.line}" if f.path and f.line else (f.path or "")
    parts = [
        (
            f'<div class="finding {escape.html(f.severity)}"><b>{escape.html(f.rule)}</b> {escape.html(f.severity)} '
            f"<code>{escape.html(loc)}</code><div>{escape.html(f.message)}</div>"
        )
    ]
    lines = context.get((f.path, f.line))
    if lines:
        parts.append(
            "<pre>"
            + "\n".join(
                (f"<mark>{n:>5} | {escape.html(text)}</mark>" if n == f.line else f"{n:>5} | {escape.html(text)}")
                for n, text in lines
            )
            + "</pre>"
        )
    elif where is not None and where.text:
        parts.append(f"<pre>{where.line:>5} | {escape.html(where.text)}</pre>")
    if f.fix:
        parts.append(f'<div class="fix">fix: {escape.html(f.fix)}</div>')
    parts.append("</div>")
    return "".join(parts)


def _legend(terms: list[str]) -> str:
    return (
        '<div class="legend">'
        + "".join(
            f'<span><i style="background:{TERM_COLOURS.get(t, "#999")}"></i>{escape.html(t.replace("_", " "))}</span>'
            for t in terms
        )
        + "</div>"
    )


def memory_svg(memory: dict | None, side_id: str) -> str:
    """Stacked bars: one per training stage class, then the rollout, against the device's capacity."""
    if not memory or (not memory["stages"] and not memory["rollout"]):
        return (
            '<p class="note">no memory estimate'
            + (f": {escape.html('; '.join(memory['problems']))}" if memory and memory.get("problems") else "")
            + "</p>"
        )
    cap = memory["capacity_bytes"]
    bars = [(f"stage {s['label']}", s["bytes"], s["total_bytes"], "train") for s in memory["stages"]]
    if memory["rollout"]:
        ro = memory["rollout"]
        bars.append((f"rollout {ro['engine']}", ro["bytes"], ro["total_bytes"], "rollout"))
    top = max([cap, *(b[2] for b in bars)])
    scale = CHART_PX / cap  # px per byte
    plot_h = int(top * scale) + 4
    left, bottom = 44, 70
    width = left + len(bars) * (BAR_W + GAP) + GAP + 10
    height = plot_h + bottom + 8
    base = plot_h + 8
    out = [
        (
            f'<svg class="memory" id="mem-{side_id}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" data-capacity-bytes="{cap}" data-capacity-px="{CHART_PX}" '
            f'data-base-y="{base}" xmlns="http://www.w3.org/2000/svg">'
        )
    ]
    cap_y = base - CHART_PX
    out.append(
        f'<line class="capacity" x1="{left}" x2="{width - 4}" y1="{cap_y}" y2="{cap_y}" stroke="#cf222e" '
        f'stroke-dasharray="4 3"/><text x="2" y="{cap_y + 3}">{cap / (1 << 30):.0f} GiB</text>'
    )
    out.append(f'<line x1="{left}" x2="{width - 4}" y1="{base}" y2="{base}" stroke="#57606a"/>')
    used_terms: list[str] = []
    for k, (label, terms, total, phase) in enumerate(bars):
        x = left + GAP + k * (BAR_W + GAP)
        y = float(base)
        out.append(f'<g class="bar" data-label="{escape.html(label)}" data-phase="{phase}" data-total-bytes="{total}">')
        for term, nbytes in terms.items():
            if not nbytes or nbytes <= 0:
                continue
            if term not in used_terms:
                used_terms.append(term)
            h = nbytes * scale
            y -= h
            out.append(
                f'<rect class="seg" data-term="{term}" data-bytes="{nbytes}" x="{x}" y="{y:.3f}" '
                f'width="{BAR_W}" height="{h:.3f}" fill="{TERM_COLOURS.get(term, "#999")}">'
                f"<title>{escape.html(label)}: {escape.html(term)} {nbytes / (1 << 30):.2f} GiB</title></rect>"
            )
        out.append(f'<text x="{x + BAR_W / 2}" y="{y - 3:.1f}" text-anchor="middle">{100 * total / cap:.0f}%</text>')
        out.append(
            f'<text transform="translate({x + BAR_W / 2},{base + 8}) rotate(50)">{escape.html(label)}</text></g>'
        )
    out.append("</svg>")
    return _legend(used_terms) + "".join(out)


def _group_index(groups: list[list[int]]) -> dict[int, tuple[int, int]]:
    """rank -> (group number, position in its group)."""
    return {r: (i, j) for i, g in enumerate(groups) for j, r in enumerate(g)}


def _colour(i: int) -> str:
    return f"hsl({(i * 137.508) % 360:.1f},62%,{58 + (i % 3) * 8}%)"


def ranks_svg(side: Side, side_id: str) -> str:
    """The rank grid, a row per node, coloured by TP, EP and PP group."""
    job = side.result.job if side.result is not None else None
    if job is None:
        return ""
    from shardcheck.api import mesh_grid
    from shardcheck.mesh.grid import LIST_LIMIT

    _, grid, _ = mesh_grid(job)
    per_node = job.cluster.devices_per_node
    if grid is None or not per_node.known or not per_node.value:
        return '<p class="note">no rank map (the layout is invalid or not known)</p>'
    n = per_node.value
    nodes = -(-grid.world // n)
    if not grid.listable or n > MAX_DEVICES_DRAWN:  # listing the groups of a huge world takes unbounded time
        return (
            f'<p class="note">{grid.world} ranks on {nodes} nodes × {n}: too many to draw (at most '
            f"{LIST_LIMIT} ranks, {MAX_DEVICES_DRAWN} a node)</p>"
        )
    shown_nodes = min(nodes, MAX_NODES_DRAWN)
    out = []
    for kind in GRID_KINDS:
        groups = grid.groups(kind)
        index = _group_index(groups)
        size = len(groups[0]) if groups else 1
        w, h = 60 + n * CELL, 14 + shown_nodes * CELL
        out.append(
            f"<div><b>{LABELS.get(kind, kind.upper())} {size}</b> ({len(groups)} groups)"
            f'<br><svg class="ranks" id="ranks-{side_id}-{kind}" data-kind="{kind}" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">'
        )
        for node in range(shown_nodes):
            y = 12 + node * CELL
            out.append(f'<text x="0" y="{y + 10}">node {node}</text>')
            for slot in range(n):
                r = node * n + slot
                if r >= grid.world:
                    break
                g, pos = index[r]
                fill = _colour(pos if kind == "pp" else g)
                out.append(
                    f'<rect class="rank" data-rank="{r}" data-group="{g}" x="{60 + slot * CELL}" y="{y}" '
                    f'width="{CELL - 1}" height="{CELL - 1}" fill="{fill}"><title>rank {r}: {kind.upper()} '
                    f"group {g}{', stage ' + str(pos) if kind == 'pp' else ''}</title></rect>"
                )
        out.append("</svg></div>")
    more = f'<p class="note">… {nodes - shown_nodes} more nodes not drawn</p>' if nodes > shown_nodes else ""
    crossing = []
    for kind, g in ((side.placement or {}).get("groups") or {}).items():
        if g["crossing"]:
            crossing.append(f"{g['crossing']} of {g['groups']} {LABELS.get(kind, kind.upper())} groups cross nodes")
    note = "; ".join(crossing) if crossing else "every TP, EP, ETP and TP·CP group stays inside a node"
    return (
        f'<p class="note">{grid.world} ranks on {nodes} nodes × {n}; PP coloured by stage; {escape.html(note)}</p>'
        + "".join(out)
        + more
    )


def _layout_table(side: Side) -> str:
    rows = []
    for role, lay in side.layouts.items():
        for name in LAYOUT_FIELDS:
            v = lay.get(name)
            if v is None:
                continue
            text = ", ".join(map(str, v)) if isinstance(v, list) else str(v)
            rows.append(
                f"<tr><td>{escape.html(role)} {escape.html(LABELS.get(name, name))}</td>"
                f"<td>{escape.html(text)}</td></tr>"
            )
    for name in ROLLOUT_FIELDS:
        v = (side.rollout or {}).get(name)
        if v is not None:
            rows.append(
                f"<tr><td>rollout {escape.html(LABELS.get(name, name))}</td><td>{escape.html(str(v))}</td></tr>"
            )
    return "<table>" + "".join(rows) + "</table>" if rows else ""


def _side_html(side: Side, side_id: str, heading: str) -> str:
    r = side.result
    out = [f'<div class="side" id="side-{side_id}"><h3>{escape.html(heading)}</h3>']
    word = verdict_word(r)
    out.append(f"<p>{_verdict_badge(word)}</p>")
    if r is None:
        return "".join(out) + "<p class='note'>the file does not exist on this side</p></div>"
    if r.error is not None:
        return "".join(out) + f"<p>{escape.html(r.error)}</p></div>"
    job = r.job
    if job is not None:
        model = job.model.name if job.model else f"model not found: {job.model_problem}"
        out.append(
            f'<p class="note">{escape.html(job.framework)} {escape.html(job.framework_version)}; '
            f"{escape.html(model)}</p>"
        )
    out.append(f"<h3>findings ({len(r.findings)})</h3>")
    out.extend(_finding_html(f, side.context) for f in r.findings)
    if not r.findings:
        out.append('<p class="note">none</p>')
    out.append("<h3>layout</h3>" + _layout_table(side))
    m = side.memory
    if m:
        out.append(
            f"<h3>memory per device ({escape.html(m['device'])}, {m['capacity_bytes'] / (1 << 30):.0f} GiB)</h3>"
        )
        if m.get("device_note"):
            out.append(f'<p class="note">{escape.html(m["device_note"])}</p>')
    out.append(memory_svg(m, side_id))
    out.append("<h3>ranks</h3>" + ranks_svg(side, side_id))
    out.append("</div>")
    return "".join(out)


def _page(title: str, body: str, data: dict) -> str:
    blob = escape.script_json(json.dumps(data, ensure_ascii=False))
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape.html(title)}</title>'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head><body>'
        f'{body}<script type="application/json" id="shardcheck-data">{blob}</script><script>{JS}</script>'
        f"</body></html>\n"
    )


def render_check_html(sides: list[Side]) -> str:
    """``shardcheck report``: one section per script."""
    from shardcheck.report.json_report import result_to_dict

    body = ["<h1>shardcheck report</h1>"]
    data = {"version": 1, "results": []}
    for k, side in enumerate(sides):
        body.append(f"<h2>{escape.html(side.result.path)}</h2>")
        body.append(_side_html(side, f"s{k}", "verdict"))
        doc = result_to_dict(side.result)
        doc["memory"] = side.memory
        doc["placement"] = side.placement
        data["results"].append(doc)
    return _page("shardcheck report", "".join(body), data)


def render_diff_html(diffs: list[ScriptDiff]) -> str:
    """``shardcheck diff --format html``: per script the summary, the changes, both sides next to each other."""
    body = ["<h1>shardcheck diff</h1>"]
    shown = [d for d in diffs if not d.skipped]
    if not shown:
        body.append("<p>No launch scripts changed.</p>")
    for k, d in enumerate(shown):
        body.append(f"<h2>{escape.html(d.path)}</h2><p class='summary'>{escape.html(d.summary)}</p>")
        rows = layout_rows(d) + placement_rows(d)
        body.append(
            "<table><tr><th></th><th>before</th><th>after</th></tr>"
            + "".join(
                f'<tr class="{"changed" if changed else ""}"><td>{escape.html(label)}</td><td>{escape.html(vb)}</td>'
                f"<td>{escape.html(va)}</td></tr>"
                for label, vb, va, changed in rows
            )
            + "</table>"
        )
        body.append(f"<p>findings: {len(d.new)} new, {len(d.resolved)} resolved, {len(d.kept)} kept</p>")
        body.append(
            '<div class="sides">'
            + _side_html(d.before, f"d{k}b", f"before: {d.before.label}")
            + _side_html(d.after, f"d{k}a", f"after: {d.after.label}")
            + "</div>"
        )
    data = {"version": 1, "diffs": [diff_to_dict(d) for d in diffs]}
    return _page("shardcheck diff", "".join(body), data)
