// One run (#/run/ID[/SEQ]): diagram, timeline, facts, memory and conversation at a fact,
// decisions and branches, branch family (a thread's turns as a line), and live facts.
"use strict";

async function runPage(main, runId, pickedSeq) {
  const view = {
    runId, picked: pickedSeq, detail: null, diagram: null,
    head: el("section", { class: "head" }),
    actions: el("section", { class: "actions", "data-testid": "actions" }),
    pictures: el("section", { class: "pictures" }),
    facts: el("section", { class: "facts" }),
    side: el("aside", { class: "side", "data-testid": "side" }),
    lineage: el("section", { class: "lineage" }),
  };
  main.append(view.head, view.actions, view.pictures,
    el("div", { class: "split" }, view.facts, view.side), view.lineage);
  try {
    await loadRun(view);
  } catch (e) {
    clear(main).append(el("h1", { text: "Run not found" }), el("p", { class: "error", text: e.message }), el("a", { href: "#/", text: "← all runs" }));
    return;
  }
  if (view.picked) pick(view, view.picked);
  startLive(view);
}

async function loadRun(view) {
  const detail = await api(`/api/runs/${encodeURIComponent(view.runId)}`);
  const id = encodeURIComponent(detail.run.run_id);
  const [diagram, timeline, lineage] = await Promise.all([
    api(`/api/runs/${id}/diagram`), api(`/api/runs/${id}/timeline`), api(`/api/runs/${id}/lineage`),
  ]);
  view.runId = detail.run.run_id;
  view.detail = detail;
  renderHead(view, detail);
  renderActions(view, detail);
  clear(view.pictures).append(
    el("h2", { text: "State diagram and path" }),
    el("p", { class: "muted", text: pathText(diagram.path) }),
    el("p", { class: "muted", "data-testid": "table-note", text: diagram.note }),
  );
  view.diagram = drawDiagram(diagram);
  view.pictures.append(el("div", { class: "scroll" }, view.diagram),
    el("h2", { text: "Timeline" }), drawTimeline(timeline, (seq) => pick(view, seq)));
  renderFacts(view, detail.facts);
  renderLineage(view, lineage);
  if (view.picked) markPicked(view);
}

function pathText(path) {
  if (!path.length) return "No transition yet.";
  return "Path: " + [path[0].from, ...path.map((p) => p.to)].join(" → ");
}

function renderHead(view, detail) {
  const r = detail.run;
  append(clear(view.head), [
    el("a", { href: "#/", text: "← all runs" }),
    el("h1", {}, "Run ", el("span", { class: "mono", "data-testid": "run-id", text: r.run_id }), " ", statusBadge(r.status)),
    el("p", { class: "task", "data-testid": "task", text: r.task }),
    el("p", { class: "muted" },
      `state ${detail.state} · ${detail.last_seq} facts · ${r.steps} steps · ${r.input_tokens + r.output_tokens} tokens` +
      (r.model ? ` · ${r.model}` : "") + ` · started ${when(r.created_at)}`),
    r.thread ? el("p", { "data-testid": "thread-turn" }, `Turn ${r.thread.turn} of thread `, el("a", { href: `#/thread/${encodeURIComponent(r.thread.id)}/${r.thread.turn}`, class: "mono", text: r.thread.id }),
      r.thread.previous ? el("span", { class: "muted" }, " · after ", el("a", { href: `#/run/${encodeURIComponent(r.thread.previous)}`, class: "mono", text: r.thread.previous }), ` (seq ${r.thread.previous_seq})`) : null,
      r.thread.branched_from ? el("span", { class: "muted" }, " · its thread was branched from thread ", el("a", { href: `#/thread/${encodeURIComponent(r.thread.branched_from)}/${r.thread.turn}`, class: "mono", text: r.thread.branched_from }), ` at turn ${r.thread.turn}`) : null)
    : r.parent_id ? el("p", {}, "Branched from ", el("a", { href: `#/run/${encodeURIComponent(r.parent_id)}/${r.branch_seq}`, class: "mono", text: r.parent_id }), ` at seq ${r.branch_seq} · `,
      el("a", { href: `#/diff/${encodeURIComponent(r.parent_id)}/${encodeURIComponent(r.run_id)}`, text: "compare with its parent" })) : null,
    r.answer ? el("div", { class: "answer", "data-testid": "answer" }, el("strong", { text: "Answer: " }), el("span", { text: r.answer })) : null,
    r.error ? el("div", { class: "answer error" }, el("strong", { text: "Error: " }), el("span", { text: r.error })) : null,
  ]);
}

