// The history page's drawing (page.py beside it writes the page around it): every figure's small
// multiple, drawn from the document embedded in the page, its table on click, the filter box and the download
// link. Nothing is fetched: the page is one file.
(function () {
  "use strict";
  var doc = JSON.parse(document.getElementById("history-data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  var W = 320, H = 136, L = 52, R = 8, T = 8, B = 20;  // the svg, and the plot's margins inside it
  var nights = doc.nights;
  var times = nights.map(function (n) { return Date.parse(n.time); });
  var t0 = Math.min.apply(null, times), t1 = Math.max.apply(null, times);
  if (!(t1 > t0)) { t0 -= 43200000; t1 += 43200000; }
  var DOTS = nights.length <= 90;  // every night a dot; past that the line alone, and the marked nights

  function x(i) { return L + (W - L - R) * (times[i] - t0) / (t1 - t0); }

  // Four significant digits, never an exponent, thousands grouped (as gpubench.console.fmt_value).
  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) { return "—"; }
    var a = Math.abs(v);
    if (v === 0) { return "0"; }
    if (a >= 1000) { return Math.round(v).toLocaleString("en-US"); }
    if (a >= 1e-4) { return String(Number(v.toPrecision(4))); }
    return v.toFixed(3 - Math.floor(Math.log10(a))).replace(/0+$/, "");
  }

  function pct(v) { return (v > 0 ? "+" : v < 0 ? "−" : "") + Math.abs(100 * v).toFixed(1) + "%"; }

  function day(i) { return nights[i].time.slice(0, 16).replace("T", " "); }  // as written, UTC for gpubench's runs

  // A night on a shared GPU or a busy host is no evidence: the line, the spread and the scale leave it out (it is
  // drawn hollow on its own), unless every night of the figure was such a night.
  function alone(fig, values) {
    var some = fig.median.some(function (v, i) { return v !== null && !nights[i].hollow; });
    return values.map(function (v, i) { return some && nights[i].hollow ? null : v; });
  }

  function el(tag, attrs, parent, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined) { e.textContent = text; }
    if (parent) { parent.appendChild(e); }
    return e;
  }

  function titled(e, text) { el("title", {}, e, text); return e; }

  function scale(fig) {
    var lo = Infinity, hi = -Infinity;
    ["median", "q1", "q3", "low", "high"].forEach(function (k) {
      alone(fig, fig[k]).forEach(function (v) { if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    });
    if (!(hi > lo)) { var d = Math.abs(lo) * 0.01 || 1; lo -= d; hi += d; }
    var pad = (hi - lo) * 0.08;
    lo -= pad; hi += pad;
    var y = function (v) { return T + (H - T - B) * (1 - (Math.min(hi, Math.max(lo, v)) - lo) / (hi - lo)); };
    y.outside = function (v) { return v > hi ? 1 : v < lo ? -1 : 0; };
    // ticks at round numbers (1, 2 or 5 × a power of ten), two to four of them: short labels that fit the margin
    var raw = (hi - lo) / 3, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    var step = (f >= 5 ? 5 : f >= 2 ? 2 : 1) * mag;
    y.ticks = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi; v += step) { y.ticks.push(v); }
    y.step = step;
    return y;
  }

  // A tick's label: as many decimals as its step needs, thousands grouped, k and M past 100,000.
  function tickText(v, step) {
    if (Math.abs(v) < step / 2) { return "0"; }
    var a = Math.abs(v);
    if (a >= 1e8) { return (v / 1e6).toFixed(0) + "M"; }
    if (a >= 1e5) { return (v / 1e3).toFixed(Math.max(0, 3 - Math.floor(Math.log10(step)))) + "k"; }
    var d = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    return v.toLocaleString("en-US", {minimumFractionDigits: d, maximumFractionDigits: d});
  }

  // A band between two series, one closed shape per run of nights where both are known.
  function band(svg, upper, lower, y, cls) {
    var d = "", run = [];
    function flush() {
      if (!run.length) { return; }
      var w = run.length === 1 ? 1.5 : 0;
      d += "M" + run.map(function (i) { return (x(i) - w) + "," + y(upper[i]); }).join("L");
      d += "L" + run.slice().reverse().map(function (i) { return (x(i) + w) + "," + y(lower[i]); }).join("L") + "Z";
      run = [];
    }
    for (var i = 0; i < nights.length; i++) {
      if (upper[i] !== null && lower[i] !== null) { run.push(i); } else { flush(); }
    }
    flush();
    if (d) { el("path", {d: d, "class": cls}, svg); }
  }

  // The x axis' labels, chosen once for every figure (they share the axis): month starts over a long span, days
  // over weeks, round times of day (UTC) over a day or two; thinned until no two overlap.
  var xticks = (function () {
    var out = [], span = t1 - t0, DAY = 86400000, label, d, step;
    if (span > 60 * DAY) {
      d = new Date(t0);
      d = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
      step = function (v) { return new Date(Date.UTC(v.getUTCFullYear(), v.getUTCMonth() + 1, 1)); };
      label = function (v) { return v.toISOString().slice(0, 7); };
    } else {
      var every = [60000, 120000, 300000, 600000, 900000, 1800000, 3600000, 7200000, 10800000, 21600000,
                   43200000, DAY, 2 * DAY, 7 * DAY].filter(function (e) { return span / e <= 6; })[0] || 14 * DAY;
      d = new Date(Math.ceil(t0 / every) * every);
      step = function (v) { return new Date(v.getTime() + every); };
      label = every >= DAY ? function (v) { return v.toISOString().slice(5, 10); }
                           : function (v) { return v.toISOString().slice(11, 16); };
    }
    for (; d.getTime() <= t1; d = step(d)) { out.push({t: d.getTime(), text: label(d)}); }
    var probe = el("svg", {width: W, height: 20, "class": "probe"}, document.body), kept = [], right = -Infinity;
    out.forEach(function (tick) {
      var at = L + (W - L - R) * (tick.t - t0) / (t1 - t0);
      var text = el("text", {x: at, y: 12, "class": "tick", "text-anchor": "middle"}, probe, tick.text);
      var box = text.getBBox();
      if (box.x > right + 6 && box.x >= 0 && box.x + box.width <= W) {
        kept.push({x: at, text: tick.text});
        right = box.x + box.width;
      }
    });
    probe.remove();
    return kept;
  })();

  function axes(svg, y) {
    y.ticks.forEach(function (v) {
      el("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), "class": "grid"}, svg);
      el("text", {x: L - 4, y: y(v) + 3.5, "class": "tick", "text-anchor": "end"}, svg, tickText(v, y.step));
    });
    xticks.forEach(function (t) {
      el("line", {x1: t.x, x2: t.x, y1: H - B, y2: H - B + 3, "class": "axis"}, svg);
      el("text", {x: t.x, y: H - 5, "class": "tick", "text-anchor": "middle"}, svg, t.text);
    });
    el("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, "class": "axis"}, svg);
  }

  function byNight(list) {
    var out = {};
    list.forEach(function (m) { out[m.night] = m; });
    return out;
  }

  // What changed by a night for a figure: its suite's settings against that suite's previous night, and the
  // suite's version.
  function changed(fig, versions, i) {
    return (nights[i].changes[fig.suite] || []).concat(versions[i] ? [versions[i].text] : []);
  }

  // A marker stands between two points of the figure: none at its first point (nothing drawn to differ from),
  // so none on a figure of one point.
  function markers(svg, fig) {
    var versions = byNight(fig.versions), seen = false;
    nights.forEach(function (n, i) {
      if (fig.median[i] === null) { return; }
      var what = changed(fig, versions, i), before = seen;
      seen = true;
      if (what.length && before) {
        titled(el("line", {x1: x(i), x2: x(i), y1: T, y2: H - B, "class": "marker", "data-run": n.run_id}, svg),
               day(i) + " settings changed:\n" + what.join("\n"));
      }
    });
  }

  function worseText(m) {
    return "WORSE since " + m.since + " (" + m.nights + " night" + (m.nights === 1 ? "" : "s") +
      (m.change !== null && m.change !== undefined ? ", " + pct(m.change) : "") + ")";
  }

  function points(svg, fig, y) {
    var worse = byNight(fig.worse), rec = byNight(fig.recovered), acc = byNight(fig.accepted);
    fig.median.forEach(function (v, i) {
      if (v === null) { return; }
      var cx = x(i), cy = y(v), run = nights[i].run_id;
      if (worse[i]) {
        titled(el("circle", {cx: cx, cy: cy, r: 3.2, "class": "worse", "data-run": run}, svg),
                   day(i) + ": " + worseText(worse[i]));
      } else if (nights[i].hollow) {
        // beyond the scale of the other nights: a hollow triangle at the edge, pointing to where it lies
        var out = y.outside(v), what = day(i) + ": " + fmt(v) + ", " + nights[i].hollow + " (no evidence for the gate)";
        titled(out ? el("path", {d: "M" + (cx - 3.5) + "," + cy + "l3.5," + (-6 * out) + "l3.5," + (6 * out) + "Z",
                                 "class": "hollow", "data-run": run}, svg)
                   : el("circle", {cx: cx, cy: cy, r: 2.8, "class": "hollow", "data-run": run}, svg), what);
      } else if (DOTS) {
        el("circle", {cx: cx, cy: cy, r: 1.8, "class": "pt", "data-run": run}, svg);
      }
      if (rec[i]) {
        titled(el("circle", {cx: cx, cy: cy, r: 5, "class": "recovered", "data-run": run}, svg),
               day(i) + ": " + rec[i].text);
      }
      if (acc[i]) {
        var a = acc[i], s = 5;
        var diamond = "M" + cx + "," + (cy - s) + "l" + s + "," + s + "l-" + s + "," + s + "l-" + s + ",-" + s + "Z";
        titled(el("path", {d: diamond, "class": "accepted", "data-run": run}, svg),
               day(i) + ": accepted by " + a.by + " on " + a.at + " (from " + a.from + "): " + a.reason);
      }
    });
  }

  function draw(card) {
    var fig = doc.figures[+card.getAttribute("data-i")];
    var svg = card.querySelector("svg");
    var y = scale(fig);
    axes(svg, y);
    band(svg, fig.high, fig.low, y, "band");
    band(svg, alone(fig, fig.q3), alone(fig, fig.q1), y, "spread");
    var d = "";
    alone(fig, fig.median).forEach(function (v, i) { if (v !== null) { d += (d ? "L" : "M") + x(i) + "," + y(v); } });
    el("path", {d: d, "class": "median"}, svg);
    markers(svg, fig);
    points(svg, fig, y);
  }

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) { td.className = cls; }
    tr.appendChild(td);
  }

  function table(card) {
    var fig = doc.figures[+card.getAttribute("data-i")];
    var worse = byNight(fig.worse), rec = byNight(fig.recovered), acc = byNight(fig.accepted);
    var versions = byNight(fig.versions);
    var box = document.createElement("div");
    box.className = "figtable";
    var t = document.createElement("table"), head = document.createElement("tr");
    ["night", "run", "median", "q1 – q3", "n", "band", "gate", "settings that changed"].forEach(function (h) {
      var th = document.createElement("th"); th.textContent = h; head.appendChild(th);
    });
    t.appendChild(head);
    for (var i = nights.length - 1; i >= 0; i--) {
      if (fig.median[i] === null) { continue; }
      var n = nights[i], tr = document.createElement("tr"), gate = [];
      if (worse[i]) { gate.push(worseText(worse[i])); }
      if (rec[i]) { gate.push(rec[i].text); }
      if (acc[i]) { gate.push("accepted by " + acc[i].by + " on " + acc[i].at + ": " + acc[i].reason); }
      if (n.hollow) { gate.push(n.hollow); }
      cell(tr, day(i) + (n.nights ? " (" + n.nights + " nights)" : ""));
      cell(tr, n.run_id + (n.last_run_id ? " … " + n.last_run_id : ""), "run");
      cell(tr, fmt(fig.median[i]));
      cell(tr, fig.q1[i] === null ? "—" : fmt(fig.q1[i]) + " – " + fmt(fig.q3[i]));
      cell(tr, String(fig.n[i]));
      cell(tr, fig.low[i] === null ? "—" : fmt(fig.low[i]) + " – " + fmt(fig.high[i]));
      cell(tr, gate.join("; "), worse[i] ? "gate WORSE" : "gate");
      cell(tr, changed(fig, versions, i).join("; "), "changes");
      t.appendChild(tr);
    }
    box.appendChild(t);
    return box;
  }

  function toggle(card) {
    var next = card.nextElementSibling;
    if (next && next.classList.contains("figtable")) { next.remove(); card.classList.remove("shown"); return; }
    card.parentNode.insertBefore(table(card), card.nextSibling);
    card.classList.add("shown");
  }

  var cards = Array.prototype.slice.call(document.querySelectorAll(".fig"));
  cards.forEach(function (card) {
    draw(card);
    card.addEventListener("click", function () { toggle(card); });
    card.addEventListener("keydown", function (e) { if (e.key === "Enter") { toggle(card); } });
  });

  var box = document.getElementById("filter"), count = document.getElementById("count");
  function filter() {
    var text = box.value.trim(), re = null, shown = 0;
    try { re = new RegExp(text, "i"); } catch (e) { re = null; }
    cards.forEach(function (card) {
      var name = card.getAttribute("data-name");
      var on = !text || (re ? re.test(name) : name.toLowerCase().indexOf(text.toLowerCase()) >= 0);
      card.hidden = !on;
      var next = card.nextElementSibling;
      if (next && next.classList.contains("figtable")) { next.hidden = !on; }
      shown += on ? 1 : 0;
    });
    document.querySelectorAll("section.suite").forEach(function (s) {
      s.hidden = !s.querySelector(".fig:not([hidden])");
    });
    count.textContent = shown + " of " + cards.length + " figures";
  }
  box.addEventListener("input", filter);
  filter();

  var link = document.getElementById("download");
  link.href = URL.createObjectURL(new Blob([document.getElementById("history-data").textContent],
                                           {type: "application/json"}));
  document.body.setAttribute("data-drawn", String(cards.length));
})();
