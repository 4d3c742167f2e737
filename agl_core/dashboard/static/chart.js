// Small SVG charts (line and bars) drawn with DOM calls; labels are text nodes.
const NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = String(text);
  return el;
}

function frame(id, yMin, yMax, W, H, pad) {
  const root = svg("svg", { class: "chart", id, viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  root.appendChild(svg("line", { class: "axis", x1: pad, y1: H - pad, x2: W - 10, y2: H - pad }));
  root.appendChild(svg("line", { class: "axis", x1: pad, y1: 10, x2: pad, y2: H - pad }));
  root.appendChild(svg("text", { x: 4, y: 16 }, yMax.toPrecision(3)));
  root.appendChild(svg("text", { x: 4, y: H - pad }, yMin.toPrecision(3)));
  return root;
}

/** A line chart of points [{x, y}] (x ascending); xLabel formats the first and last x. */
export function lineChart(id, points, xLabel) {
  const W = 800, H = 260, pad = 40;
  if (!points.length) return svg("svg", { class: "chart", id });
  const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1e-9);
  let y0 = Math.min(...ys, 0), y1 = Math.max(...ys, y0 + 1e-9);
  if (y0 === y1) y1 = y0 + 1;
  const sx = (x) => pad + ((x - x0) / (x1 - x0)) * (W - pad - 20);
  const sy = (y) => H - pad - ((y - y0) / (y1 - y0)) * (H - pad - 20);
  const root = frame(id, y0, y1, W, H, pad);
  root.appendChild(svg("path", { class: "line", d: points.map((p, i) => `${i ? "L" : "M"}${sx(p.x)},${sy(p.y)}`).join(" ") }));
  for (const p of points) root.appendChild(svg("circle", { class: "dot", cx: sx(p.x), cy: sy(p.y), r: 2.5 }));
  root.appendChild(svg("text", { x: pad, y: H - 12 }, xLabel(x0)));
  root.appendChild(svg("text", { x: W - 160, y: H - 12 }, xLabel(x1)));
  return root;
}

/** A bar chart of [{label, value}]. */
export function barChart(id, bars) {
  const W = 800, H = 260, pad = 40;
  if (!bars.length) return svg("svg", { class: "chart", id });
  let y1 = Math.max(...bars.map((b) => b.value), 1e-9);
  const y0 = Math.min(0, ...bars.map((b) => b.value));
  if (y1 === y0) y1 = y0 + 1;
  const root = frame(id, y0, y1, W, H, pad);
  const step = (W - pad - 20) / bars.length;
  bars.forEach((b, i) => {
    const top = H - pad - ((b.value - y0) / (y1 - y0)) * (H - pad - 20);
    const x = pad + i * step + step * 0.15;
    const bar = svg("rect", { class: "bar", x, y: top, width: step * 0.7, height: Math.max(H - pad - top, 1) });
    bar.appendChild(svg("title", {}, `${b.label}: ${b.value.toPrecision(3)}`));
    root.appendChild(bar);
    root.appendChild(svg("text", { x, y: H - 24 }, b.label.length > 14 ? b.label.slice(0, 13) + "…" : b.label));
  });
  return root;
}
