// The judging page's keys and clicks: 0/1/2 grade the selected result, up/down select,
// left/right move between questions, s skips. Every POST carries the page's same-origin token.
(function () {
  "use strict";
  const list = document.getElementById("results");
  if (!list) return;
  const token = document.querySelector('meta[name="csrf-token"]').content;
  const base = "/judge/sets/" + list.dataset.set + "/" + list.dataset.number;
  const status = document.getElementById("status");
  const rows = () => Array.from(list.querySelectorAll(".result"));
  let selected = 0;

  function select(index) {
    const all = rows();
    if (!all.length) return;
    selected = Math.max(0, Math.min(index, all.length - 1));
    all.forEach((row, i) => row.classList.toggle("selected", i === selected));
    all[selected].scrollIntoView({ block: "nearest" });
  }

  async function post(path, body) {
    const response = await fetch(base + path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": token },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      const answer = await response.json().catch(() => ({}));
      status.textContent = "not saved: " + (answer.error || response.status);
      throw new Error(status.textContent);
    }
    return response.json();
  }

  async function grade(row, value) {
    await post("/grade", { chunk_id: row.dataset.chunkId, grade: value });
    row.querySelectorAll(".grade").forEach((b) =>
      b.classList.toggle("chosen", Number(b.dataset.grade) === value));
    status.textContent = "saved";
    const next = rows().indexOf(row) + 1;
    if (next < rows().length) select(next);
  }

  function go(offset) {
    const target = Number(list.dataset.number) + offset;
    if (target >= 0 && target < Number(list.dataset.count)) {
      window.location.href = "/judge/sets/" + list.dataset.set + "/" + target;
    }
  }

  async function skip() {
    await post("/skip", {});
    window.location.href = "/judge/sets/" + list.dataset.set;
  }

  list.addEventListener("click", (event) => {
    const row = event.target.closest(".result");
    if (!row) return;
    select(rows().indexOf(row));
    const button = event.target.closest(".grade");
    if (button) grade(row, Number(button.dataset.grade));
  });
  document.getElementById("skip").addEventListener("click", skip);
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const row = rows()[selected];
    if (["0", "1", "2"].includes(event.key) && row) grade(row, Number(event.key));
    else if (event.key === "ArrowDown") select(selected + 1);
    else if (event.key === "ArrowUp") select(selected - 1);
    else if (event.key === "ArrowRight") go(1);
    else if (event.key === "ArrowLeft") go(-1);
    else if (event.key === "s") skip();
    else return;
    event.preventDefault();
  });
})();
