// The "try settings" page: the form's values go to POST /judge/sets/<id>/trials (with the
// page's same-origin token), and the answer fills the tables: each question's nDCG@10 now and
// tried with its change (the worst loss first), the means and counts, the loader.toml lines.
// Only the fields changed from the applied values are sent, so the lines name what changed.
// Every text is set with textContent: a question is text, never markup.
(function () {
  "use strict";
  const form = document.getElementById("trial-form");
  if (!form) return;
  const token = document.querySelector('meta[name="csrf-token"]').content;
  const status = document.getElementById("trial-status");
  const figure = (value) => (value === null ? "–" : value.toFixed(3));
  const change = (delta, way) =>
    way === "better" ? "▲" + delta.toFixed(3) : way === "worse" ? "▼" + (-delta).toFixed(3) : way === "unchanged" ? "=" : "";
  const cell = (row, text, name) => {
    const td = document.createElement("td");
    td.textContent = text;
    if (name) td.className = name;
    row.appendChild(td);
    return td;
  };

  // The changed fields; one holding commas is a sweep of its values (the server refuses two).
  function trialSettings() {
    const settings = {};
    const sweep = {};
    for (const field of form.querySelectorAll("input, select")) {
      const applied = field.tagName === "SELECT" ? field.querySelector("option[selected]").value : field.dataset.applied;
      const value = field.value.trim();
      if (value.includes(",")) sweep[field.name] = value.split(",").map((part) => part.trim());
      else if (value !== applied) settings[field.name] = value;
    }
    return Object.keys(sweep).length ? { settings: settings, sweep: sweep } : { settings: settings };
  }

  function showSweep(result) {
    const table = document.getElementById("trial-sweep");
    table.hidden = !result.sweep;
    if (!result.sweep) return;
    table.querySelector("th.setting").textContent = result.sweep.setting;
    const body = table.querySelector("tbody");
    body.replaceChildren();
    for (const row of result.sweep.values) {
      const tr = document.createElement("tr");
      const best = row.value === result.sweep.best;
      cell(tr, String(row.value) + (best ? " (best)" : ""), "value");
      cell(tr, figure(row.means.trial), "trial");
      const way = row.means.delta === null ? null : Math.abs(row.means.delta) <= 1e-9 ? "unchanged" : row.means.delta > 0 ? "better" : "worse";
      cell(tr, row.means.delta === null ? "" : change(row.means.delta, way), "mean-change");
      cell(tr, String(row.counts.better), "better");
      cell(tr, String(row.counts.worse), "worse");
      if (best) tr.classList.add("best");
      body.appendChild(tr);
    }
  }

  function show(result) {
    showSweep(result);
    const means = document.getElementById("trial-means");
    const set = (name, text) => (means.querySelector("." + name).textContent = text);
    set("mode-now", result.mode_now);
    set("mode-trial", result.mode_trial);
    set("now", figure(result.means.now));
    set("trial", figure(result.means.trial));
    const way = result.means.delta === null ? null : Math.abs(result.means.delta) <= 1e-9 ? "unchanged" : result.means.delta > 0 ? "better" : "worse";
    set("mean-change", result.means.delta === null ? "" : change(result.means.delta, way));
    for (const count of ["better", "worse", "unchanged"]) set(count, String(result.counts[count]));
    means.hidden = false;
    const rows = result.questions.slice().sort((a, b) =>
      (a.delta === null) - (b.delta === null) || (a.delta || 0) - (b.delta || 0) || a.number - b.number);
    const body = document.querySelector("#trial-questions tbody");
    body.replaceChildren();
    for (const question of rows) {
      const tr = document.createElement("tr");
      tr.dataset.number = String(question.number);
      cell(tr, String(question.number + 1));
      cell(tr, question.question, "question");
      cell(tr, figure(question.now), "now");
      cell(tr, figure(question.trial), "trial");
      const td = cell(tr, question.delta === null ? "" : change(question.delta, question.direction), "delta");
      if (question.direction === "better") td.classList.add("up");
      if (question.direction === "worse") td.classList.add("down");
      body.appendChild(tr);
    }
    document.getElementById("trial-questions").hidden = false;
    document.getElementById("trial-toml").textContent = result.toml.join("\n");
    document.getElementById("trial-apply").hidden = result.toml.length === 0;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const trial = trialSettings();
    if (!trial.sweep && Object.keys(trial.settings).length === 0) {
      status.textContent = "change a setting first: these are the applied values";
      return;
    }
    status.textContent = "trying…";
    try {
      const answer = await fetch("/judge/sets/" + form.dataset.set + "/trials", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": token },
        body: JSON.stringify(trial),
      });
      const result = await answer.json();
      if (!answer.ok) {
        status.textContent = "not tried: " + (result.error || answer.status);
        return;
      }
      show(result);
      status.textContent = "tried on " + result.means.questions + " graded questions" +
        (result.sweep ? "; the best value of " + result.sweep.setting + ", " + result.sweep.best + ", below" : "");
    } catch (error) {
      status.textContent = "not tried: the server did not answer";
    }
  });
})();
