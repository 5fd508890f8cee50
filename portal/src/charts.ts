// Charts drawn by the app as SVG: grouped bars per category (a provider's ledger by month, the
// money figures of the staff views). Each chart has a title and a description for screen
// readers, and the figures stay readable beside it in a table (the caller's).
const NS = "http://www.w3.org/2000/svg";

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

export interface Series {
  name: string;
  values: number[];
}

let charts = 0;

/** Grouped bar chart: one group per label, one bar per series, a legend, an axis with the
 * largest value formatted by format. */
export function barChart(title: string, labels: string[], series: Series[], format: (n: number) => string): Element {
  const id = `chart${++charts}`;
  const width = 640, height = 240, left = 72, bottom = 28, top = 12;
  const max = Math.max(1, ...series.flatMap((s) => s.values.map((v) => Math.abs(v))));
  const plotW = width - left - 8, plotH = height - top - bottom;
  const groupW = plotW / Math.max(1, labels.length);
  const barW = Math.max(2, (groupW * 0.8) / Math.max(1, series.length));
  const root = svg("svg", { viewBox: `0 0 ${width} ${height + 24}`, role: "img", "aria-labelledby": `${id}-t ${id}-d`, class: "chart" });
  root.append(svg("title", { id: `${id}-t` }, title));
  const summary = labels.map((l, i) => `${l}: ${series.map((s) => `${s.name} ${format(s.values[i] ?? 0)}`).join(", ")}`).join("; ");
  root.append(svg("desc", { id: `${id}-d` }, summary || "No figures."));
  for (const f of [0, 0.5, 1]) {
    const y = top + plotH * (1 - f);
    root.append(svg("line", { x1: left, x2: width - 8, y1: y, y2: y, class: "grid" }));
    root.append(svg("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "axis" }, format(max * f)));
  }
  labels.forEach((label, i) => {
    const x0 = left + i * groupW + groupW * 0.1;
    series.forEach((s, k) => {
      const v = Math.abs(s.values[i] ?? 0);
      const hBar = (v / max) * plotH;
      const rect = svg("rect", { x: x0 + k * barW, y: top + plotH - hBar, width: barW - 1, height: hBar, class: `bar s${k}` });
      rect.append(svg("title", {}, `${label}, ${s.name}: ${format(s.values[i] ?? 0)}`));
      root.append(rect);
    });
    root.append(svg("text", { x: x0 + (barW * series.length) / 2, y: height - 10, "text-anchor": "middle", class: "axis" }, label));
  });
  series.forEach((s, k) => {
    const x = left + k * 150;
    root.append(svg("rect", { x, y: height + 8, width: 12, height: 12, class: `bar s${k}` }));
    root.append(svg("text", { x: x + 16, y: height + 18, class: "axis" }, s.name));
  });
  const figure = document.createElement("figure");
  figure.className = "chart-figure";
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  figure.append(caption, root);
  return figure;
}
