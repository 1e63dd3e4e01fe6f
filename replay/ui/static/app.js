// The viewer's pages: #/ (runs), #/run/ID[/SEQ] (one run), #/diff/A/B (two runs),
// #/threads (the conversations), #/thread/ID[/TURN] (one conversation).
"use strict";

const state = { info: null, live: null };

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", async () => {
  try {
    state.info = await api("/api/info");
    document.getElementById("log").textContent = state.info.db;
    const mode = document.getElementById("mode");
    mode.textContent = state.info.allow_write ? "read-write" : "read-only";
    mode.className = state.info.allow_write ? "badge write" : "badge";
  } catch (e) {
    toast(e.message, true);
  }
  route();
});

function route() {
  if (state.live) {
    state.live.close();
    state.live = null;
  }
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const main = clear(document.getElementById("main"));
  if (parts[0] === "run" && parts[1]) runPage(main, parts[1], Number(parts[2]) || null);
  else if (parts[0] === "diff" && parts[1] && parts[2]) diffPage(main, parts[1], parts[2]);
  else if (parts[0] === "threads") threadsPage(main, new URLSearchParams(parts[1] || ""));
  else if (parts[0] === "thread" && parts[1]) threadPage(main, parts[1], Number(parts[2]) || null);
  else runsPage(main, new URLSearchParams(parts[0] === "runs" ? parts[1] || "" : ""));
}
