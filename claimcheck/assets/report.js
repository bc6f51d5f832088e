// The claim-status report page: filters, sorting, and opening a claim's panel from its row.
// Inlined into report/index.html by claimcheck/html.py. No network, no libraries.
(function () {
  "use strict";
  const table = document.getElementById("claims-table");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const search = document.getElementById("q");
  const selects = Array.from(document.querySelectorAll("#filters select"));
  const shown = document.getElementById("shown");
  const none = document.getElementById("none");
  const sections = JSON.parse(document.getElementById("claim-index").textContent);
  let sectionFilter = "";

  function apply() {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let n = 0;
    for (const row of rows) {
      let ok = words.every((w) => row.dataset.search.includes(w));
      for (const s of selects) {
        if (ok && s.value && row.dataset[s.dataset.key] !== s.value) ok = false;
      }
      if (ok && sectionFilter && sections[row.dataset.id] !== sectionFilter) ok = false;
      row.hidden = !ok;
      if (ok) n += 1;
    }
    shown.textContent = n + " of " + rows.length + " claims" + (sectionFilter ? " (section " + sectionFilter + ")" : "");
    none.hidden = n !== 0;
  }

  search.addEventListener("input", apply);
  for (const s of selects) s.addEventListener("change", apply);
  document.getElementById("filters").addEventListener("reset", () => {
    sectionFilter = "";
    setTimeout(apply, 0);
  });

  // Summary cards, count tables and coverage rows set a filter and show the table.
  document.addEventListener("click", (event) => {
    const el = event.target.closest("[data-filter]");
    if (!el) return;
    event.preventDefault();
    const key = el.dataset.filter;
    search.value = "";
    sectionFilter = "";
    for (const s of selects) s.value = "";
    if (key === "section") {
      sectionFilter = el.dataset.value;
    } else {
      const select = document.getElementById("f-" + key);
      if (select) select.value = el.dataset.value;
    }
    apply();
    location.hash = "claims";
  });

  // Sorting: click (or Enter on) a column head; a second click reverses.
  const collator = new Intl.Collator(undefined, { numeric: true });
  function cellKey(row, index) {
    const cell = row.cells[index];
    return cell.dataset.v || cell.textContent.trim();
  }
  function sortBy(th) {
    const index = th.cellIndex;
    const ascending = th.getAttribute("aria-sort") !== "ascending";
    for (const other of table.tHead.rows[0].cells) other.setAttribute("aria-sort", "none");
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const sorted = rows.slice().sort((a, b) => collator.compare(cellKey(a, index), cellKey(b, index)) * (ascending ? 1 : -1));
    for (const row of sorted) body.appendChild(row);
  }
  for (const th of table.tHead.rows[0].cells) {
    th.addEventListener("click", () => sortBy(th));
    th.addEventListener("keydown", (e) => { if (e.key === "Enter") sortBy(th); });
  }

  // A click anywhere on a row opens that claim's panel (the panel is the fragment's target).
  body.addEventListener("click", (event) => {
    const row = event.target.closest("tr");
    if (!row || event.target.closest("a")) return;
    location.hash = "claim-" + row.dataset.id;
  });

  function markCurrent() {
    for (const row of rows) row.classList.remove("current");
    const id = decodeURIComponent(location.hash.slice(1));
    if (id.startsWith("claim-")) {
      const row = document.getElementById("row-" + id.slice(6));
      if (row) row.classList.add("current");
    }
  }
  window.addEventListener("hashchange", markCurrent);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && location.hash.startsWith("#claim-")) location.hash = "claims";
  });
  markCurrent();
  apply();
})();