const STOPPED = ["done", "failed", "stopped", "aborted"];

function renderActions(view, detail) {
  clear(view.actions);
  const disabled = state.info && state.info.allow_write ? null : true;
  if (!STOPPED.includes(detail.run.status)) view.actions.append(stopButton(view, disabled));
  if (!detail.waiting.length) return;
  view.actions.append(el("h2", { text: "Waiting for a human" }),
    ...waitingBoxes(view.runId, detail.waiting, () => loadRun(view)));
}

// what a run waits on, each with its box: approve, reject or modify a call; answer a question.
// `reload` shows the page again once it is recorded. (The run page and the thread page.)
function waitingBoxes(runId, waiting, reload) {
  const disabled = state.info && state.info.allow_write ? null : true;
  return waiting.map((w) => w.kind === "question" ? answerBox(runId, w, disabled, reload) : decisionBox(runId, w, disabled, reload));
}

function decisionBox(runId, w, disabled, reload) {
  const note = el("input", { placeholder: "note (optional)", size: 20 });
  const args = el("textarea", { rows: 2, cols: 40, "data-testid": "modify-args" });
  args.value = JSON.stringify(w.args);
  const decide = async (verdict) => {
    const body = { verdict, call: `#${w.number}`, note: note.value };
    if (verdict === "modified") {
      try { body.args = JSON.parse(args.value); } catch (e) { return toast(`The arguments are not JSON: ${e.message}`, true); }
    }
    try {
      const done = await post(`/api/runs/${encodeURIComponent(runId)}/decision`, body);
      toast(`${verdict}: ${done.next}`);
      await reload();
    } catch (e) {
      toast(e.message, true);
    }
  };
  return el("div", { class: "waiting", "data-testid": "waiting" },
    el("p", {}, el("strong", { text: `#${w.number} ${w.name}` }), " ", el("code", { text: JSON.stringify(w.args) }), el("span", { class: "muted", text: ` — ${w.reason}` })),
    el("button", { "data-testid": "approve", disabled, onclick: () => decide("approved"), text: "Approve" }),
    el("button", { "data-testid": "reject", disabled, onclick: () => decide("rejected"), text: "Reject" }),
    args,
    el("button", { "data-testid": "modify", disabled, onclick: () => decide("modified"), text: "Approve with these arguments" }),
    note,
    disabled ? el("p", { class: "muted", text: "Read-only: start agentsm ui --allow-write to decide here." }) : null);
}

// a question the run asked a person: the answer becomes the call's result (or ctx.ask's value)
function answerBox(runId, w, disabled, reload) {
  const text = el("textarea", { rows: 2, cols: 50, placeholder: "your answer", "data-testid": "answer-text" });
  const send = async () => {
    if (!text.value.trim()) return toast("Write an answer first.", true);
    try {
      const done = await post(`/api/runs/${encodeURIComponent(runId)}/answer`, { text: text.value, call: `#${w.number}` });
      toast(`answered: ${done.next}`);
      await reload();
    } catch (e) {
      toast(e.message, true);
    }
  };
  return el("div", { class: "waiting", "data-testid": "question" },
    el("p", {}, el("strong", { text: `#${w.number} question` }), el("span", { text: ` ${w.reason}` })),
    text,
    el("button", { "data-testid": "answer", disabled, onclick: send, text: "Answer" }),
    disabled ? el("p", { class: "muted", text: "Read-only: start agentsm ui --allow-write to answer here." }) : null);
}

// stops the run wherever it is driven (at its next transition), or at once when nobody drives it
function stopButton(view, disabled) {
  const stop = async () => {
    try {
      const done = await post(`/api/runs/${encodeURIComponent(view.runId)}/stop`, {});
      toast(`stop: ${done.next}`);
      await loadRun(view);
    } catch (e) {
      toast(e.message, true);
    }
  };
  return el("p", { class: "stop" },
    el("button", { "data-testid": "stop", disabled, onclick: stop, text: "Stop the run" }),
    el("span", { class: "muted", text: " it stops at its next transition; agentsm resume goes on" }));
}

