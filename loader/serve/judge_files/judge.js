// The judging page's keys and clicks: 0/1/2 grade the selected result (with the row's note, if
// any), c says "can't tell" (the row's note is the reason; required), x clears its grade back
// to ungraded (the server deletes it), u undoes the last change (the previous grade, or
// ungraded, is saved again), up/down select, left/right move between questions, s skips, r
// retries a failed save, / goes to the in-page search (keys typed in a form field are its own).
// Every POST carries the page's same-origin token.
//
// A grade is for the result selected when its key was pressed: the selection moves on at once,
// and the grades wait in a queue that is sent one save at a time, in the order pressed, however
// slow the server is. "saved" shows only when the server has stored every grade pressed; a save
// that fails says so and stays at the head of the queue (nothing after it is sent) until r or
// the retry button sends it again. Leaving the question waits for the queue; from the moment it
// is left (a key, a link), keys and clicks no longer grade it: the next page may take a while,
// and a key pressed meanwhile is meant for that page, not for this one. The state sits in
// a bar fixed to the bottom of the window, in view whatever the scroll position, and a row with
// grades still waiting shows how many. A click selects without scrolling: the page never moves
// under the pointer between the two clicks of a double-click.
//
// Several tabs of one question (or one tab left open while another device grades) each keep
// their own queue and undo history. A grade the server has stored is told to this browser's
// other tabs (a BroadcastChannel), and a tab looked at again re-reads the rater's grades of its
// question (GET .../grades): no tab keeps showing a grade replaced since, and undo never saves
// again a grade that another tab has replaced.
(function () {
  "use strict";
  const list = document.getElementById("results");
  if (!list) return;
  const token = document.querySelector('meta[name="csrf-token"]').content;
  const base = "/judge/sets/" + list.dataset.set + "/" + list.dataset.number;
  const status = document.getElementById("status");
  const retryButton = document.getElementById("retry");
  const statusBar = document.getElementById("statusbar");
  const rows = () => Array.from(list.querySelectorAll(".result"));
  const queue = []; // {row, value, note}, oldest first (null: clear, "?": can't tell)
  const history = []; // {row, previous, note}: each change's row and its grade and note before it
  let selected = 0;
  let sending = false;
  let failure = null; // why the head's save failed
  let leaving = false; // this question is being left: nothing more is graded on it
  // The live scores' state: "current" once the newest answer to /scores shows every grade
  // saved; "updating" while a grade waits or an answer is due. Only the newest answer is shown:
  // answers overtaking each other never leave an older one on the page.
  const liveScores = document.getElementById("live-scores");
  let scoresAsked = 0;
  // Grades stored by other tabs and devices. One channel per tenant, rater and set (a tab signed
  // in as someone else hears nothing of these grades); each message names its question and
  // result. Only what the server has confirmed is told: a grade that failed or still waits
  // would show in another tab as stored when it is not.
  const number = Number(list.dataset.number);
  const channelName = JSON.stringify([list.dataset.tenant, list.dataset.rater, list.dataset.set]);
  const channel = "BroadcastChannel" in window
    ? new BroadcastChannel("loader-judge " + channelName) : null;
  let revision = 0; // counts the grades shown changing: a re-read asked before one is stale
  let rereading = false;
  let recheck = false; // re-read once the queue is empty (news came while a grade of ours waited)
  let scoresStale = false; // another tab changed a grade while this one was hidden

  function select(index, scroll = true) {
    const all = rows();
    if (!all.length) return;
    selected = Math.max(0, Math.min(index, all.length - 1));
    all.forEach((row, i) => row.classList.toggle("selected", i === selected));
    if (scroll) all[selected].scrollIntoView({ block: "nearest" });
  }

  function show() {
    if (failure !== null) {
      status.textContent = "not saved: " + failure + " (" + queue.length +
        " grade" + (queue.length === 1 ? "" : "s") + " kept; press r to retry)";
    } else if (queue.length) {
      status.textContent = "saving " + queue.length + "…";
      if (liveScores) liveScores.dataset.state = "updating";
    } else {
      status.textContent = "saved";
    }
    retryButton.hidden = failure === null;
    statusBar.classList.toggle("failed", failure !== null);
    rows().forEach((row) => {
      const waiting = queue.filter((entry) => entry.row === row).length;
      const badge = row.querySelector(".pending-count");
      badge.hidden = waiting === 0;
      badge.textContent = waiting ? "saving " + waiting : "";
    });
  }

  async function post(path, body) {
    let response;
    try {
      response = await fetch(base + path, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": token },
        body: JSON.stringify(body),
      });
    } catch (error) {
      throw new Error("the server cannot be reached");
    }
    if (!response.ok) {
      const answer = await response.json().catch(() => ({}));
      throw new Error(answer.error || "HTTP " + response.status);
    }
    return response.json();
  }

  function mark(row, value, state) {
    row.querySelectorAll(".grade").forEach((b) => {
      const mine = b.dataset.grade === String(value);
      if (state === "saved") b.classList.toggle("chosen", mine);
      if (mine) b.classList.toggle("pending", state === "pending");
    });
    row.classList.toggle("unsaved", state === "failed");
  }

  // The question's nDCG@10 per mode from the grades stored so far (judge_scores), shown on load
  // and each time every grade pressed is stored.
  async function refreshScores() {
    const asked = ++scoresAsked;
    if (liveScores) liveScores.dataset.state = "updating";
    let answer;
    try {
      const response = await fetch(base + "/scores", { credentials: "same-origin" });
      if (!response.ok) return;
      answer = await response.json();
    } catch (error) {
      return;
    }
    if (asked !== scoresAsked || queue.length) return; // a newer answer is due
    if (liveScores) liveScores.dataset.state = "current";
    // A column the page was not rendered with (the learned model's, once one is served).
    Object.keys(answer.scores).forEach((mode) => {
      if (!liveScores || liveScores.querySelector('.score[data-mode="' + CSS.escape(mode) + '"]')) return;
      const span = document.createElement("span");
      span.className = "score";
      span.dataset.mode = mode;
      span.append(mode + " ", document.createElement("b"));
      liveScores.append(span, " ");
    });
    document.querySelectorAll("#live-scores .score").forEach((span) => {
      const score = answer.scores[span.dataset.mode];
      span.querySelector("b").textContent = score === null || score === undefined ? "–" : score.toFixed(3);
    });
  }

  async function send() {
    if (sending) return;
    sending = true;
    while (queue.length && failure === null) {
      const { row, value, note } = queue[0];
      try {
        await post("/grade", { chunk_id: row.dataset.chunkId, grade: value, note: note });
      } catch (error) {
        failure = error.message;
        mark(row, value, "failed");
        break;
      }
      queue.shift();
      mark(row, value, "saved");
      if (channel) {
        channel.postMessage({ number: number, chunk: row.dataset.chunkId, grade: value, note: note });
      }
      show();
    }
    sending = false;
    show();
    if (!queue.length) refreshScores();
    if (!queue.length && recheck) reread();
  }

  // A row's grade as last pressed (saved or waiting), null when ungraded.
  function current(row) {
    const grade = row.dataset.grade;
    return grade === "" ? null : grade === "?" ? "?" : Number(grade);
  }

  function change(row, value, note) {
    revision++;
    row.dataset.grade = value === null ? "" : String(value);
    row.dataset.note = note;
    row.querySelector(".note").value = note;
    queue.push({ row: row, value: value, note: note });
    mark(row, value, "pending");
    show();
    send();
  }

  function grade(row, value, scroll = true) {
    const note = row.querySelector(".note").value.trim();
    if (value === "?" && !note) {
      status.textContent = "can't tell: write why in the row's note first";
      row.querySelector(".note").focus();
      return;
    }
    // The grade the row already has, with its note, is no change: nothing to save or undo (a
    // double-click once queued the grade twice, and the first u seemed to do nothing).
    if (current(row) !== value || note !== row.dataset.note) {
      history.push({ row: row, previous: current(row), note: row.dataset.note });
      change(row, value, note);
    }
    const next = rows().indexOf(row) + 1;
    if (next < rows().length) select(next, scroll);
  }

  function clear(row) {
    if (current(row) === null) return;
    history.push({ row: row, previous: current(row), note: row.dataset.note });
    change(row, null, "");
  }

  function undo() {
    const last = history.pop();
    if (!last) return;
    select(rows().indexOf(last.row));
    change(last.row, last.previous, last.note);
  }

  // ``row``'s grade as another tab or device stored it last: shown as stored, and this tab's
  // undo steps of that row dropped. Undo takes back this tab's own changes: a step's "previous"
  // is the grade the other tab has since replaced, and saving it again would silently overwrite
  // the newer grade with an older one (and steps of other rows stay: those are still this
  // tab's). The note field keeps what the rater is typing in it.
  function adopt(row, value, note) {
    revision++;
    for (let i = history.length - 1; i >= 0; i--) {
      if (history[i].row === row) history.splice(i, 1);
    }
    row.dataset.grade = value === null ? "" : String(value);
    row.dataset.note = note;
    const field = row.querySelector(".note");
    if (document.activeElement !== field) field.value = note;
    mark(row, value, "saved");
  }

  // Another tab of this browser stored a grade. A row with grades of this tab still waiting is
  // left as it is: whichever save the server took last holds, and the re-read once the queue is
  // empty shows it.
  if (channel) {
    channel.onmessage = (event) => {
      const stored = event.data;
      if (!stored || stored.number !== number) return; // another question of the set
      rows().filter((row) => row.dataset.chunkId === stored.chunk).forEach((row) => {
        if (queue.some((entry) => entry.row === row)) recheck = true;
        else adopt(row, stored.grade, stored.note);
      });
      if (document.visibilityState === "visible") refreshScores();
      else scoresStale = true;
    };
  }

  // The rater's grades of this question as the server holds them, shown when the tab is looked
  // at again: a grade stored from another browser or device, or while this tab slept (a
  // BroadcastChannel reaches only this browser's open tabs), replaces the one shown. Not while a
  // grade of this tab waits (the answer could predate it; the queue's end reads again), and an
  // answer that a change here or another tab's message overtook is dropped.
  async function reread() {
    if (leaving || rereading) return;
    if (queue.length) {
      recheck = true;
      return;
    }
    recheck = false;
    rereading = true;
    const asked = revision;
    let answer = null;
    try {
      const response = await fetch(base + "/grades", { credentials: "same-origin" });
      if (response.ok) answer = await response.json();
    } catch (error) {
      // unreachable: the grades shown stay, the next look at the tab asks again
    }
    rereading = false;
    if (!answer || asked !== revision || queue.length || leaving) return;
    let changed = scoresStale;
    rows().forEach((row) => {
      const stored = answer.grades[row.dataset.chunkId];
      const value = stored ? stored.grade : null;
      const note = stored ? stored.note : "";
      if (current(row) === value && row.dataset.note === note) return;
      adopt(row, value, note);
      changed = true;
    });
    scoresStale = false;
    if (changed) refreshScores();
  }

  function retry() {
    if (failure === null) return;
    failure = null;
    mark(queue[0].row, queue[0].value, "pending");
    show();
    send();
  }

  // Resolves once every grade is stored (true), or a save failed (false).
  async function settled() {
    while (queue.length && failure === null) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return queue.length === 0;
  }

  // Leave for ``path`` once every grade is stored; a failed save keeps the rater here.
  async function leave(path, before) {
    if (leaving) return;
    leaving = true;
    if (!(await settled())) {
      leaving = false;
      return;
    }
    status.textContent = "opening…";
    try {
      if (before) await before();
    } catch (error) {
      status.textContent = error.message;
      leaving = false;
      return;
    }
    window.location.href = path;
  }

  function go(offset) {
    const target = Number(list.dataset.number) + offset;
    if (target < 0 || target >= Number(list.dataset.count)) return;
    leave("/judge/sets/" + list.dataset.set + "/" + target);
  }

  function skip() {
    leave("/judge/sets/" + list.dataset.set, async () => {
      try {
        await post("/skip", {});
      } catch (error) {
        throw new Error("not skipped: " + error.message);
      }
    });
  }

  list.addEventListener("click", (event) => {
    const row = event.target.closest(".result");
    if (!row || leaving) return;
    select(rows().indexOf(row), false);
    const button = event.target.closest(".grade");
    if (button) grade(row, button.dataset.grade === "?" ? "?" : Number(button.dataset.grade), false);
  });
  refreshScores();
  list.addEventListener("keydown", (event) => {
    // Enter or Escape in a row's note hands the keys back to grading.
    if (event.target.matches(".note") && (event.key === "Enter" || event.key === "Escape")) {
      event.target.blur();
      event.preventDefault();
    }
  });
  const needStatus = document.getElementById("need-status");
  document.getElementById("save-need").addEventListener("click", async () => {
    try {
      await post("/need", { need: document.getElementById("need").value });
      needStatus.textContent = "need saved";
    } catch (error) {
      needStatus.textContent = "need not saved: " + error.message;
    }
  });
  document.getElementById("skip").addEventListener("click", skip);
  retryButton.addEventListener("click", retry);
  window.addEventListener("beforeunload", (event) => {
    if (queue.length) event.preventDefault(); // the browser asks before grades are lost
    else leaving = true; // a link or the search form: the page is going
  });
  window.addEventListener("pageshow", (event) => {
    if (!event.persisted) return;
    leaving = false; // back to this page from the history
    reread();
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") reread();
  });
  window.addEventListener("focus", reread);
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.target.closest("input, select, textarea")) return; // typing a search, not grading
    if (leaving) {
      event.preventDefault(); // meant for the page that is opening, not for this one
      return;
    }
    if (event.key === "/") {
      document.getElementById("find-text").focus();
      event.preventDefault();
      return;
    }
    const row = rows()[selected];
    if (["0", "1", "2"].includes(event.key) && row) grade(row, Number(event.key));
    else if (event.key === "c" && row) grade(row, "?");
    else if ((event.key === "x" || event.key === "Delete") && row) clear(row);
    else if (event.key === "u") undo();
    else if (event.key === "ArrowDown") select(selected + 1);
    else if (event.key === "ArrowUp") select(selected - 1);
    else if (event.key === "ArrowRight") go(1);
    else if (event.key === "ArrowLeft") go(-1);
    else if (event.key === "s") skip();
    else if (event.key === "r") retry();
    else return;
    event.preventDefault();
  });
})();

