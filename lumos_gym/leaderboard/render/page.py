"""What every HTML page of the leaderboard shares: its styles, scripts and escaping.

The leaderboard page (:mod:`~lumos_gym.leaderboard.render.html`), its trajectory pages
(:mod:`~lumos_gym.leaderboard.render.trajectories`) and the pages of ``lumos-gym view``
(:mod:`lumos_gym.leaderboard.viewer`) are each one self-contained file: :func:`_page` wraps a
body with the styles and a script. :func:`markdown_section_html` turns a section written as
Markdown lines into HTML.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#1b1f24;
background:#fff}
h1{font-size:1.5em;margin:0 0 .3em}h2{font-size:1.2em;margin-top:1.6em}
p.note{color:#444;max-width:70em;font-size:.9em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #c9d1d9;padding:.3em .55em;text-align:left;vertical-align:top}
th{background:#1f3b5b;color:#fff;cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
tbody tr:nth-child(even){background:#f3f6f9}
td.num{text-align:right;white-space:nowrap}td.name{white-space:nowrap}
.wrap{overflow-x:auto}
.ci{color:#57606a;font-size:.85em}
tr.reported td{font-style:italic}tr.ceiling td{color:#555;background:#f4f4f4}
input,select{font-size:1em;padding:.25em .4em;margin-right:.6em}
.episode{border:1px solid #c9d1d9;border-radius:6px;padding:.5em .8em;margin:.7em 0}
.episode h3{font-size:1em;margin:.1em 0 .4em}
.status{display:inline-block;padding:0 .45em;border-radius:4px;background:#ddf4ff;font-size:.85em}
.status-completed{background:#dafbe1}
.turn{margin:.25em 0 .25em 1em}.label{font-weight:600;color:#1f3b5b}
pre{white-space:pre-wrap;word-break:break-word;margin:.15em 0;font-size:.88em;background:#f6f8fa;
padding:.25em .4em;border-radius:4px}
img.shot{max-width:420px;border:1px solid #c9d1d9}
"""


#: The functions every page script uses: ``hashParams()``, the address's ``#key=value&...``
#: parameters as an object; ``showItems(items, keep, q, count, noun)``, which hides the items
#: that ``keep`` refuses or whose text lacks ``q`` and writes "N of M <noun>" into ``count``.
_PAGE_JS = """
function hashParams() {
  "use strict";
  var params = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (part) {
    var kv = part.split("=");
    if (kv[0]) { params[decodeURIComponent(kv[0])] = decodeURIComponent(kv.slice(1).join("=")); }
  });
  return params;
}
function showItems(items, keep, q, count, noun) {
  "use strict";
  var shown = 0;
  items.forEach(function (el) {
    var hide = !keep(el) || (q !== "" && el.textContent.toLowerCase().indexOf(q) < 0);
    el.hidden = hide;
    if (!hide) { shown += 1; }
  });
  count.textContent = shown + " of " + items.length + " " + noun;
}
"""


