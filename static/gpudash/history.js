// Fleet-history charts: every [data-history-chart] fetches its series from the REST API
// (data-src, same origin, the session's cookie) and draws them with the vendored uPlot.
// The range buttons refetch every chart of their section with another `hours`.
(function () {
  "use strict";
  var STATE_COLOURS = ["free", "allocated", "admin", "partial", "tainted", "unhealthy", "stuck"];
  // Counts on the axes and in the legend grouped in the page's language (not the browser's).
  var NUM = new Intl.NumberFormat(document.documentElement.lang || undefined);
  function fmt(v) { return v == null ? "--" : NUM.format(v); }
  var PALETTE = ["#3466d1", "#2f9e5b", "#e08a1e", "#8b5cc8", "#d63c3c", "#2aa6b8", "#7d8590", "#b5651d", "#c2185b", "#607d3b"];

  function colourOf(name, i) {
    var css = getComputedStyle(document.documentElement);
    var key = name.replace(/^gpus_/, "");
    if (STATE_COLOURS.indexOf(key) >= 0) {
      var v = css.getPropertyValue("--" + key).trim();
      if (v) return v;
    }
    return PALETTE[i % PALETTE.length];
  }

  function withHours(src, hours) {
    var url = new URL(src, window.location.href);
    url.searchParams.set("hours", hours);
    return url.pathname + url.search;
  }

  function status(figure, text, isError) {
    var plot = figure.querySelector("[data-chart-plot]");
    plot.textContent = "";
    var p = document.createElement("p");
    p.className = isError ? "error" : "muted";
    p.setAttribute("data-chart-status", "");
    p.textContent = text;
    plot.appendChild(p);
  }

  function draw(figure, body) {
    var plot = figure.querySelector("[data-chart-plot]");
    if (figure._uplot) { figure._uplot.destroy(); figure._uplot = null; }
    var hasData = body.series.some(function (s) { return s.values.some(function (v) { return v !== null; }); });
    if (!body.series.length || !hasData) {
      status(figure, figure.closest("[data-history]").getAttribute("data-empty-text"), false);
      figure.setAttribute("data-chart-points", "0");
      return;
    }
    plot.textContent = "";
    var section = figure.closest("[data-history]");
    // The x axis spans the data collected, not the whole range asked for: 15 minutes of samples are
    // not squeezed into the last pixels of a 24 h axis; a note says since when samples exist.
    var first = body.timestamps.findIndex(function (_ts, i) {
      return body.series.some(function (s) { return s.values[i] !== null; });
    });
    var since = figure.querySelector("[data-chart-since]");
    if (since) since.remove();
    if (first > 0) {
      body = { timestamps: body.timestamps.slice(first), series: body.series.map(function (s) { return { name: s.name, values: s.values.slice(first) }; }) };
      since = document.createElement("p");
      since.className = "muted small";
      since.setAttribute("data-chart-since", String(body.timestamps[0]));
      var when = new Date(body.timestamps[0] * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC";
      since.textContent = (section.getAttribute("data-since-text") || "collecting since {time}").replace("{time}", when);
      figure.insertBefore(since, plot);
    }
    // The newest point with a sample: what the legend shows until the cursor points elsewhere.
    var newest = body.timestamps.length - 1;
    while (newest > 0 && !body.series.some(function (s) { return s.values[newest] !== null; })) newest--;
    var labels = {};
    try { labels = JSON.parse(section.getAttribute("data-series-labels") || "{}"); } catch (e) { labels = {}; }
    var fg = getComputedStyle(document.body).color;
    var grid = getComputedStyle(document.documentElement).getPropertyValue("--line").trim() || "#dfe3e8";
    var axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    var opts = {
      width: Math.max(plot.clientWidth || figure.clientWidth || 480, 280),
      height: 220,
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(max, 1) * 1.05]; } } },
      axes: [axis, Object.assign({}, axis, { size: 50, values: function (u, splits) { return splits.map(fmt); } })],
      series: [{ value: "{YYYY}-{MM}-{DD} {HH}:{mm} UTC" }].concat(body.series.map(function (s, i) {
        return { label: labels[s.name] || s.name, stroke: colourOf(s.name, i), width: 1.5, spanGaps: true, points: { show: false },
                 value: function (u, v) { return fmt(v); } };
      })),
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); },
      // The legend shows the newest values until the cursor points elsewhere (not "--").
      hooks: { setCursor: [function (u) { if (u.cursor.idx == null) u.setLegend({ idx: newest }); }] },
    };
    var data = [body.timestamps].concat(body.series.map(function (s) { return s.values; }));
    figure._uplot = new uPlot(opts, data, plot);
    figure._uplot.setLegend({ idx: newest });
    figure.setAttribute("data-chart-points", String(body.timestamps.length));
    figure.setAttribute("data-chart-series", String(body.series.length));
  }

  function load(figure, hours) {
    var src = withHours(figure.getAttribute("data-src"), hours);
    figure.setAttribute("aria-busy", "true");
    fetch(src, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        return r.json().then(function (body) {
          if (!r.ok) throw new Error((body && (body.detail || JSON.stringify(body))) || ("HTTP " + r.status));
          return body;
        });
      })
      .then(function (body) { draw(figure, body); })
      .catch(function (err) { status(figure, figure.closest("[data-history]").getAttribute("data-error-text") + " " + err.message, true); })
      .finally(function () { figure.removeAttribute("aria-busy"); });
  }

  function init(section) {
    var hours = section.getAttribute("data-hours") || "24";
    var charts = section.querySelectorAll("[data-history-chart]");
    charts.forEach(function (f) { load(f, hours); });
    section.querySelectorAll("[data-history-hours]").forEach(function (button) {
      button.addEventListener("click", function () {
        var h = button.getAttribute("data-history-hours");
        section.setAttribute("data-hours", h);
        section.querySelectorAll("[data-history-hours]").forEach(function (b) {
          var on = b === button;
          b.classList.toggle("on", on);
          b.setAttribute("aria-pressed", on ? "true" : "false");
        });
        charts.forEach(function (f) { load(f, h); });
      });
    });
  }

  function start() {
    if (typeof uPlot === "undefined") return;
    document.querySelectorAll("[data-history]").forEach(init);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