// The question list's "take snapshot" form: POSTs the label with the page's token (a plain form
// cannot send the token's header), then shows the list against the new snapshot.
(function () {
  "use strict";
  const form = document.getElementById("take-snapshot");
  if (!form) return;
  const token = document.querySelector('meta[name="csrf-token"]').content;
  const status = document.getElementById("snapshot-status");
  const button = document.getElementById("snapshot-take");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    status.textContent = "taking the snapshot (every question is searched)…";
    try {
      const response = await fetch("/judge/sets/" + form.dataset.set + "/snapshots", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": token },
        body: JSON.stringify({ label: document.getElementById("snapshot-label").value }),
      });
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(answer.error || "HTTP " + response.status);
      window.location.href = answer.page;
    } catch (error) {
      status.textContent = "not taken: " + error.message;
      button.disabled = false;
    }
  });
})();

// The question list's "Delete snapshot" button (shown against a snapshot): asks first, sends the
// DELETE with the page's token, then shows the list without the comparison (its sort kept).
(function () {
  "use strict";
  const button = document.getElementById("snapshot-delete");
  if (!button) return;
  const token = document.querySelector('meta[name="csrf-token"]').content;
  const status = document.getElementById("snapshot-delete-status");
  button.addEventListener("click", async () => {
    if (!window.confirm('Delete the snapshot "' + button.dataset.label + '"? This cannot be undone.')) return;
    button.disabled = true;
    status.textContent = "deleting…";
    try {
      const path = "/judge/sets/" + button.dataset.set + "/snapshots/" + button.dataset.snapshot;
      const response = await fetch(path, {
        method: "DELETE",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": token },
      });
      if (!response.ok) {
        const answer = await response.json().catch(() => ({}));
        throw new Error(answer.error || "HTTP " + response.status);
      }
      const list = new URL(window.location.href);
      list.searchParams.delete("against");
      window.location.href = list.pathname + list.search;
    } catch (error) {
      status.textContent = "not deleted: " + error.message;
      button.disabled = false;
    }
  });
})();
