// parrot-parents inspector: calls the JSON API with a bearer token and renders
// the response. Plain DOM, no library; every value is inserted as text, never as HTML.
"use strict";

(function () {
  const TOKEN_KEY = "parrot-parents-token";
  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem(TOKEN_KEY) || "";
  let lastChildren = [];

  // Explanations of packing's lists (see parrot_parents/retrieval/packing.py).
  const PACKING_WHY = {
    substituted: "wider than the budget allowed: handed over as a window around its hits",
    truncated: "cut to fit the budget",
    cut: "left out: the budget was spent",
    trimmed: "handed over as the sentences closest to the question",
  };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function fmt(value, digits) {
    return typeof value === "number" ? value.toFixed(digits) : "";
  }

  function setStatus(text) {
    $("status").textContent = text;
  }

  function showError(text) {
    $("error").textContent = text;
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
    let data = null;
    try {
      data = await resp.json();
    } catch (e) {
      data = null;
    }
    if (!resp.ok) {
      const message = data && data.error ? data.error : resp.status + " " + resp.statusText;
      const hint = data && data.hint ? " (" + data.hint + ")" : "";
      throw new Error("HTTP " + resp.status + ": " + message + hint);
    }
    return data;
  }

  // ---- bots -------------------------------------------------------------------------

  async function loadBots(event) {
    if (event) event.preventDefault();
    token = $("token").value.trim();
    if ($("remember").checked && token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
    showError("");
    setStatus("Loading the bots…");
    try {
      const data = await api("GET", "/api/v1/bots");
      const select = clear($("bot"));
      let loaded = 0;
      for (const bot of data.bots) {
        const ok = bot.status === "loaded";
        const label = ok
          ? bot.name + " (" + bot.collection + ", expand " + (bot.expand_to_parent ? "on" : "off") +
            ", mode " + bot.expansion_mode + ", limit " + bot.context_search_limit +
            ", budget " + (bot.context_budget === null ? "none" : bot.context_budget) + ")"
          : bot.name + " (failed: " + bot.error + ")";
        select.append(el("option", { value: bot.name, disabled: ok ? null : "" }, label));
        if (ok) loaded += 1;
      }
      const first = data.bots.find((b) => b.status === "loaded");
      if (first) select.value = first.name;
      updateSearchModes(data.bots);
      setStatus(loaded + " bot(s) loaded.");
      $("question").focus();
    } catch (err) {
      showError(err.message);
      setStatus("");
    }
  }

  // A search-mode choice appears only when the server reports one for the bots.
  function updateSearchModes(bots) {
    const modes = new Set();
    for (const bot of bots) {
      if (Array.isArray(bot.search_modes)) bot.search_modes.forEach((m) => modes.add(m));
      if (typeof bot.search_mode === "string") modes.add(bot.search_mode);
    }
    const select = clear($("search-mode"));
    const show = modes.size > 0;
    $("search-mode").hidden = !show;
    $("search-mode-label").hidden = !show;
    if (!show) return;
    select.append(el("option", { value: "" }, "bot's setting"));
    for (const mode of modes) select.append(el("option", { value: mode }, mode));
  }

  // ---- context ----------------------------------------------------------------------

  function requestBody() {
    const body = { question: $("question").value };
    const expand = $("expand").value;
    if (expand) body.expand_to_parent = expand === "true";
    const mode = $("mode").value.trim();
    if (mode) body.mode = mode;
    const budget = $("budget").value.trim();
    if (budget) body.budget = Number(budget);
    const limit = $("limit").value.trim();
    if (limit) body.limit = Number(limit);
    if (!$("search-mode").hidden && $("search-mode").value) {
      body.search_mode = $("search-mode").value;
    }
    return body;
  }

  async function runQuery(event) {
    event.preventDefault();
    const bot = $("bot").value;
    if (!bot) {
      showError("Pick a bot first (Load bots).");
      return;
    }
    showError("");
    setStatus("Retrieving…");
    $("run").disabled = true;
    try {
      const t0 = performance.now();
      const data = await api(
        "POST", "/api/v1/bots/" + encodeURIComponent(bot) + "/context", requestBody()
      );
      render(data);
      setStatus(
        data.passages.length + " passage(s), " + data.meta.context_chars +
        " characters, in " + Math.round(performance.now() - t0) + " ms (round trip)."
      );
    } catch (err) {
      showError(err.message);
      setStatus("");
    } finally {
      $("run").disabled = false;
    }
  }

  function render(data) {
    const meta = data.meta || {};
    lastChildren = meta.children || [];
    renderBudget(meta);
    renderSummary(meta);
    renderTimings(meta);
    renderPacking(meta);
    renderChildren(lastChildren);
    renderPassages(data.passages || [], lastChildren);
    $("raw").textContent = JSON.stringify(data, null, 2);
    $("results").hidden = false;
  }

  function renderBudget(meta) {
    const packing = meta.packing;
    const used = packing ? packing.used : meta.context_chars;
    const line = clear($("budget-line"));
    line.append(
      el("strong", { id: "budget-used" }, String(used)), " characters used",
      packing
        ? el("span", {}, " of a budget of ", el("strong", { id: "budget-total" }, String(packing.budget)))
        : el("span", { id: "budget-total", "data-none": "" }, " (no budget)"),
      " · context ", el("strong", { id: "context-chars" }, String(meta.context_chars)),
      " characters in ", el("strong", { id: "passage-count" }, String(meta.passages)), " passage(s)"
    );
    const share = packing && packing.budget ? Math.min(1, used / packing.budget) : 1;
    $("budget-bar").style.width = (share * 100).toFixed(1) + "%";
  }

  // Every scalar key of meta, so new keys show up without a change here.
  function renderSummary(meta) {
    const dl = clear($("summary"));
    const skip = new Set(["question", "context_chars", "passages"]);
    for (const [key, value] of Object.entries(meta)) {
      if (skip.has(key)) continue;
      if (value !== null && typeof value === "object") continue;
      dl.append(el("dt", {}, key), el("dd", { "data-key": key }, String(value)));
    }
    if (meta.parents) {
      dl.append(el("dt", {}, "parents"), el("dd", { "data-key": "parents" }, String(meta.parents.length)));
    }
    // The bot's scope: every search held to it; rows expansion read outside it were withheld.
    if (meta.scope) {
      const withheld = (meta.scope.withheld || []).length;
      dl.append(el("dt", {}, "scope"), el("dd", { "data-key": "scope" },
        JSON.stringify(meta.scope.filter) + (withheld ? " · " + withheld + " row(s) withheld" : "")));
    }
  }

  function renderTimings(meta) {
    const body = clear($("timings").tBodies[0]);
    for (const [stage, ms] of Object.entries(meta.timings_ms || {})) {
      body.append(el("tr", { "data-stage": stage },
        el("th", { scope: "row" }, stage), el("td", { class: "num" }, fmt(ms, 1))));
    }
    const fallbacks = clear($("fallbacks"));
    const list = meta.fallbacks || [];
    if (!list.length) fallbacks.append(el("li", { class: "ok" }, "No fallback: every stage ran."));
    for (const f of list) {
      fallbacks.append(el("li", { class: "warn" },
        el("strong", {}, "Fallback in " + f.stage + ": "), f.error || "", " → ", f.action || ""));
    }
    const notes = clear($("notes"));
    for (const n of meta.notes || []) notes.append(el("li", {}, n));
  }

  function renderPacking(meta) {
    const list = clear($("packing"));
    const packing = meta.packing;
    if (!packing) {
      list.append(el("li", {}, "No budget on this call: nothing was packed."));
      return;
    }
    let any = false;
    for (const kind of ["substituted", "truncated", "cut"]) {
      for (const id of packing[kind] || []) {
        any = true;
        list.append(el("li", { "data-packing": kind },
          el("strong", {}, kind), " ", el("code", {}, id), ": " + PACKING_WHY[kind]));
      }
    }
    for (const t of packing.trimmed || []) {
      any = true;
      const dropped = el("ul", { class: "dropped" });
      for (const text of t.dropped_text || []) dropped.append(el("li", {}, el("del", {}, text)));
      list.append(el("li", { "data-packing": "trimmed" },
        el("strong", {}, "trimmed"), " ", el("code", {}, t.id),
        ": " + PACKING_WHY.trimmed + "; dropped " + t.dropped.length + " sentence(s), " +
          t.dropped_chars + " characters:", dropped));
    }
    if (packing.trim && packing.trim.startsWith("skipped")) {
      list.append(el("li", {}, "Sentence trimming " + packing.trim));
    }
    if (!any) list.append(el("li", {}, "Everything fitted: nothing substituted, truncated or cut."));
  }

  function renderChildren(children) {
    const table = $("children");
    const has = (key) => children.some((c) => c[key] !== undefined && c[key] !== null);
    const columns = [
      ["rank", "rank", (c) => String(c.rank + 1)],
      ["id", "child", (c) => c.id],
      ["score", "score", (c) => fmt(c.score, 4)],
    ];
    if (has("rerank_score")) columns.push(["rerank_score", "rerank score", (c) => fmt(c.rerank_score, 4)]);
    if (has("dense_rank")) columns.push(["dense_rank", "dense rank", (c) => c.dense_rank == null ? "" : String(c.dense_rank)]);
    if (has("dense_score")) columns.push(["dense_score", "cosine", (c) => c.dense_score == null ? "" : fmt(c.dense_score, 4)]);
    if (has("lexical_rank")) columns.push(["lexical_rank", "lexical rank", (c) => c.lexical_rank == null ? "" : String(c.lexical_rank)]);
    if (has("lexical_score")) columns.push(["lexical_score", "BM25", (c) => c.lexical_score == null ? "" : fmt(c.lexical_score, 3)]);
    columns.push(["span", "characters", (c) =>
      c.start_index == null ? "" : c.start_index + "–" + c.end_index]);
    columns.push(["parent_id", "parent", (c) => c.parent_id || "(none)"]);
    const head = clear(table.tHead.rows[0]);
    for (const [key, label] of columns) {
      head.append(el("th", { scope: "col", "data-col": key }, label));
    }
    const body = clear(table.tBodies[0]);
    for (const child of children) {
      const row = el("tr", { "data-id": child.id });
      for (const [key, , show] of columns) {
        const raw = child[key];
        const value = show(child);
        const cell = el("td", {
          "data-col": key,
          "data-value": typeof raw === "number" ? String(raw) : null,
          class: typeof raw === "number" || key === "rank" ? "num" : null,
        });
        if (key === "parent_id" && child.document_id) {
          cell.append(docLink(child.document_id, value));
        } else {
          cell.textContent = value;
        }
        row.append(cell);
      }
      body.append(row);
    }
  }

  function docLink(documentId, label) {
    const button = el("button", { type: "button", class: "link", title: "show document " + documentId }, label);
    button.addEventListener("click", () => {
      $("document-id").value = documentId;
      showDocument();
    });
    return button;
  }

  // Hit spans of the children inside one passage, in passage coordinates; overlapping
  // spans are merged, each labelled with the ranks of its children.
  function hitRanges(passage, children) {
    const ranges = [];
    if (passage.start_index == null || passage.end_index == null) return ranges;
    for (const c of children) {
      if (c.document_id !== passage.document_id || c.start_index == null || c.end_index == null) continue;
      const s = Math.max(c.start_index, passage.start_index);
      const e = Math.min(c.end_index, passage.end_index);
      if (e > s) ranges.push([s - passage.start_index, e - passage.start_index, [c.rank + 1]]);
    }
    ranges.sort((a, b) => a[0] - b[0]);
    const merged = [];
    for (const r of ranges) {
      const last = merged[merged.length - 1];
      if (last && r[0] < last[1]) {  // overlapping hits merge; touching ones stay apart
        last[1] = Math.max(last[1], r[1]);
        last[2] = last[2].concat(r[2]);
      } else merged.push([r[0], r[1], r[2].slice()]);
    }
    return merged;
  }

  // " (dense #1 0.6120, lexical #3 7.412)": the branch ranks and scores behind a score.
  function branchText(p) {
    const parts = [];
    if (p.dense_rank != null) parts.push("dense #" + p.dense_rank + (p.dense_score == null ? "" : " " + fmt(p.dense_score, 4)));
    if (p.lexical_rank != null) parts.push("lexical #" + p.lexical_rank + (p.lexical_score == null ? "" : " " + fmt(p.lexical_score, 3)));
    return parts.length ? " (" + parts.join(", ") + ")" : "";
  }

  // "Employee Handbook › 4. Pay and Payroll · page 3": where a passage lies.
  function sectionText(p) {
    const parts = [];
    if ((p.section_path || []).length) parts.push(p.section_path.join(" › "));
    if (p.page != null) parts.push(p.page_end != null && p.page_end !== p.page ? "pages " + p.page + "–" + p.page_end : "page " + p.page);
    return parts.join(" · ");
  }

  function renderPassages(passages, children) {
    const list = clear($("passages"));
    passages.forEach((p, i) => {
      const chars = p.text.length;
      const header = el("div", { class: "p-head" },
        el("span", { class: "badge kind-" + p.kind }, p.kind), " ",
        p.document_id ? docLink(p.document_id, p.source || p.document_id) : (p.source || ""),
        " · characters ",
        el("span", { class: "p-span" }, p.start_index == null ? "?" : p.start_index + "–" + p.end_index),
        " · ", el("span", { class: "p-chars" }, String(chars)), " chars",
        p.score == null ? "" : " · best score " + fmt(p.score, 4),
        branchText(p),
        " · hits: ", el("span", { class: "p-hits" }, (p.child_ids || []).length ? p.child_ids.join(", ") : "(none)")
      );
      const where = sectionText(p);
      if (where) header.append(el("div", { class: "p-section" }, where));
      const text = el("div", { class: "p-text" });
      let at = 0;
      for (const [s, e, ranks] of hitRanges(p, children)) {
        if (s > at) text.append(document.createTextNode(p.text.slice(at, s)));
        text.append(el("mark", { title: "hit child rank " + ranks.join(", "), "data-ranks": ranks.join(",") },
          p.text.slice(s, e)));
        at = e;
      }
      if (at < p.text.length) text.append(document.createTextNode(p.text.slice(at)));
      list.append(el("li", { class: "passage", "data-id": p.id, "data-index": i }, header, text));
    });
  }

  // ---- document view ----------------------------------------------------------------

  async function showDocument(event) {
    if (event) event.preventDefault();
    const bot = $("bot").value;
    const documentId = $("document-id").value.trim();
    const out = clear($("document"));
    if (!bot || !documentId) {
      showError("Pick a bot and a document id.");
      return;
    }
    showError("");
    try {
      const data = await api("GET", "/api/v1/bots/" + encodeURIComponent(bot) + "/documents/" +
        encodeURIComponent(documentId));
      renderDocument(out, data);
      out.focus();
    } catch (err) {
      showError(err.message);
    }
  }

  function span(row) {
    return row.start_index == null ? "?" : row.start_index + "–" + row.end_index;
  }

  function renderDocument(out, data) {
    const hits = new Set(lastChildren.map((c) => c.id));
    const c = data.counts;
    out.append(el("p", { id: "doc-counts" },
      el("strong", {}, data.document_id), " in ", el("code", {}, data.collection || ""), ": ",
      c.parent + " whole-document parent(s), " + c.parent_chunk + " parent_chunk(s), " +
      c.child + " child(ren); " + data.rows.length + " row(s)."));
    const parents = data.rows.filter((r) => r.kind !== "child");
    const byParent = new Map(parents.map((p) => [p.id, []]));
    const orphans = [];
    for (const row of data.rows) {
      if (row.kind !== "child") continue;
      const list = byParent.get(row.parent_document_id);
      if (list) list.push(row);
      else orphans.push(row);
    }
    const tree = el("ul", { class: "tree", role: "tree", "aria-label": "rows of " + data.document_id });
    const childItem = (row) => el("li", {
      role: "treeitem", class: hits.has(row.id) ? "hit" : null, "data-id": row.id,
    }, el("code", {}, row.id), " · #" + (row.chunk_index == null ? "?" : row.chunk_index) +
      " · " + span(row) + " · " + row.length + " chars" + (hits.has(row.id) ? " · hit" : ""));
    for (const p of parents) {
      const kids = byParent.get(p.id);
      const sub = el("ul", { role: "group" });
      kids.forEach((k) => sub.append(childItem(k)));
      const details = el("details", { open: parents.length <= 3 || kids.some((k) => hits.has(k.id)) ? "" : null },
        el("summary", {}, el("span", { class: "badge kind-" + p.kind }, p.kind), " ",
          el("code", {}, p.id), " · " + span(p) + " · " + p.length + " chars · " + kids.length + " children"),
        sub);
      tree.append(el("li", { role: "treeitem", "data-id": p.id }, details));
    }
    if (orphans.length) {
      const sub = el("ul", { role: "group" });
      orphans.forEach((k) => sub.append(childItem(k)));
      tree.append(el("li", { role: "treeitem" },
        el("details", { open: "" }, el("summary", {}, "children without a stored parent (" + orphans.length + ")"), sub)));
    }
    out.append(tree);
  }

  document.addEventListener("DOMContentLoaded", () => {
    if (token) {
      $("token").value = token;
      $("remember").checked = true;
    }
    $("connect-form").addEventListener("submit", loadBots);
    $("query-form").addEventListener("submit", runQuery);
    $("doc-form").addEventListener("submit", showDocument);
    $("token").focus();
  });
})();
