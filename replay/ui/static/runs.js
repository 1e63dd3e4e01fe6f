// The runs page (#/ and #/runs/FILTERS): the catalog with filters, pages and full-text search;
// a thread's turn says which (a link to the thread page).
"use strict";

async function runsPage(main, params) {
  const form = el("form", { class: "filters", "data-testid": "filters" });
  const status = el("select", { name: "status" }, el("option", { value: "", text: "any status" }),
    ...(state.info ? state.info.statuses : []).map((s) => el("option", { value: s, text: s })));
  status.value = params.get("status") || "";
  const field = (name, placeholder) =>
    el("input", { name, placeholder, value: params.get(name) || "", size: 14 });
  form.append(status, field("task", "task contains"), field("model", "model"),
    field("since", "since (2h, 1d, 2026-11-22)"), el("button", { type: "submit", text: "Filter" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) next.set(k, v);
    location.hash = `#/runs/${next.toString()}`;
  });
  const search = el("form", { class: "filters" },
    el("input", { name: "q", placeholder: "search facts (full text)", size: 30, value: params.get("q") || "" }),
    el("button", { type: "submit", text: "Search" }));
  search.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = new FormData(search).get("q");
    location.hash = q ? `#/runs/${new URLSearchParams({ q }).toString()}` : "#/";
  });
  main.append(el("h1", {}, "Runs ", el("a", { href: "#/threads", class: "small", "data-testid": "threads-link", text: "threads →" })), form, search);
  const box = el("div", {});
  main.append(box);
  if (params.get("q")) return searchResults(box, params.get("q"));
  const query = new URLSearchParams(params);
  query.set("limit", "50");
  try {
    const page = await api(`/api/runs?${query.toString()}`);
    box.append(runsTable(page.runs));
    const nav = el("div", { class: "pager" });
    const offset = Number(params.get("offset") || 0);
    const go = (to) => {
      const next = new URLSearchParams(params);
      next.set("offset", String(Math.max(to, 0)));
      location.hash = `#/runs/${next.toString()}`;
    };
    if (offset > 0) nav.append(el("button", { text: "← newer", onclick: () => go(offset - 50) }));
    if (page.next_offset !== null) nav.append(el("button", { text: "older →", onclick: () => go(page.next_offset) }));
    box.append(nav);
    if (!page.runs.length) box.append(el("p", { class: "muted", text: "No runs match. Record one with: agentsm demo" }));
  } catch (e) {
    box.append(el("p", { class: "error", text: e.message }));
  }
}

function runsTable(runs) {
  const head = ["run", "task", "status", "steps", "tokens", "model", "started", "parent", "answer / error"];
  const table = el("table", { class: "runs", "data-testid": "runs" },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", { text: h })))));
  const body = el("tbody", {});
  for (const r of runs) {
    body.append(el("tr", { "data-run": r.run_id },
      el("td", {}, el("a", { href: `#/run/${encodeURIComponent(r.run_id)}`, class: "mono", text: r.run_id })),
      el("td", { class: "wide", text: r.task }),
      el("td", {}, statusBadge(r.status)),
      el("td", { class: "num", text: r.steps }),
      el("td", { class: "num", text: r.input_tokens + r.output_tokens }),
      el("td", { text: r.model || "" }),
      el("td", { text: when(r.created_at) }),
      el("td", {}, r.parent_id ? el("a", { href: `#/run/${encodeURIComponent(r.parent_id)}`, class: "mono", text: `${r.parent_id}@${r.branch_seq}` }) : "",
        r.subagent ? el("span", { class: "muted", text: ` sub-agent ${r.subagent}` }) : null,
        r.thread ? turnOf(r.thread) : null),
      el("td", { class: r.error ? "wide error" : "wide", text: r.answer || (r.error ? `error: ${r.error}` : "") }),
    ));
  }
  table.append(body);
  return table;
}

// a thread's turn: which one, of which thread (the thread page one click away)
function turnOf(mark) {
  return el("span", { class: "turn-of", "data-testid": "turn-of" }, ` turn ${mark.turn} of thread `,
    el("a", { href: `#/thread/${encodeURIComponent(mark.id)}/${mark.turn}`, class: "mono", text: mark.id }));
}

async function searchResults(box, q) {
  try {
    const found = await api(`/api/search?${new URLSearchParams({ q }).toString()}`);
    if (!found.available) return box.append(el("p", { class: "muted", text: "This log has no full-text search." }));
    if (found.unindexed) box.append(el("p", { class: "muted", text: `${found.unindexed} facts are not in the search index yet and were read one by one (run agentsm search once with write access to index them).` }));
    const table = el("table", { class: "runs" }, el("thead", {}, el("tr", {}, ["run", "seq", "fact", "match"].map((h) => el("th", { text: h })))));
    const body = el("tbody", {});
    for (const hit of found.hits) {
      body.append(el("tr", {},
        el("td", {}, el("a", { href: `#/run/${encodeURIComponent(hit.run_id)}/${hit.seq}`, class: "mono", text: hit.run_id })),
        el("td", { class: "num", text: hit.seq }),
        el("td", { text: hit.kind }),
        el("td", { class: "wide", text: hit.snippet })));
    }
    table.append(body);
    box.append(found.hits.length ? table : el("p", { class: "muted", text: "Nothing matches." }));
  } catch (e) {
    box.append(el("p", { class: "error", text: e.message }));
  }
}
