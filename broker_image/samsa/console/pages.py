"""The console's HTML: one function per page, from plain data to a whole document. Every value
from the cluster or the request is escaped here. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any
from urllib.parse import quote

from samsa.console.cluster import Record
from samsa.console.lag_history import Sample, chart_points
from samsa.console.values import format_timestamp, render, render_headers

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
nav{background:#283593;padding:.6em 1em}nav a{color:#fff;margin-right:1.2em;text-decoration:none}
main{padding:1em 1.5em}table{border-collapse:collapse;margin:.5em 0 1.2em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef}pre{margin:0;white-space:pre-wrap}.error{color:#b71c1c}
.ok{color:#1b5e20}form{margin:.5em 0 1.2em;padding:.6em;border:1px solid #ddd;background:#fafafa}
label{margin-right:1em}.badge{background:#ffb300;padding:0 .4em;border-radius:.3em}
.binary{color:#6a1b9a}.mode{float:right;color:#fff}
"""


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def _q(value: Any) -> str:
    return quote(str(value), safe="")


def layout(title: str, body: str, read_only: bool) -> str:
    mode = "read-only" if read_only else "read-write"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)} · Samsa</title>"
        f"<style>{STYLE}</style></head><body><nav><a href='/'>Brokers</a>"
        "<a href='/topics'>Topics</a><a href='/groups'>Consumer groups</a>"
        f"<span class='mode' id='mode'>{mode}</span></nav>"
        f"<main><h1>{_e(title)}</h1>{body}</main></body></html>"
    )


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], table_id: str = "") -> str:
    """Cells are HTML already: the callers escape what they put in."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    ident = f" id='{table_id}'" if table_id else ""
    return f"<table{ident}><tr>{head}</tr>{body}</table>"


def brokers_page(info: dict[str, Any], read_only: bool) -> str:
    rows = [
        [
            _e(b["id"]),
            _e(b["host"]),
            _e(b["port"]),
            "<span class='badge'>controller</span>" if b["controller"] else "",
        ]
        for b in info["brokers"]
    ]
    body = f"<p>Cluster id: <code>{_e(info['cluster_id'])}</code></p>" + table(
        ["Broker", "Host", "Port", "Role"], rows, "brokers"
    )
    return layout("Brokers", body, read_only)


def topics_page(topics: list[dict[str, Any]], read_only: bool) -> str:
    rows = [
        [f"<a href='/topics/{_q(t['name'])}'>{_e(t['name'])}</a>", _e(t["partitions"])]
        for t in topics
    ]
    return layout("Topics", table(["Topic", "Partitions"], rows, "topics"), read_only)


def topic_page(info: dict[str, Any], read_only: bool) -> str:
    name = info["name"]
    parts = [
        [
            f"<a href='/topics/{_q(name)}/partitions/{p['partition']}/messages'>"
            f"{p['partition']}</a>",
            _e(p["leader"]),
            _e(", ".join(map(str, p["replicas"]))),
            _e(", ".join(map(str, p["isr"]))),
            _e(p["earliest"]),
            _e(p["latest"]),
        ]
        for p in info["partitions"]
    ]
    configs = [[_e(c["name"]), _e(c["value"]), _e(c["source"])] for c in info["configs"]]
    body = (
        "<h2>Partitions</h2>"
        + table(
            ["Partition", "Leader", "Replicas", "ISR", "Earliest offset", "Latest offset"],
            parts,
            "partitions",
        )
        + ("" if read_only else produce_form(name))
        + "<h2>Configs</h2>"
        + table(["Config", "Value", "Source"], configs, "configs")
    )
    return layout(f"Topic {name}", body, read_only)


def produce_form(topic: str) -> str:
    return (
        f"<h2>Produce a record</h2><form id='produce' method='post' "
        f"action='/topics/{_q(topic)}/produce'>"
        "<label>Partition <input name='partition' size='4' placeholder='by key'></label>"
        "<label>Key <input name='key'></label><br>"
        "<label>Value<br><textarea name='value' rows='4' cols='60'></textarea></label><br>"
        "<label>Headers (name=value, one a line)<br>"
        "<textarea name='headers' rows='2' cols='60'></textarea></label><br>"
        "<button type='submit'>Produce</button></form>"
    )


def produced_page(topic: str, partition: int, offset: int, read_only: bool) -> str:
    link = f"/topics/{_q(topic)}/partitions/{partition}/messages?offset={offset}"
    body = (
        f"<p class='ok' id='produced'>Produced to {_e(topic)}-{partition} at offset {offset}.</p>"
        f"<p><a href='{link}'>See the record</a> · <a href='/topics/{_q(topic)}'>Back to the "
        "topic</a></p>"
    )
    return layout("Record produced", body, read_only)


def _value_cell(data: bytes | None) -> str:
    shown = render(data)
    return f"<pre class='{shown.kind}'>{_e(shown.text)}</pre>"


def messages_page(
    topic: str,
    partition: int,
    records: list[Record],
    offset: int,
    limit: int,
    low: int,
    high: int,
    read_only: bool,
) -> str:
    base = f"/topics/{_q(topic)}/partitions/{partition}/messages"
    rows = [
        [
            _e(r.offset),
            _e(format_timestamp(r.timestamp)),
            _value_cell(r.key),
            "<br>".join(f"{_e(n)}: {_e(v)}" for n, v in render_headers(r.headers)),
            _value_cell(r.value),
        ]
        for r in records
    ]
    nav = []
    if offset > low:
        nav.append(
            f"<a id='prev' href='{base}?offset={max(low, offset - limit)}&limit={limit}'>"
            "Previous</a>"
        )
    following = (records[-1].offset + 1) if records else offset
    if following < high:
        nav.append(f"<a id='next' href='{base}?offset={following}&limit={limit}'>Next</a>")
    body = (
        f"<p>Offsets {low} to {high} (log end). <a href='/topics/{_q(topic)}'>Topic "
        f"{_e(topic)}</a></p>"
        f"<form id='by-offset' method='get' action='{base}'><label>From offset "
        f"<input name='offset' value='{offset}' size='8'></label><label>Page size "
        f"<input name='limit' value='{limit}' size='4'></label><button>Show</button></form>"
        f"<form id='by-time' method='get' action='{base}'><label>From time (UTC, ISO-8601 or "
        "epoch ms) <input name='timestamp' size='26'></label>"
        f"<input type='hidden' name='limit' value='{limit}'><button>Show</button></form>"
        + (
            table(["Offset", "Timestamp", "Key", "Headers", "Value"], rows, "records")
            if rows
            else "<p id='no-records'>No records here.</p>"
        )
        + " · ".join(nav)
    )
    return layout(f"{topic}-{partition}", body, read_only)


def groups_page(items: list[dict[str, str]], read_only: bool) -> str:
    rows = [
        [f"<a href='/groups/{_q(g['group'])}'>{_e(g['group'])}</a>", _e(g["state"])] for g in items
    ]
    return layout("Consumer groups", table(["Group", "State"], rows, "groups"), read_only)


# Redraws the chart from /groups/<group>/lag.json as the console samples, without reloading
# the page: the same scaling as lag_history.chart_points.
CHART_SCRIPT = """
(function () {
  const svg = document.getElementById('lag-chart');
  const w = +svg.dataset.width, h = +svg.dataset.height;
  async function redraw() {
    const answer = await fetch(svg.dataset.source);
    if (!answer.ok) return;
    const samples = await answer.json();
    if (!samples.length) return;
    const top = Math.max(1, ...samples.map(s => s.total));
    const start = samples[0].at, span = samples[samples.length - 1].at - start || 1;
    svg.querySelector('polyline').setAttribute('points', samples.map(s =>
      ((s.at - start) / span * w).toFixed(1) + ',' + (h - s.total / top * h).toFixed(1)
    ).join(' '));
    svg.querySelector('.top').textContent = top;
    svg.querySelector('.span').textContent = Math.round(span) + ' s ago';
    svg.dataset.latest = samples[samples.length - 1].total;
  }
  setInterval(() => redraw().catch(() => {}), +svg.dataset.every);
})();
"""


def lag_chart(
    samples: list[Sample], source: str, every: float, width: int = 600, height: int = 160
) -> str:
    """The group's total lag over the sampled window, as an inline SVG that redraws itself
    from `source` every `every` seconds."""
    points, top = chart_points(samples, width, height)
    line = " ".join(f"{x},{y}" for x, y in points)
    seconds = round(samples[-1].at - samples[0].at) if samples else 0
    latest = samples[-1].total if samples else ""
    return (
        f"<svg id='lag-chart' width='{width + 60}' height='{height + 30}' "
        f"data-latest='{latest}' data-width='{width}' data-height='{height}' "
        f"data-source='{source}' data-every='{round(every * 1000)}'>"
        f"<g transform='translate(50,10)'><rect width='{width}' height='{height}' fill='#f5f5ff'/>"
        f"<polyline points='{line}' fill='none' stroke='#283593' stroke-width='2'/>"
        f"<text class='top' x='-6' y='8' text-anchor='end' font-size='11'>{top}</text>"
        f"<text x='-6' y='{height}' text-anchor='end' font-size='11'>0</text>"
        f"<text class='span' x='0' y='{height + 15}' font-size='11'>{seconds} s ago</text>"
        f"<text x='{width}' y='{height + 15}' text-anchor='end' font-size='11'>now</text>"
        f"</g></svg><script>{CHART_SCRIPT}</script>"
    )


def group_page(
    info: dict[str, Any],
    samples: list[Sample],
    every: float,
    topics: list[str],
    read_only: bool,
) -> str:
    group = info["group"]
    members = [
        [
            _e(m["member_id"]),
            _e(m["client_id"]),
            _e(m["host"]),
            _e(", ".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"])),
        ]
        for m in info["members"]
    ]
    offsets = [
        [
            _e(o["topic"]),
            _e(o["partition"]),
            _e(o["committed_offset"]),
            _e(o["log_end_offset"]),
            f"<span class='lag'>{_e(o['lag'])}</span>",
            _e(o["member_id"]),
        ]
        for o in info["offsets"]
    ]
    total = sum(o["lag"] or 0 for o in info["offsets"])
    body = (
        f"<p>State: <b id='state'>{_e(info['state'])}</b> · Members: {len(members)} · "
        f"Total lag: <b id='total-lag'>{total}</b></p>"
        "<h2>Members</h2>"
        + (
            table(["Member", "Client", "Host", "Assignment"], members, "members")
            if members
            else "<p>No active members.</p>"
        )
        + "<h2>Lag</h2>"
        + table(["Topic", "Partition", "Committed", "Log end", "Lag", "Member"], offsets, "lag")
        + "<h2>Lag over time</h2>"
        + lag_chart(samples, f"/groups/{_q(group)}/lag.json", every)
        + f"<p><a href='/groups/{_q(group)}/lag.json'>as JSON</a></p>"
        + ("" if read_only else reset_form(group, topics))
    )
    return layout(f"Group {group}", body, read_only)


def reset_form(group: str, topics: list[str]) -> str:
    choices = "".join(f"<option>{_e(t)}</option>" for t in topics)
    return (
        "<h2>Reset offsets</h2><p>Only for an empty group (no active members), as Kafka "
        f"requires.</p><form id='reset' method='post' action='/groups/{_q(group)}/reset'>"
        f"<label>Topic <select name='topic'>{choices}</select></label>"
        "<label>To <select name='to'><option>earliest</option><option>latest</option>"
        "<option>offset</option><option>timestamp</option></select></label>"
        "<label>Offset or time <input name='value'></label><button>Reset</button></form>"
    )


def reset_page(group: str, plan: list[Any], read_only: bool) -> str:
    rows = [[_e(r.topic), _e(r.partition), _e(r.current), _e(r.new), _e(r.note)] for r in plan]
    body = (
        f"<p class='ok' id='reset-done'>Reset {len(plan)} partition(s).</p>"
        + table(["Topic", "Partition", "Was", "Now", "Note"], rows, "plan")
        + f"<p><a href='/groups/{_q(group)}'>Back to the group</a></p>"
    )
    return layout(f"Offsets of {group} reset", body, read_only)


def error_page(status: int, message: str, read_only: bool) -> str:
    body = f"<p class='error' id='error'>{_e(message)}</p><p>HTTP status {status}.</p>"
    return layout("Error", body, read_only)
