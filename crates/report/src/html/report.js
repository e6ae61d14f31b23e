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
  document.documentElement.setAttribute("data-ready", "1");
})();
