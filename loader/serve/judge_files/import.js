// The sets list's "Import" form: sends the chosen file's bytes as they are (the server tells the
// format from the content and decodes it, as `loader judgments import` does) with the set's
// name, the Quepid CSV's top rating, the file's name (for the server's messages) and the page's
// same-origin token, which a plain form cannot send. The server's message is shown on a
// refusal (a bad row names the file and the line); on success, a link to the set, and the list
// of sets is read again so that it shows the set.
(function () {
  "use strict";
  const form = document.getElementById("import-form");
  if (!form) return;
  const token = document.querySelector('meta[name="csrf-token"]').content;
  const file = document.getElementById("import-file");
  const name = document.getElementById("import-name");
  const scale = document.getElementById("import-scale");
  const button = document.getElementById("import-button");
  const status = document.getElementById("import-status");

  // A name to start from: the file's, without its extension.
  file.addEventListener("change", () => {
    if (!name.value && file.files.length) {
      name.value = file.files[0].name.replace(/\.[^.]*$/, "").slice(0, 50);
    }
  });

  async function refreshList() {
    const response = await fetch("/judge", { credentials: "same-origin" });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    const list = fresh.querySelector("ul.sets");
    const shown = document.querySelector("ul.sets");
    if (list && shown) shown.replaceWith(document.importNode(list, true));
    document.getElementById("no-sets")?.remove();
  }

  function said(answer) {
    status.className = "";
    status.textContent = (answer.replaced ? "Replaced " : "Imported ") + "query set ";
    const link = document.createElement("a");
    link.href = answer.page;
    link.id = "imported-set";
    link.className = "set-link";
    link.textContent = answer.name;
    const count = (n, what) => n + " " + what + (n === 1 ? "" : "s");
    status.append(link, ": " + count(answer.questions, "question") + ", " + count(answer.grades, "grade") + " (" + answer.format + ").");
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = file.files[0];
    if (!chosen) return;
    button.disabled = true;
    status.className = "";
    status.textContent = "importing " + chosen.name + "…";
    const query = new URLSearchParams({ name: name.value, rating_scale: scale.value, filename: chosen.name });
    try {
      const response = await fetch("/judge/sets/import?" + query, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/octet-stream", "X-CSRF-Token": token },
        body: chosen,
      });
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(answer.error || "HTTP " + response.status);
      said(answer);
      await refreshList().catch(() => {});
    } catch (error) {
      status.className = "error";
      status.textContent = "not imported: " + error.message;
    } finally {
      button.disabled = false;
    }
  });
})();