_BOARD_JS = _PAGE_JS + """
(function () {
  "use strict";
  function value(row, col) {
    var cell = row.cells[col];
    if (!cell) { return null; }
    var v = cell.getAttribute("data-value");
    return v === null ? cell.textContent.trim() : v;
  }
  function sortTable(table, col, dir) {
    var body = table.tBodies[0];
    var heads = table.tHead.rows[0].cells;
    var numeric = heads[col].getAttribute("data-type") === "num";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a, col), y = value(b, col);
      if (numeric) {
        x = (x === null || x === "") ? NaN : parseFloat(x);
        y = (y === null || y === "") ? NaN : parseFloat(y);
        if (isNaN(x) && isNaN(y)) { return 0; }
        if (isNaN(x)) { return 1; }
        if (isNaN(y)) { return -1; }
        return dir === "asc" ? x - y : y - x;
      }
      x = String(x).toLowerCase(); y = String(y).toLowerCase();
      return dir === "asc" ? x.localeCompare(y) : y.localeCompare(x);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (var i = 0; i < heads.length; i++) {
      var state = dir === "asc" ? "ascending" : "descending";
      heads[i].setAttribute("aria-sort", i === col ? state : "none");
    }
    table.setAttribute("data-sorted-by", col + ":" + dir);
  }
  var tables = Array.prototype.slice.call(document.querySelectorAll("table.sortable"));
  tables.forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var now = table.getAttribute("data-sorted-by") || "";
        var numeric = th.getAttribute("data-type") === "num";
        var dir = numeric ? "desc" : "asc";
        if (now === col + ":desc") { dir = "asc"; } else if (now === col + ":asc") { dir = "desc"; }
        sortTable(table, col, dir);
      });
    });
  });
  var filter = document.getElementById("filter");
  var count = document.getElementById("shown");
  function applyFilter() {
    var rows = [];
    tables.forEach(function (table) {
      rows = rows.concat(Array.prototype.slice.call(table.tBodies[0].rows));
    });
    showItems(rows, function () { return true; }, filter.value.trim().toLowerCase(), count,
              "rows");
  }
  filter.addEventListener("input", applyFilter);
  var params = hashParams();
  if (params.sort !== undefined && tables.length) {
    var col = parseInt(params.sort, 10);
    if (!isNaN(col) && col >= 0 && col < tables[0].tHead.rows[0].cells.length) {
      sortTable(tables[0], col, params.dir === "asc" ? "asc" : "desc");
    }
  }
  if (params.q !== undefined) { filter.value = params.q; }
  applyFilter();
  document.body.setAttribute("data-ready", "1");
})();
"""


_VIEWER_JS = _PAGE_JS + """
(function () {
  "use strict";
  var status = document.getElementById("status");
  var text = document.getElementById("filter");
  var count = document.getElementById("shown");
  var episodes = Array.prototype.slice.call(document.querySelectorAll("section.episode"));
  function apply() {
    var s = status.value;
    showItems(episodes, function (ep) { return s === "" || ep.getAttribute("data-status") === s; },
              text.value.trim().toLowerCase(), count, "episodes");
  }
  status.addEventListener("change", apply);
  text.addEventListener("input", apply);
  var params = hashParams();
  if (params.status !== undefined) { status.value = params.status; }
  if (params.q !== undefined) { text.value = params.q; }
  apply();
  document.body.setAttribute("data-ready", "1");
})();
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str, script: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n"
        f"<script>{script}</script>\n</body></html>\n"
    )


def _or_dash(value: object) -> object:
    return "-" if value is None else value


def _short(value: object) -> object:
    """A float to 3 decimals (other values as they are)."""
    return f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else value


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "x"


def markdown_section_html(lines: Sequence[str]) -> str:
    """The HTML of a section the leaderboard wrote as Markdown lines (:mod:`.sections`, cards).

    Headings, paragraphs, ``- `` list items and pipe tables (the separator line dropped);
    the text is escaped, Markdown's escapes and backticks removed.
    """
    def text(value: str) -> str:
        return _e(value.replace("\\*", "*").replace("\\|", "|").replace("`", ""))

    parts: list[str] = []
    table: list[list[str]] = []
    items: list[str] = []

    def flush() -> None:
        if table:
            head = "".join(f"<th>{text(c)}</th>" for c in table[0])
            body = "".join("<tr>" + "".join(f"<td>{text(c)}</td>" for c in row) + "</tr>"
                           for row in table[1:])
            parts.append(f'<div class="wrap"><table class="sortable"><thead><tr>{head}</tr>'
                         f"</thead><tbody>{body}</tbody></table></div>")
            table.clear()
        if items:
            parts.append("<ul>" + "".join(f"<li>{text(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in lines:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(set(c) <= set("-:") for c in cells):
                table.append(cells)
            continue
        if line.startswith("- "):
            items.append(line[2:])
            continue
        flush()
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 4)
            parts.append(f"<h{level}>{text(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            parts.append(f'<p class="note">{text(line)}</p>')
    flush()
    return "".join(parts)