function renderFacts(view, facts) {
  const table = el("table", { class: "facts-table", "data-testid": "facts" },
    el("thead", {}, el("tr", {}, ["seq", "step", "state", "fact", "summary"].map((h) => el("th", { text: h })))));
  view.factsBody = el("tbody", {});
  for (const fact of facts) view.factsBody.append(factRow(view, fact));
  table.append(view.factsBody);
  clear(view.facts).append(el("h2", { text: "Facts" }), el("p", { class: "muted", text: "Choose a fact to see the memory and the conversation at that point." }), table);
}

function factRow(view, fact) {
  return el("tr", { class: `fact k-${fact.kind}`, "data-seq": fact.seq, "data-testid": "fact", tabindex: 0, onclick: () => pick(view, fact.seq), onkeydown: (e) => { if (e.key === "Enter") pick(view, fact.seq); } },
    el("td", { class: "num", text: fact.seq }), el("td", { class: "num", text: fact.step }),
    el("td", { text: fact.state }), el("td", { text: fact.kind }), el("td", { class: "wide", text: fact.summary }));
}

function markPicked(view) {
  for (const row of view.factsBody.querySelectorAll("tr")) {
    row.classList.toggle("picked", Number(row.getAttribute("data-seq")) === view.picked);
  }
  const fact = view.detail.facts.find((f) => f.seq === view.picked);
  if (fact && view.diagram) markState(view.diagram, fact.state);
}

async function pick(view, seq) {
  view.picked = seq;
  history.replaceState(null, "", `#/run/${encodeURIComponent(view.runId)}/${seq}`);
  markPicked(view);
  const fact = view.detail.facts.find((f) => f.seq === seq);
  const id = encodeURIComponent(view.runId);
  clear(view.side).append(el("h2", { text: `At seq ${seq}` }));
  try {
    const [memory, talk] = await Promise.all([
      api(`/api/runs/${id}/memory?seq=${seq}`), api(`/api/runs/${id}/conversation?seq=${seq}`),
    ]);
    if (view.picked !== seq) return;
    if (fact) view.side.append(el("details", { class: "fact-json" }, el("summary", { text: `${fact.kind} (the fact in full)` }), el("pre", { text: json(fact.fact) }), fact.metrics && Object.keys(fact.metrics).length ? el("pre", { class: "muted", text: `measured: ${json(fact.metrics)}` }) : null));
    view.side.append(memoryPanel(memory), conversationPanel(talk));
    if (state.info && state.info.allow_write) view.side.append(branchForm(view, seq));
  } catch (e) {
    view.side.append(el("p", { class: "error", text: e.message }));
  }
}

function memoryPanel(m) {
  const mem = m.memory;
  const rows = [
    ["state", m.state], ["step", mem.step], ["retry_count", mem.retry_count],
    ["final_answer", mem.final_answer], ["error", mem.error],
    ["planned_calls", (mem.planned_calls || []).map((c) => `${c.name}(${JSON.stringify(c.args)})`).join(", ")],
    ["pending_approval", (mem.pending_approval || []).join(", ")],
  ];
  const table = el("table", { class: "kv" });
  for (const [k, v] of rows) {
    if (v === null || v === undefined || v === "") continue;
    table.append(el("tr", {}, el("th", { text: k }), el("td", { text: v })));
  }
  const history = el("ol", { class: "history" });
  for (const entry of mem.history || []) {
    history.append(el("li", { class: entry.success ? "ok" : "bad" },
      el("code", { text: `${entry.tool.name}(${JSON.stringify(entry.tool.args)})` }), " → ", el("span", { text: entry.observation })));
  }
  return el("section", { class: "memory", "data-testid": "memory" },
    el("h3", { text: `Memory (state ${m.state})` }), table,
    el("h4", { text: `History (${(mem.history || []).length})` }), history,
    el("details", {}, el("summary", { text: "all of memory (JSON)" }), el("pre", { text: json(mem) })));
}

function conversationPanel(c) {
  const box = el("section", { class: "conversation", "data-testid": "conversation" },
    el("h3", { text: `Conversation (${c.messages.length} messages)` }), el("p", { class: "muted", text: c.note }));
  for (const m of c.messages) {
    const message = el("div", { class: `message role-${m.role}` }, el("div", { class: "role", text: m.role }));
    if (m.content) message.append(el("pre", { text: m.content }));
    for (const call of m.tool_calls || []) message.append(el("pre", { class: "call", text: `→ ${JSON.stringify(call)}` }));
    box.append(message);
  }
  return box;
}

