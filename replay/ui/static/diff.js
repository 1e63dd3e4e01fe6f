// Two runs compared (#/diff/A/B), side by side from where they part.
"use strict";

async function diffPage(main, a, b) {
  main.append(el("a", { href: "#/", text: "← all runs" }), el("h1", { text: "Two runs compared" }));
  try {
    const d = await api(`/api/diff?${new URLSearchParams({ a, b }).toString()}`);
    main.append(el("p", { "data-testid": "relation", text: `A ${d.a} · B ${d.b} — ${d.relation}` }),
      el("p", { text: d.parts_at === null ? "Their facts are identical." : `Same facts up to seq ${d.parts_at - 1}; they part at seq ${d.parts_at}.` }));
    const outcomes = el("table", { class: "kv outcomes" }, el("tr", {}, el("th", {}), el("th", { text: "A" }), el("th", { text: "B" })));
    for (const o of d.outcomes) {
      outcomes.append(el("tr", { class: o.a === o.b ? "" : "differs" }, el("th", { text: o.field }), el("td", { text: o.a }), el("td", { text: o.b })));
    }
    main.append(outcomes);
    const column = (title, id, facts) => el("div", { class: "column" },
      el("h2", {}, `${title} `, el("a", { href: `#/run/${encodeURIComponent(id)}`, class: "mono", text: id })),
      el("table", { class: "facts-table" }, el("tbody", {}, facts.map((f) => el("tr", {},
        el("td", { class: "num", text: f.seq }), el("td", { text: f.kind }), el("td", { class: "wide", text: f.summary }))))));
    main.append(el("div", { class: "sidebyside", "data-testid": "diff" }, column("A", d.a, d.facts_a), column("B", d.b, d.facts_b)));
  } catch (e) {
    main.append(el("p", { class: "error", text: e.message }));
  }
}
