// Threads: the list (#/threads[/offset=N]), with the columns of `agentsm threads`, and one
// thread as a conversation (#/thread/ID[/TURN]): each turn's message and answer, its status
// and run, what was said while it ran, what it waits on, where it came from, its branches.
"use strict";

const TURN_ENDED = ["done", "failed", "aborted"];

async function threadsPage(main, params) {
  main.append(el("a", { href: "#/", text: "← all runs" }), el("h1", { text: "Threads" }),
    el("p", { class: "muted", text: "Conversations: one run per message (a turn), the last updated first." }));
  const box = el("div", {});
  main.append(box);
  const offset = Number(params.get("offset") || 0);
  try {
    const page = await api(`/api/threads?${new URLSearchParams({ limit: "50", offset: String(offset) }).toString()}`);
    if (!page.threads.length && !offset) {
      box.append(el("p", { class: "muted", "data-testid": "no-threads", text: "No threads in this log; start one with agentsm chat, or builder.thread() in Python." }));
      return;
    }
    box.append(threadsTable(page.threads));
    const nav = el("div", { class: "pager" });
    const go = (to) => { location.hash = `#/threads/offset=${Math.max(to, 0)}`; };
    if (offset > 0) nav.append(el("button", { text: "← newer", onclick: () => go(offset - 50) }));
    if (page.next_offset !== null) nav.append(el("button", { text: "older →", onclick: () => go(page.next_offset) }));
    box.append(nav);
  } catch (e) {
    box.append(el("p", { class: "error", text: e.message }));
  }
}

function threadLink(id, turn, text) {
  const to = `#/thread/${encodeURIComponent(id)}` + (turn ? `/${turn}` : "");
  return el("a", { href: to, class: "mono", text: text || id });
}

