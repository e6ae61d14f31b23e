(function () {
  "use strict";
  function cellValue(row, i) {
    var cell = row.cells[i];
    if (!cell) { return null; }
    var v = cell.getAttribute("data-v");
    if (v === null) { return cell.textContent.trim().toLowerCase(); }
    if (v === "") { return null; }
    var n = parseFloat(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }
  function sortTable(table, index, th) {
    var body = table.tBodies[0];
    if (!body) { return; }
    var descending = th.getAttribute("aria-sort") !== "descending";
    var heads = table.tHead.rows[0].cells;
    for (var h = 0; h < heads.length; h++) { heads[h].removeAttribute("aria-sort"); }
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index), y = cellValue(b, index);
      if (x === y) { return 0; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      var c = x < y ? -1 : 1;
      return descending ? -c : c;
    });
    for (var r = 0; r < rows.length; r++) { body.appendChild(rows[r]); }
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    if (!table.tHead) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener("click", function () { sortTable(table, i, th); });
    });
  });
  var filters = document.querySelectorAll("input[data-filter]");
  Array.prototype.forEach.call(filters, function (input) {
    var table = document.getElementById(input.getAttribute("data-filter"));
    if (!table || !table.tBodies[0]) { return; }
    input.addEventListener("input", function () {
      var q = input.value.toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        row.hidden = q !== "" && row.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
  });
  var switches = document.querySelectorAll("select.dataset-switch");
  var showDataset = function (chosen) {
    Array.prototype.forEach.call(document.querySelectorAll("[data-dataset]"), function (el) {
      el.hidden = el.getAttribute("data-dataset") !== chosen;
    });
    Array.prototype.forEach.call(document.querySelectorAll("[data-of]"), function (el) {
      el.classList.toggle("off-dataset", chosen !== "all" && el.getAttribute("data-of") !== chosen);
    });
    Array.prototype.forEach.call(switches, function (s) { s.value = chosen; });
    if (onDataset) { onDataset(); }
  };
  var onDataset = null;
  Array.prototype.forEach.call(switches, function (s) {
    s.addEventListener("change", function () { showDataset(s.value); });
  });
  var currentDataset = function () { return switches.length ? switches[0].value : "all"; };
  var data = function (id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  };
  var element = function (tag, cls, text) {
    var el = document.createElement(tag);
    if (cls) { el.className = cls; }
    if (text !== undefined) { el.textContent = text; }
    return el;
  };
  var swatch = function (color) {
    var s = element("span", "swatch");
    s.style.background = color;
    return s;
  };
  var drawLost = function () {
    var d = data("lost-data"), body = document.querySelector("#lost-table tbody");
    if (!d || !body || body.rows.length) { return; }
    var chosen = currentDataset();
    d.rows.forEach(function (r) {
      var tr = element("tr");
      tr.setAttribute("data-of", r[0]);
      tr.classList.toggle("off-dataset", chosen !== "all" && r[0] !== chosen);
      tr.appendChild(element("td", "mono wrap", r[1]));
      var probe = element("td", "mono wrap", r[2] + " ");
      probe.appendChild(element("span", "tag", r[3]));
      probe.appendChild(document.createTextNode(" "));
      probe.appendChild(element("span", "tag", "at " + r[4] + "%"));
      if (r[5]) { probe.appendChild(document.createTextNode(" ")); probe.appendChild(element("span", "tag", "at risk")); }
      tr.appendChild(probe);
      tr.appendChild(element("td", "wrap", r[6]));
      var under = element("td");
      r[8].forEach(function (loss) {
        var config = d.configs[loss[0]], div = element("div");
        div.appendChild(swatch(config[1]));
        div.appendChild(element("span", "mono", config[0]));
        div.appendChild(document.createTextNode(": "));
        loss[1].forEach(function (i, n) {
          if (n > 0) { div.appendChild(document.createTextNode(", ")); }
          div.appendChild(element("span", "lost", r[7] ? r[7][i] : "fact #" + (i + 1)));
        });
        div.appendChild(document.createTextNode(" "));
        var label = "(" + (loss[2] - loss[1].length) + " of " + loss[2] + " facts kept)";
        if (loss[3] && loss[3].length) {
          // The judge's evidence for each kept fact: the alias that matched and where.
          var ev = element("details", "evidence");
          ev.appendChild(element("summary", "ci", label));
          loss[3].forEach(function (e) {
            var line = element("div");
            line.appendChild(element("span", "mono", r[7] ? r[7][e[0]] : "fact #" + (e[0] + 1)));
            line.appendChild(document.createTextNode(": " + e[1]));
            ev.appendChild(line);
          });
          div.appendChild(ev);
        } else {
          div.appendChild(element("span", "ci", label));
        }
        under.appendChild(div);
      });
      tr.appendChild(under);
      var kept = element("td", "num", r[9] + " of " + r[10]);
      kept.setAttribute("data-v", String(r[9] / Math.max(r[10], 1)));
      tr.appendChild(kept);
      body.appendChild(tr);
    });
  };
  var lost = document.getElementById("lost-details");
  if (lost) {
    lost.addEventListener("toggle", function () { if (lost.open) { drawLost(); } });
  }
  // Per-conversation detail, embedded once as data (see html/detail.rs for its layout).
  var detail;
  var detailData = function () {
    if (detail === undefined) { detail = data("detail-data") || { c: [], v: [] }; }
    return detail;
  };
  // The SVG namespace, read from the page's own inline SVG (the timelines' legend).
  var SVG_NS = (document.querySelector("svg") || document.documentElement).namespaceURI;
  var svgEl = function (tag, attrs, title) {
    var el = document.createElementNS(SVG_NS, tag);
    Object.keys(attrs).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    if (title !== undefined) {
      var t = document.createElementNS(SVG_NS, "title");
      t.textContent = title;
      el.appendChild(t);
    }
    return el;
  };
  var svgText = function (x, y, anchor, text, cls) {
    var attrs = { x: px(x), y: px(y), "text-anchor": anchor };
    if (cls) { attrs["class"] = cls; }
    var t = svgEl("text", attrs);
    t.textContent = text;
    return t;
  };
  var px = function (v) { return v.toFixed(1); };
  var niceTicks = function (lo, hi, n) {
    if (!(isFinite(lo) && isFinite(hi)) || hi <= lo || n === 0) { return [lo]; }
    var raw = (hi - lo) / n, power = Math.pow(10, Math.floor(Math.log10(raw))), step = 10 * power;
    for (var m = 0, ms = [1, 2, 5, 10]; m < ms.length; m++) {
      if (ms[m] * power >= raw) { step = ms[m] * power; break; }
    }
    var out = [];
    for (var i = Math.ceil(lo / step); i <= Math.floor(hi / step); i++) { out.push(i * step); }
    return out;
  };
  var trimZeros = function (s) { return s.indexOf(".") >= 0 ? s.replace(/0+$/, "").replace(/\.$/, "") : s; };
  var shortTokens = function (v) {
    var a = Math.abs(v);
    if (a >= 1e6) { return trimZeros((v / 1e6).toFixed(2)) + "M"; }
    if (a >= 1e3) { return trimZeros((v / 1e3).toFixed(1)) + "k"; }
    return String(Math.round(v));
  };
  // One pair's sawtooth: request tokens and the estimate per call, the window, the triggers,
  // compactions as drops, overflowing calls as dots.
  var timelineChart = function (p) {
    var w = 420, h = 170, left = 46, right = 8, top = 8, bottom = 22;
    var window_ = p[1], thresholds = p[7], flat = p[8], markers = p[9], overflows = p[10];
    var points = [], call = 0, peak = 0, lastCall = 0, highest = 0, i;
    for (i = 0; i + 2 < flat.length; i += 3) {
      call += flat[i];
      points.push([call, flat[i + 1], flat[i + 1] + flat[i + 2]]);
      peak = Math.max(peak, flat[i + 1], flat[i + 1] + flat[i + 2]);
      lastCall = Math.max(lastCall, call);
    }
    thresholds.forEach(function (t) { highest = Math.max(highest, t[1]); });
    var yTop = Math.max(peak, window_, highest, 1) * 1.06;
    lastCall = Math.max(lastCall, 1);
    var xs = function (v) { return left + v / lastCall * (w - right - left); };
    var ys = function (v) { return (h - bottom) + v / yTop * (top - (h - bottom)); };
    var s = svgEl("svg", { viewBox: "0 0 " + w + " " + h, role: "img", "aria-label": "context size per call" });
    niceTicks(0, yTop, 4).forEach(function (tick) {
      s.appendChild(svgEl("line", { "class": "gridline", x1: px(left), x2: px(w - right), y1: px(ys(tick)), y2: px(ys(tick)) }));
      s.appendChild(svgText(left - 4, ys(tick) + 4, "end", shortTokens(tick)));
    });
    niceTicks(0, lastCall, 5).forEach(function (tick) {
      s.appendChild(svgText(xs(tick), h - 6, "middle", String(Math.round(tick))));
    });
    s.appendChild(svgText(w - right, h - 6, "end", "call"));
    s.appendChild(svgEl("line", { "class": "axis", x1: px(left), x2: px(w - right), y1: px(h - bottom), y2: px(h - bottom) }));
    s.appendChild(svgEl("line", { "class": "axis", x1: px(left), x2: px(left), y1: px(top), y2: px(h - bottom) }));
    if (window_ > 0) {
      var wy = px(ys(window_));
      s.appendChild(svgEl("line", { "class": "window", x1: px(left), x2: px(w - right), y1: wy, y2: wy }, "window " + window_));
    }
    thresholds.forEach(function (t, k) {
      var y = ys(t[1]);
      var line = svgEl("line", { "class": "threshold", x1: px(left), x2: px(w - right), y1: px(y), y2: px(y) },
        t[0] + " threshold " + t[1] + " (strategy estimate)");
      line.setAttribute("data-label", t[0]);
      s.appendChild(line);
      // With several lines, the labels alternate ends so close thresholds do not overprint.
      s.appendChild(k % 2 === 0 ? svgText(w - right - 2, y - 2, "end", t[0], "threshold-label")
        : svgText(left + 2, y - 2, "start", t[0], "threshold-label"));
    });
    if (points.length) {
      var line = function (k) { return points.map(function (q) { return px(xs(q[0])) + "," + px(ys(q[k])); }).join(" "); };
      s.appendChild(svgEl("polyline", { "class": "estimate", points: line(2) }, "strategy estimate"));
      s.appendChild(svgEl("polyline", { "class": "tokens", points: line(1) }, "request tokens (exact)"));
    }
    for (i = 0; i + 2 < markers.length; i += 3) {
      var x = px(xs(markers[i]));
      s.appendChild(svgEl("line", { "class": "event", x1: x, x2: x, y1: px(ys(markers[i + 1])), y2: px(ys(markers[i + 2])) },
        "compaction before call " + markers[i] + ": " + markers[i + 1] + " -> " + markers[i + 2] + " tokens"));
      s.appendChild(svgEl("circle", { "class": "event-dot", cx: x, cy: px(ys(markers[i + 2])), r: "2.2" }));
    }
    for (i = 0; i + 1 < overflows.length; i += 2) {
      s.appendChild(svgEl("circle", { "class": "overflow", cx: px(xs(overflows[i])), cy: px(ys(overflows[i + 1])), r: "3" },
        "overflow at call " + overflows[i] + ": " + overflows[i + 1] + " tokens"));
    }
    return s;
  };
  var configHeading = function (tag, cls, config, count) {
    var head = element(tag, cls);
    head.appendChild(swatch(config[1]));
    head.appendChild(element("span", "mono", config[0]));
    if (count !== undefined) { head.appendChild(document.createTextNode(" ")); head.appendChild(element("span", "ci", count)); }
    return head;
  };
  var drawTimelines = function (k) {
    var box = document.getElementById("timeline-charts"), d = detailData(), conv = d.v[k];
    if (!box) { return; }
    box.textContent = "";
    if (!conv) { return; }
    var div = element("div", "conversation");
    div.setAttribute("data-conversation", String(k));
    if (switches.length) {
      // The charts belong to their conversation's dataset: another dataset's switch hides them.
      div.setAttribute("data-of", conv[0]);
      div.classList.toggle("off-dataset", currentDataset() !== "all" && conv[0] !== currentDataset());
    }
    div.appendChild(element("h3", null, conv[1]));
    var grid = element("div", "grid");
    conv[3].forEach(function (p) {
      var chart = element("div", "chart");
      chart.appendChild(configHeading("h4", null, d.c[p[0]] || ["?", "#5b6475"]));
      if (p[2] !== null) {
        chart.appendChild(element("p", "bad", "failed: " + p[2]));
      } else {
        chart.appendChild(element("div", "note", p[3] + " calls · " + p[4] + " compactions · " + p[5] + " overflows · peak " + p[6] + " · window " + p[1]));
        chart.appendChild(timelineChart(p));
      }
      grid.appendChild(chart);
    });
    div.appendChild(grid);
    box.appendChild(div);
  };
  var picker = document.getElementById("timeline-select");
  if (picker) {
    picker.addEventListener("change", function () { drawTimelines(Number(picker.value)); });
    if (picker.value !== "") { drawTimelines(Number(picker.value)); }
    // A dataset picked elsewhere: the picker moves to that dataset's first conversation.
    onDataset = function () {
      var chosen = picker.options[picker.selectedIndex];
      if (chosen && !chosen.classList.contains("off-dataset")) { return; }
      var first = Array.prototype.find.call(picker.options, function (o) { return !o.classList.contains("off-dataset"); });
      if (first) { picker.value = first.value; drawTimelines(Number(first.value)); }
    };
  }
  var HEADS = ["call", "trigger", "step", "tokens", "messages", "removed", "masked", "round", "fallback", "violations", "summary"];
  var NUMERIC = [true, false, false, true, true, true, true, true, false, false, false];
  var drawEvents = function (box) {
    var d = detailData(), conv = d.v[Number(box.getAttribute("data-detail"))];
    if (!conv) { return; }
    conv[3].forEach(function (p) {
      if (p[2] !== null || !p[11]) { return; }
      box.appendChild(configHeading("h4", "pair-events", d.c[p[0]] || ["?", "#5b6475"], "(" + p[11] + " events)"));
      var scroll = element("div", "scroll"), table = element("table"), head = element("tr"), body = element("tbody");
      HEADS.forEach(function (name, i) { head.appendChild(element("th", NUMERIC[i] ? "num" : null, name)); });
      table.appendChild(element("thead")).appendChild(head);
      var previous = -1;
      p[12].forEach(function (e) {
        if (previous >= 0 && e[0] !== previous + 1) {
          var gap = element("tr", "omitted"), cell = element("td", "note",
            "… " + (e[0] - previous - 1) + " events left out (the first and last " + d.k +
            " of each pair are listed; compactions.csv has them all) …");
          cell.colSpan = HEADS.length;
          gap.appendChild(cell);
          body.appendChild(gap);
        }
        previous = e[0];
        var tr = element("tr");
        [String(e[1]), e[2], e[3], e[4] + " → " + e[5], e[6] + " → " + e[7], String(e[8]), String(e[9]),
          e[10] === null ? "–" : String(e[10]), e[11] === null ? "–" : e[11]].forEach(function (text, i) {
          tr.appendChild(element("td", NUMERIC[i] ? "num" : null, text));
        });
        tr.appendChild(element("td", e[12] ? "bad" : null, e[12]));
        var summary = element("td");
        if (e[14] === 0) {
          summary.textContent = "–";
        } else {
          var fold = element("details");
          // Labelled with who wrote it: the offline stand-in's text is not the strategy's.
          var source = (d.c[p[0]] || [])[2];
          fold.appendChild(element("summary", null, (source ? source + " summary \u00b7 " : "") + e[14] + " characters"));
          fold.appendChild(element("pre", null, e[13] === null
            ? "(not embedded: the page reached its size bound; compactions.csv has it)"
            : e[13] + (e[15] > 0 ? "\n… (" + e[15] + " more characters)" : "")));
          summary.appendChild(fold);
        }
        tr.appendChild(summary);
        body.appendChild(tr);
      });
      table.appendChild(body);
      scroll.appendChild(table);
      box.appendChild(scroll);
    });
  };
  Array.prototype.forEach.call(document.querySelectorAll("details.events[data-detail]"), function (box) {
    box.addEventListener("toggle", function () {
      if (box.open && !box.hasAttribute("data-drawn")) { box.setAttribute("data-drawn", "1"); drawEvents(box); }
    });
  });
  document.documentElement.setAttribute("data-ready", "1");
})();
