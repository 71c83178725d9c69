"""The page's style sheet and script, inline (a page opens offline: no fonts, no CDN).

The script reads the two JSON blocks (``ifl-data``: config and weights; ``ifl-measured``: the
float32 forward's errors) and draws what depends on them: one heatmap per head (a CSS grid of
cells, colour = attention weight, the value in a tooltip on hover), recoloured when another
example is selected, and the error histogram (log-spaced bins of |model − reference| with ε and
the a-priori bound marked), the worst input and the example outputs.
"""

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #fafbfc; }
header { background: #24324a; color: #fff; padding: 14px 24px; }
header h1 { margin: 0; font-size: 20px; }
header nav a { color: #cfe0ff; margin-right: 14px; text-decoration: none; font-size: 13px; }
section { background: #fff; margin: 16px 24px; padding: 8px 18px 14px; border: 1px solid #dde2ea;
  border-radius: 6px; overflow-x: auto; }
h2 { font-size: 17px; margin: 8px 0; }
pre { background: #f4f6f9; padding: 10px; border-radius: 4px; overflow-x: auto; }
pre.tokens { max-height: 180px; overflow-y: auto; }
table { border-collapse: collapse; margin: 6px 0; }
td, th { border: 1px solid #dde2ea; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f1f4f8; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 12.5px; }
.graph text { font: 12px system-ui, sans-serif; fill: #1d2330; }
.graph text.title { font-weight: 600; }
.graph .kind, .graph .meta { fill: #5b6478; font-size: 11px; font-weight: 400; }
.graph text.column { font-weight: 600; fill: #5b6478; }
.graph rect { stroke: #7a8499; }
.graph .edge { fill: none; stroke: #8891a5; stroke-width: 1.2; stroke-opacity: 0.6; }
.flow text { font: 12px system-ui, sans-serif; fill: #1d2330; }
.flow text.column { font-weight: 600; fill: #5b6478; }
.flow circle { stroke: #333; stroke-width: 1; }
.flow line.stream { stroke: #bbb; stroke-width: 1; }
.flow line.move { stroke-width: 1.5; stroke-opacity: 0.85; }
.heads { display: flex; flex-wrap: wrap; gap: 14px; }
.head { border: 1px solid #dde2ea; border-radius: 5px; padding: 6px 8px; }
.head h3 { font-size: 13px; margin: 2px 0 4px; }
.head p { margin: 2px 0; font-size: 12px; max-width: 420px; }
.heatmap { display: grid; gap: 0; margin-top: 4px; border: 1px solid #aab; width: max-content; }
.cell { background: #fff; }
#tooltip { position: fixed; pointer-events: none; background: #24324a; color: #fff; padding: 3px 7px;
  border-radius: 3px; font-size: 12px; display: none; z-index: 10; }
#tooltip.visible { display: block; }
.hist rect.bar { fill: #5b7fc7; }
.hist line.eps { stroke: #c0392b; stroke-width: 2; }
.hist line.bound { stroke: #e67e22; stroke-width: 2; stroke-dasharray: 5 3; }
.hist text { font: 11px system-ui, sans-serif; }
.empty { color: #5b6478; font-style: italic; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("ifl-data").textContent);
  var measuredBlock = document.getElementById("ifl-measured");
  var measured = measuredBlock ? JSON.parse(measuredBlock.textContent) : null;
  var tooltip = document.getElementById("tooltip");
  function fmt(v) { return v === null ? "undefined" : Number(v).toPrecision(4); }
  function show(text, event) {
    tooltip.textContent = text;
    tooltip.style.left = (event.clientX + 12) + "px";
    tooltip.style.top = (event.clientY + 12) + "px";
    tooltip.classList.add("visible");
  }
  function hide() { tooltip.classList.remove("visible"); }

  function drawHeatmaps() {
    var att = data.attention;
    if (!att) { return; }
    var size = Math.max(3, Math.min(12, Math.floor(384 / att.columns)));
    var maps = document.querySelectorAll(".heatmap");
    maps.forEach(function (map) {
      map.style.gridTemplateColumns = "repeat(" + att.columns + ", " + size + "px)";
      for (var i = 0; i < att.rows * att.columns; i++) {
        var cell = document.createElement("div");
        cell.className = "cell";
        cell.style.width = size + "px";
        cell.style.height = size + "px";
        cell.index = i;
        map.appendChild(cell);
      }
      map.addEventListener("mouseover", function (event) {
        var cell = event.target;
        if (cell.index === undefined) { return; }
        var example = Number(document.getElementById("example-select").value);
        var value = att.patterns[example][Number(map.dataset.head)][cell.index] / att.scale;
        var row = Math.floor(cell.index / att.columns), column = cell.index % att.columns;
        var query = row < att.columns ? "token " + (row + 1) : "readout " + (row + 1);
        show("query " + query + " → key " + (column + 1) + ": " + value.toFixed(4), event);
      });
      map.addEventListener("mouseleave", hide);
    });
  }

  function colour(weight) {
    var light = Math.round(255 - 205 * weight), green = Math.round(255 - 160 * weight);
    return "rgb(" + light + "," + green + ",255)";
  }

  function selectExample() {
    var att = data.attention;
    if (!att) { return; }
    var example = Number(document.getElementById("example-select").value);
    document.querySelectorAll(".heatmap").forEach(function (map) {
      var pattern = att.patterns[example][Number(map.dataset.head)];
      var cells = map.children;
      for (var i = 0; i < cells.length; i++) { cells[i].style.background = colour(pattern[i] / att.scale); }
    });
    var tokens = att.examples[example].map(function (t, i) { return (i + 1) + ": (" + t.join(", ") + ")"; });
    var lines = ["input x, one token a line:", tokens.join("\n")];
    if (measured) {
      lines.push("model output:     " + JSON.stringify(measured.examples.model[example]));
      lines.push("reference output: " + JSON.stringify(measured.examples.reference[example]));
    }
    document.getElementById("example-input").textContent = lines.join("\n");
  }

  function drawHistogram() {
    var target = document.getElementById("histogram");
    if (!measured || !target) { return; }
    var errors = measured.errors, eps = data.model.eps, bound = data.model.a_priori_bound;
    var positive = errors.filter(function (e) { return e > 0; });
    var zeros = errors.length - positive.length, top = Math.max(eps, Math.max.apply(null, errors.concat([0])));
    var low = positive.length ? Math.floor(Math.log10(Math.min.apply(null, positive))) : Math.log10(eps) - 3;
    var high = Math.ceil(Math.log10(top) + 0.05), bins = 40, counts = [];
    for (var b = 0; b < bins; b++) { counts.push(0); }
    positive.forEach(function (e) {
      var at = Math.floor((Math.log10(e) - low) / (high - low) * bins);
      counts[Math.min(bins - 1, Math.max(0, at))] += 1;
    });
    var width = 640, height = 220, left = 44, bottom = 30, most = Math.max.apply(null, counts.concat([1]));
    function x(value) { return left + (Math.log10(value) - low) / (high - low) * (width - left - 10); }
    var svg = ['<svg class="hist" xmlns="http://www.w3.org/2000/svg" width="' + width + '" height="' + height + '">'];
    counts.forEach(function (count, b) {
      var h = count / most * (height - bottom - 20), w = (width - left - 10) / bins;
      svg.push('<rect class="bar" x="' + (left + b * w) + '" y="' + (height - bottom - h) + '" width="' +
               (w - 1) + '" height="' + h + '"><title>' + count + " inputs with |error| in [" +
               Math.pow(10, low + b / bins * (high - low)).toPrecision(2) + ", " +
               Math.pow(10, low + (b + 1) / bins * (high - low)).toPrecision(2) + ")</title></rect>");
    });
    [["eps", eps, "ε"], ["bound", bound, "bound"]].forEach(function (mark) {
      var at = x(mark[1]);
      svg.push('<line class="' + mark[0] + '" x1="' + at + '" x2="' + at + '" y1="12" y2="' + (height - bottom) +
               '"/><text x="' + (at + 3) + '" y="' + (mark[0] === "eps" ? 12 : 24) + '">' + mark[2] + " " +
               fmt(mark[1]) + "</text>");
    });
    for (var p = low; p <= high; p++) {
      svg.push('<text x="' + x(Math.pow(10, p)) + '" y="' + (height - 10) + '" text-anchor="middle">1e' + p +
               "</text>");
    }
    svg.push("</svg>");
    target.innerHTML = svg.join("");
    document.getElementById("error-summary").textContent = errors.length + " inputs measured (" + zeros +
      " exact, " + measured.excluded_by_margin + " under the margin left out); largest |model − reference| " +
      fmt(Math.max.apply(null, errors.concat([0]))) + ", ε " + fmt(eps) + ", a-priori bound " + fmt(bound) + ".";
    var worst = measured.worst;
    document.getElementById("worst-input").textContent = "input " + worst.index + " (error " + fmt(worst.error) +
      "):\n" + worst.input.map(function (t, i) { return (i + 1) + ": (" + t.join(", ") + ")"; }).join("\n") +
      "\nmodel output:     " + JSON.stringify(worst.model) + "\nreference output: " + JSON.stringify(worst.reference);
  }

  drawHeatmaps();
  var select = document.getElementById("example-select");
  if (select) { select.addEventListener("change", selectExample); selectExample(); }
  drawHistogram();
  document.body.dataset.ready = "true";
})();
"""