function threadsTable(threads) {
  const head = ["thread", "turns", "status", "last message", "last answer / error", "updated", "from"];
  const table = el("table", { class: "runs", "data-testid": "threads" },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", { text: h })))));
  const body = el("tbody", {});
  for (const t of threads) {
    body.append(el("tr", { "data-thread": t.thread_id },
      el("td", {}, threadLink(t.thread_id)),
      el("td", { class: "num", text: t.turns }),
      el("td", {}, statusBadge(t.status)),
      el("td", { class: "wide", text: t.task }),
      el("td", { class: t.error ? "wide error" : "wide", text: t.answer || (t.error ? `error: ${t.error}` : "") }),
      el("td", { text: when(t.updated_at) }),
      el("td", {}, t.branched_from ? threadLink(t.branched_from, t.branch_turn, `${t.branched_from}@${t.branch_turn}`) : "")));
  }
  table.append(body);
  return table;
}

async function threadPage(main, threadId, pickedTurn) {
  const view = { threadId, pickedTurn, box: el("div", { class: "thread" }) };
  main.append(view.box);
  try {
    await loadThread(view);
  } catch (e) {
    clear(main).append(el("h1", { text: "Thread not found" }), el("p", { class: "error", text: e.message }), el("a", { href: "#/threads", text: "← all threads" }));
    return;
  }
  if (pickedTurn) {
    const turn = view.box.querySelector(`[data-turn="${pickedTurn}"]`);
    if (turn) turn.scrollIntoView({ block: "center" });
  }
}

async function loadThread(view) {
  const detail = await api(`/api/threads/${encodeURIComponent(view.threadId)}`);
  const t = detail.thread;
  const byTurn = {};
  for (const b of detail.branches) (byTurn[b.at_turn] = byTurn[b.at_turn] || []).push(b);
  const talk = el("div", { class: "talk", "data-testid": "conversation" });
  for (const turn of detail.turns) talk.append(turnBlock(view, turn, byTurn[turn.turn] || []));
  append(clear(view.box), [
    el("a", { href: "#/threads", text: "← all threads" }),
    el("h1", {}, "Thread ", el("span", { class: "mono", "data-testid": "thread-id", text: t.thread_id }), " ", statusBadge(t.status)),
    el("p", { class: "muted", text: `${t.turns} turn${t.turns === 1 ? "" : "s"} · updated ${when(t.updated_at)} · last turn ` }, el("a", { href: `#/run/${encodeURIComponent(t.last_run)}`, class: "mono", text: t.last_run })),
    t.branched_from ? el("p", { "data-testid": "origin" }, "Branched from thread ", threadLink(t.branched_from, t.branch_turn),
      " at ", threadLink(t.branched_from, t.branch_turn, `turn ${t.branch_turn}`), `: the turns before it are that thread's, turn ${t.branch_turn} on are this one's.`) : null,
    talk,
    branchList(detail.branches),
  ]);
  startThreadLive(view, detail.turns[detail.turns.length - 1]);
}

function turnBlock(view, turn, branches) {
  const block = el("section", { class: turn.turn === view.pickedTurn ? "turn picked" : "turn", "data-testid": "turn", "data-turn": turn.turn, "data-run": turn.run_id },
    el("div", { class: "turn-head" },
      el("strong", { text: `Turn ${turn.turn}` }), " ", statusBadge(turn.status), " ",
      el("a", { href: `#/run/${encodeURIComponent(turn.run_id)}`, class: "mono", "data-testid": "turn-run", title: "the turn's run: its facts, diagram, memory", text: turn.run_id }),
      el("span", { class: "muted", text: ` · ${turn.steps} step${turn.steps === 1 ? "" : "s"} · ${turn.tokens} tokens${turn.model ? " · " + turn.model : ""} · ${when(turn.created_at)}` }),
      turn.shared ? el("span", { class: "muted" }, " · shared with thread ", threadLink(turn.thread_id, turn.turn)) : null),
    said("user", "you", turn.message, turn.images.length ? ` (${turn.images.length} image${turn.images.length === 1 ? "" : "s"})` : ""));
  if (turn.calls.length) {
    block.append(el("p", { class: "calls muted", "data-testid": "calls" }, "tools: ",
      turn.calls.map((c, n) => el("code", { class: c.success ? "" : "error", text: `${n ? ", " : ""}${c.name}(${JSON.stringify(c.args)})${c.success ? "" : " failed"}` }))));
  }
  for (const d of turn.during) block.append(during(d, turn.status === "stopped"));
  if (turn.answer !== null) block.append(said("assistant", "agent", turn.answer, "", "reply"));
  if (turn.error !== null) block.append(said("error", "error", turn.error, "", "reply-error"));
  if (turn.waiting.length) {
    block.append(el("p", { class: "muted", text: `Waiting for a human (state ${turn.state}):` }),
      el("div", { class: "actions" }, waitingBoxes(turn.run_id, turn.waiting, () => loadThread(view))));
  } else if (!TURN_ENDED.includes(turn.status)) {
    const next = turn.status === "stopped" ? `stopped: agentsm resume ${turn.run_id} goes on` : `${turn.status}${turn.state ? " in " + turn.state : ""}: no answer yet`;
    block.append(el("p", { class: "muted", "data-testid": "pending", text: next }));
  }
  for (const b of branches) {
    block.append(el("p", { class: "branched", "data-testid": "branched-here" }, "↳ branched here: thread ", threadLink(b.thread_id, b.at_turn),
      " with ", el("q", { text: b.message }), " ", statusBadge(b.status)));
  }
  return block;
}

function said(role, who, text, extra, testid) {
  return el("div", { class: `message role-${role}`, "data-testid": testid || `said-${role}` },
    el("div", { class: "role", text: who + (extra || "") }), el("pre", { text }));
}

const DURING = {
  steer: ["user", "you, while it ran"],
  question: ["assistant", "agent asked"],
  answer: ["user", "you answered"],
  decision: ["user", "you decided"],
};

function during(d, stoppedNow) {
  if (d.kind === "stop") {
    const then = stoppedNow ? "" : "; resumed, it went on from there";
    return el("p", { class: "muted", "data-testid": "during", "data-kind": "stop", text: `stopped from outside at seq ${d.seq}${d.text ? " (" + d.text + ")" : ""}${then}` });
  }
  const [role, who] = DURING[d.kind] || ["note", d.kind];
  const node = said(role, who, d.text, "", "during");
  node.classList.add("during");
  node.setAttribute("data-kind", d.kind);
  return node;
}

function branchList(branches) {
  const box = el("section", { class: "lineage" }, el("h2", { text: "Branches" }));
  if (!branches.length) {
    box.append(el("p", { class: "muted", text: "No thread was branched from this one (agentsm branch --thread ID --turn N --message TEXT)." }));
    return box;
  }
  const list = el("ul", { class: "tree", "data-testid": "branches" });
  for (const b of branches) {
    list.append(el("li", { "data-thread": b.thread_id }, "└ ", threadLink(b.thread_id), " ", statusBadge(b.status),
      el("span", { class: "muted", text: ` at turn ${b.at_turn}, ${b.turns} turns: ` }), el("q", { text: b.message }),
      el("span", { class: "muted", text: ` ${b.answer || b.error || ""}` })));
  }
  box.append(list);
  return box;
}

// a last turn under way: its facts as they come (the run's live stream), the thread shown again
function startThreadLive(view, last) {
  if (!window.EventSource || !last || TURN_ENDED.includes(last.status) || last.status === "waiting" || last.status === "stopped" || state.live) return;
  const source = new EventSource(`/api/runs/${encodeURIComponent(last.run_id)}/live?after=${last.last_seq}`);
  state.live = source;
  let timer = null;
  const refresh = () => {
    clearTimeout(timer);
    timer = setTimeout(() => loadThread(view).catch((e) => toast(e.message, true)), 300);
  };
  source.addEventListener("fact", refresh);
  source.addEventListener("end", () => {
    source.close();
    if (state.live === source) state.live = null;
    refresh();
  });
}