function branchForm(view, seq) {
  const kind = el("select", {}, el("option", { value: "answer", text: "another LLM answer" }), el("option", { value: "tool_result", text: "another tool result" }));
  const text = el("textarea", { rows: 3, cols: 40, placeholder: "the answer or the tool result", "data-testid": "branch-text" });
  // where the branch's request differs from the parent's it stops, unless it may go live (the viewer's --builder)
  const live = el("input", { type: "checkbox", "data-testid": "branch-live" });
  const liveTools = el("input", { type: "checkbox", "data-testid": "branch-live-tools" });
  const form = el("form", { class: "branch", "data-testid": "branch" },
    el("h3", { text: `Branch at seq ${seq}` }), kind, text);
  if (state.info && state.info.builder) form.append(el("label", {}, live, " live LLM "), el("label", {}, liveTools, " live tools "));
  form.append(el("button", { type: "submit", text: "Branch" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await post(`/api/runs/${encodeURIComponent(view.runId)}/branch`, { at: seq, [kind.value]: text.value, live: live.checked, live_tools: liveTools.checked });
      toast(`branch ${made.run_id}: ${made.status}${made.warnings.length ? " — " + made.warnings.join("; ") : ""}`);
      location.hash = `#/run/${encodeURIComponent(made.run_id)}`;
    } catch (e) {
      toast(e.message, true);
    }
  });
  return form;
}

function renderLineage(view, lineage) {
  clear(view.lineage).append(el("h2", { text: "Family: branches and sub-agents" }));
  const list = el("ul", { class: "tree", "data-testid": "lineage" });
  for (const r of lineage.family) {
    const here = r.run_id === view.runId;
    list.append(el("li", { style: `margin-left: ${r.depth * 1.6}em`, class: here ? "here" : "" },
      r.depth ? (r.subagent ? "↳ " : "└ ") : "",
      el("a", { href: `#/run/${encodeURIComponent(r.run_id)}`, class: "mono", text: r.run_id }), " ", statusBadge(r.status),
      r.subagent ? el("span", { class: "badge", "data-testid": "subagent", text: `sub-agent ${r.subagent}` }) : null,
      r.subagent ? el("span", { class: "muted", text: ` started by the call at seq ${r.branch_seq} ` })
        : r.thread ? el("span", { class: "muted" }, ` turn ${r.thread.turn} of thread `, el("a", { href: `#/thread/${encodeURIComponent(r.thread.id)}/${r.thread.turn}`, class: "mono", text: r.thread.id }), r.thread.branched_from ? ` (branched from ${r.thread.branched_from}) ` : " ")
        : r.parent_id ? el("span", { class: "muted", text: ` parted at seq ${r.branch_seq}${r.changes.length ? ", changed " + r.changes.join(", ") : ""} ` }) : " ",
      r.parent_id && !r.subagent && !r.thread ? el("a", { href: `#/diff/${encodeURIComponent(r.parent_id)}/${encodeURIComponent(r.run_id)}`, text: "diff" }) : null,
      el("span", { class: "muted", text: ` ${r.answer || r.error || ""}` })));
  }
  view.lineage.append(list);
}

const ENDED = ["done", "failed", "aborted"];

function startLive(view) {
  if (!window.EventSource || ENDED.includes(view.detail.run.status)) return;
  const source = new EventSource(`/api/runs/${encodeURIComponent(view.runId)}/live?after=${view.detail.last_seq}`);
  state.live = source;
  let timer = null;
  let fresh = false;
  const refresh = () => {
    clearTimeout(timer);
    timer = setTimeout(() => loadRun(view).catch((e) => toast(e.message, true)), 150);
  };
  source.addEventListener("fact", (event) => {
    const fact = JSON.parse(event.data);
    if (view.detail.facts.some((f) => f.seq === fact.seq)) return;
    view.detail.facts.push(fact);
    view.factsBody.append(factRow(view, fact));
    fresh = true;
    refresh();
  });
  source.addEventListener("end", () => {
    source.close();
    if (fresh) refresh();
  });
}
