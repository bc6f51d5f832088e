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
  // What the search box matches: the row (id, where, section, topic, kind, ...) and its panel's quote
  // (with its LaTeX source), statement and correction.
  const searchText = new Map(rows.map((row) => {
    const panel = document.getElementById("claim-" + row.dataset.id);
    const parts = [row.textContent];
    if (panel) {
      for (const el of panel.querySelectorAll(".sidebyside, .correction")) parts.push(el.textContent);
      for (const el of panel.querySelectorAll("[data-tex]")) parts.push(el.dataset.tex);
    }
    return [row, parts.join(" ").toLowerCase()];
  }));

  function apply() {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let n = 0;
    for (const row of rows) {
      let ok = words.every((w) => searchText.get(row).includes(w));
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

  // The panels' measurements travel in one gzipped JSON list (claimcheck/html.py, _pack), unpacked on
  // the first panel opened; each placeholder's template names its entry.
  let packed = null;
  async function unpacked() {
    if (!packed) {
      const text = document.getElementById("packed").textContent.trim();
      if (!text || typeof DecompressionStream === "undefined") return null;
      const bytes = Uint8Array.from(atob(text), (ch) => ch.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      packed = JSON.parse(await new Response(stream).text());
    }
    return packed;
  }
  async function unpackPanel(panel) {
    const boxes = panel.querySelectorAll(".packed:not([data-ready])");
    if (!boxes.length) return;
    const contents = await unpacked();
    for (const box of boxes) {
      const template = box.querySelector("template[data-pack]");
      if (!contents || !template) {
        box.querySelector(".loading").textContent = "This browser cannot unpack these tables (no DecompressionStream).";
        continue;
      }
      box.innerHTML = contents[Number(template.dataset.pack)];
      box.dataset.ready = "true";
    }
    panel.dataset.ready = "true";
  }

  function markCurrent() {
    for (const row of rows) row.classList.remove("current");
    const id = decodeURIComponent(location.hash.slice(1));
    if (id.startsWith("claim-")) {
      const row = document.getElementById("row-" + id.slice(6));
      if (row) row.classList.add("current");
      const panel = document.getElementById(id);
      if (panel) unpackPanel(panel);
    }
  }
  window.addEventListener("hashchange", markCurrent);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && location.hash.startsWith("#claim-")) location.hash = "claims";
  });
  // The LaTeX-source toggle of any panel shows every formula's source in place of its MathML.
  document.addEventListener("change", (event) => {
    if (!event.target.classList.contains("show-tex")) return;
    document.body.classList.toggle("show-tex-source", event.target.checked);
    for (const box of document.querySelectorAll(".show-tex")) box.checked = event.target.checked;
  });

  // The claim graph: hovering a claim lights what it uses and what uses it; the checkbox keeps only
  // the claims that rest on a refuted claim (and the refuted claims under them).
  const graph = document.getElementById("graph");
  if (graph) {
    const nodes = Array.from(graph.querySelectorAll(".node"));
    const paths = Array.from(graph.querySelectorAll("path"));
    const refutedOnly = document.getElementById("graph-refuted");
    function showRefuted() {
      const keep = new Set();
      for (const n of nodes) if (n.classList.contains("on-refuted")) keep.add(n.dataset.id);
      for (const p of paths) {
        if (p.classList.contains("uses") && keep.has(p.dataset.from)) keep.add(p.dataset.to);
      }
      for (const n of nodes) n.classList.toggle("dim", refutedOnly.checked && !keep.has(n.dataset.id));
      for (const p of paths) {
        p.classList.toggle("dim", refutedOnly.checked && !(keep.has(p.dataset.from) && keep.has(p.dataset.to)));
      }
    }
    refutedOnly.addEventListener("change", showRefuted);
    graph.addEventListener("mouseover", (event) => {
      const node = event.target.closest(".node");
      if (!node) return;
      const id = node.dataset.id;
      const near = new Set([id]);
      for (const p of paths) {
        if (p.dataset.from === id) near.add(p.dataset.to);
        if (p.dataset.to === id) near.add(p.dataset.from);
      }
      for (const n of nodes) n.classList.toggle("hl", near.has(n.dataset.id) && n !== node);
    });
  }

  // A kind's count in the findings opens the ranked list with that kind only; closing the list shows all again.
  const allFindings = document.getElementById("findings-all");
  if (allFindings) {
    const ranked = Array.from(allFindings.querySelectorAll("tbody tr"));
    const note = document.getElementById("findings-shown");
    function showKind(kind, name) {
      for (const row of ranked) row.hidden = kind !== null && row.dataset.findingKind !== kind;
      note.textContent = kind === null ? "" : "(showing " + name + " only)";
    }
    document.addEventListener("click", (event) => {
      const link = event.target.closest("a[data-finding-kind]");
      if (!link) return;
      showKind(link.dataset.findingKind, link.closest("tr").firstElementChild.textContent);
      allFindings.open = true;
    });
    allFindings.addEventListener("toggle", () => { if (!allFindings.open) showKind(null); });
  }

  markCurrent();
  apply();
})();
