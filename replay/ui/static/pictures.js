// The state diagram (laid out by the server from the transition table) and the timeline,
// drawn as SVG with the DOM helpers of dom.js.
"use strict";

function drawDiagram(d) {
  const root = svg("svg", {
    class: "diagram",
    viewBox: `0 0 ${d.width} ${d.height}`,
    width: d.width,
    height: d.height,
    role: "img",
    "aria-label": "state diagram with the run's path",
    "data-testid": "diagram",
  });
  const defs = svg("defs", {});
  for (const [id, cls] of [["arrow", "arrowhead"], ["arrow-hot", "arrowhead hot"]]) {
    defs.append(svg("marker", {
      id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
      orient: "auto-start-reverse",
    }, svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: cls })));
  }
  root.append(defs);
  for (const edge of d.edges) {
    const hot = edge.taken > 0;
    const points = edge.points.map((p) => p.join(",")).join(" ");
    const line = svg("polyline", {
      points,
      class: hot ? "edge taken" : "edge",
      "marker-end": hot ? "url(#arrow-hot)" : "url(#arrow)",
      "data-from": edge.from,
      "data-to": edge.to,
    }, svg("title", { text: `${edge.from} → ${edge.to}: ${edge.events.join(", ")}` }));
    root.append(line);
  }
  for (const edge of d.edges) {
    const b = edge.box;
    const group = svg("g", { class: edge.taken ? "label taken" : "label" });
    group.append(svg("rect", { x: b.x - b.w / 2, y: b.y - b.h / 2, width: b.w, height: b.h, rx: 3 }));
    const lines = edge.label.split("\n");
    lines.forEach((line, i) => {
      const y = b.y + (i - (lines.length - 1) / 2) * 12.5 + 3.5;
      group.append(svg("text", { x: b.x, y, "text-anchor": "middle", text: line }));
    });
    root.append(group);
  }
  for (const s of d.states) {
    const cls = ["state", s.visited ? "visited" : "", s.terminal ? "terminal" : ""].join(" ");
    const group = svg("g", { class: cls, "data-state": s.name });
    group.append(svg("rect", { x: s.x - s.w / 2, y: s.y - s.h / 2, width: s.w, height: s.h, rx: 8 }));
    group.append(svg("text", { x: s.x, y: s.y + 4.5, "text-anchor": "middle", text: s.name }));
    root.append(group);
  }
  return root;
}

function markState(root, name) {
  for (const node of root.querySelectorAll("g.state")) {
    node.classList.toggle("here", node.getAttribute("data-state") === name);
  }
}

function drawTimeline(t, onPick) {
  const width = 900;
  const lane = 26;
  const left = 70;
  const total = Math.max((t.end || 0) - (t.start || 0), 1e-6);
  const x = (seconds) => left + (seconds / total) * (width - left - 10);
  const root = svg("svg", {
    class: "timeline",
    viewBox: `0 0 ${width} ${lane * 3 + 24}`,
    width: "100%",
    role: "img",
    "aria-label": "timeline of the run",
    "data-testid": "timeline",
  });
  const lanes = [["states", t.states], ["LLM", t.llm], ["tools", t.tools]];
  lanes.forEach(([name, items], row) => {
    const y = row * lane + 4;
    root.append(svg("text", { x: 4, y: y + 16, class: "lane", text: name }));
    for (const item of items) {
      const x0 = x(item.start);
      const w = Math.max(x(item.end) - x0, 3);
      let cls = "block";
      let tip = "";
      let text = "";
      if (name === "states") {
        cls += ` st-${item.state}`;
        text = item.state;
        tip = `${item.state}: ${((item.end - item.start) * 1000).toFixed(1)} ms`;
      } else if (name === "LLM") {
        cls += item.ok ? " llm" : " llm bad";
        tip = `LLM seq ${item.seq}: ${item.input_tokens} in / ${item.output_tokens} out tokens, ` +
          `${item.latency_ms ?? "?"} ms`;
        text = `${item.input_tokens + item.output_tokens} tok`;
      } else {
        cls += item.success ? " tool" : " tool bad";
        tip = `${item.name} seq ${item.seq}: ${item.success ? "ok" : item.error_type || "failed"}, ` +
          `${item.duration_ms ?? "?"} ms`;
        text = item.name;
      }
      const group = svg("g", {
        class: cls,
        "data-seq": item.seq ?? "",
        onclick: item.seq ? () => onPick(item.seq) : null,
      });
      group.append(svg("rect", { x: x0, y, width: w, height: lane - 6, rx: 3 }), svg("title", { text: tip }));
      if (w > text.length * 6.5) {
        group.append(svg("text", { x: x0 + 3, y: y + 14, text }));
      }
      root.append(group);
    }
  });
  const ms = (total * 1000).toFixed(1);
  root.append(svg("text", { x: width - 10, y: lane * 3 + 18, "text-anchor": "end", class: "lane", text: `${ms} ms` }));
  return root;
}
