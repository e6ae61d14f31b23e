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
  var select = document.getElementById("timeline-select");
  if (select) {
    var show = function () {
      var chosen = select.value;
      Array.prototype.forEach.call(document.querySelectorAll("[data-conversation]"), function (el) {
        el.hidden = chosen !== "" && el.getAttribute("data-conversation") !== chosen;
      });
    };
    select.addEventListener("change", show);
    show();
  }
  var switches = document.querySelectorAll("select.dataset-switch");
  var showDataset = function (chosen) {
    Array.prototype.forEach.call(document.querySelectorAll("[data-dataset]"), function (el) {
      el.hidden = el.getAttribute("data-dataset") !== chosen;
    });
    Array.prototype.forEach.call(document.querySelectorAll("[data-of]"), function (el) {
      el.classList.toggle("off-dataset", chosen !== "all" && el.getAttribute("data-of") !== chosen);
    });
    Array.prototype.forEach.call(switches, function (s) { s.value = chosen; });
  };
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
  document.documentElement.setAttribute("data-ready", "1");
})();
