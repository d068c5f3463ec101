// The usage page's trend chart: GPU-hours per period (the previous ones and the one shown), the total
// and the top consumers, drawn with the vendored uPlot from the JSON the page embeds.
(function () {
  "use strict";
  var PALETTE = ["#3466d1", "#2f9e5b", "#e08a1e", "#8b5cc8", "#d63c3c", "#2aa6b8"];
  var NUM = new Intl.NumberFormat(document.documentElement.lang || undefined, { maximumFractionDigits: 2 });

  function start() {
    var figure = document.querySelector("[data-usage-chart]");
    var source = document.getElementById("usage-chart-data");
    if (!figure || !source || typeof uPlot === "undefined") return;
    var body = JSON.parse(source.textContent);
    var plot = figure.querySelector("[data-chart-plot]");
    plot.textContent = "";
    var any = body.series.some(function (s) { return s.values.some(function (v) { return v > 0; }); });
    if (!any) {
      var p = document.createElement("p");
      p.className = "muted";
      p.textContent = figure.getAttribute("data-empty-text");
      plot.appendChild(p);
      figure.setAttribute("data-chart-points", "0");
      return;
    }
    var fg = getComputedStyle(document.body).color;
    var grid = getComputedStyle(document.documentElement).getPropertyValue("--line").trim() || "#dfe3e8";
    var axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    var labels = body.labels;
    var x = body.timestamps.map(function (_t, i) { return i; });  // one step per period, labelled by name
    var chart = new uPlot({
      width: Math.max(plot.clientWidth || 600, 320),
      height: 240,
      scales: { x: { time: false }, y: { range: function (u, min, max) { return [0, Math.max(max, 1) * 1.05]; } } },
      axes: [
        Object.assign({}, axis, { splits: function () { return x; }, values: function (u, splits) { return splits.map(function (i) { return labels[i] || ""; }); } }),
        Object.assign({}, axis, { size: 60, values: function (u, splits) { return splits.map(function (v) { return NUM.format(v); }); } }),
      ],
      series: [{ label: figure.getAttribute("data-period-text") || "", value: function (u, i) { return i == null ? "--" : labels[i]; } }].concat(body.series.map(function (s, i) {
        return { label: s.name, stroke: PALETTE[i % PALETTE.length], width: i === 0 ? 2.5 : 1.5, points: { show: true, size: 6 },
                 value: function (u, v) { return v == null ? "--" : NUM.format(v); } };
      })),
      // The legend shows the period on display until the cursor points at another.
      hooks: { setCursor: [function (u) { if (u.cursor.idx == null) u.setLegend({ idx: x.length - 1 }); }] },
    }, [x].concat(body.series.map(function (s) { return s.values; })), plot);
    chart.setLegend({ idx: x.length - 1 });
    figure.setAttribute("data-chart-points", String(x.length));
    figure.setAttribute("data-chart-series", String(body.series.length));
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
