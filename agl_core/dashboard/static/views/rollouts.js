// Rollouts: one page at a time from GET /v1/agl/rollouts (server-side status/mode/id/input filters,
// sorting, paging). A server predating `mode_in` or `input_contains` gets that filter on the page shown.
import { get, newestRollouts } from "../api.js";
import { badge, fmtDuration, fmtNumber, fmtTime, h, replace, routeLink } from "../dom.js";
import { rewardsOf } from "../rewards.js";

const STATUSES = ["queuing", "preparing", "running", "succeeded", "failed", "requeuing", "cancelled"];
const MODES = ["", "train", "val", "test"];
const COLUMNS = [
  ["rollout_id", "Rollout", true], ["status", "Status", true], ["mode", "Mode", true],
  ["resources_id", "Resources", true], ["reward", "Reward", false], ["attempts", "Attempts", false],
  ["duration", "Duration", false], ["start_time", "Started", true], ["input", "Input", false],
];
const PAGE_SIZES = [10, 25, 50, 100, 200];
// Kept between visits of the view (module state), so going back to the list keeps the filters.
// sortBy "" keeps the store's own order (creation order, served from its primary key: fast on any size).
const state = { status: [], mode: "", idContains: "", inputContains: "", sortBy: "", order: "desc",
  offset: 0, limit: 50 };

// Which of agl's newer filters the server knows (`mode_in`, `input_contains`: query parameters of
// GET /v1/agl/rollouts); read once from its OpenAPI document. Those it lacks are matched on the page shown.
let serverFilters = null;
async function filtersOnServer() {
  if (serverFilters === null) {
    const doc = await get("/openapi.json");
    const names = new Set((doc.paths?.["/v1/agl/rollouts"]?.get?.parameters ?? []).map((p) => p.name));
    serverFilters = { mode: names.has("mode_in"), input: names.has("input_contains") };
  }
  return serverFilters;
}

function serverFilterNames(onServer) {
  return ["status", ...(onServer.mode ? ["mode"] : []), "id", ...(onServer.input ? ["input"] : [])].join("/");
}

function inputText(input) {
  if (typeof input === "string") return input;
  try {
    return JSON.stringify(input) ?? "";
  } catch {
    return String(input);
  }
}

export async function mount(container) {
  const summary = h("p", { class: "muted", id: "rollouts-summary" });
  const orderNote = h("button", { type: "button", id: "newest-first", title: "Back to the store's order" }, "newest first");
  const tbody = h("tbody", {});
  const headRow = h("tr", {});
  const pageInfo = h("span", { class: "muted" });
  let total = 0;

  const statusSelect = h("select", { multiple: true, id: "filter-status", title: "Status (ctrl-click: several)" },
    STATUSES.map((s) => h("option", { value: s, selected: state.status.includes(s) }, s)));
  const modeSelect = h("select", { id: "filter-mode" },
    MODES.map((m) => h("option", { value: m, selected: state.mode === m }, m || "any mode")));
  const idInput = h("input", { id: "filter-id", placeholder: "id contains", value: state.idContains });
  const inputInput = h("input", { id: "filter-input", placeholder: "input contains", value: state.inputContains });
  const sizeSelect = h("select", { id: "page-size" },
    PAGE_SIZES.map((n) => h("option", { value: n, selected: n === state.limit }, `${n} / page`)));

  function readFilters() {
    state.status = [...statusSelect.selectedOptions].map((o) => o.value);
    state.mode = modeSelect.value;
    state.idContains = idInput.value.trim();
    state.inputContains = inputInput.value.trim();
    state.limit = Number(sizeSelect.value);
  }
  const onFilter = () => {
    readFilters();
    state.offset = 0;
    load();
  };
  statusSelect.addEventListener("change", onFilter);
  modeSelect.addEventListener("change", onFilter);
  sizeSelect.addEventListener("change", onFilter);
  let typing = null;
  for (const input of [idInput, inputInput]) {
    input.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(onFilter, 300);
    });
  }

  for (const [key, label, sortable] of COLUMNS) {
    const th = h("th", { class: sortable ? "sortable" : "", "data-col": key }, label);
    if (key === state.sortBy) th.classList.add("sorted", state.order);
    if (sortable) {
      th.addEventListener("click", () => {
        state.order = state.sortBy === key && state.order === "desc" ? "asc" : "desc";
        state.sortBy = key;
        for (const other of headRow.children) other.classList.remove("sorted", "asc", "desc");
        th.classList.add("sorted", state.order);
        orderNote.disabled = false;
        load();
      });
    }
    headRow.appendChild(th);
  }

  orderNote.disabled = !state.sortBy;
  orderNote.addEventListener("click", () => {
    state.sortBy = "";
    state.order = "desc";
    for (const other of headRow.children) other.classList.remove("sorted", "asc", "desc");
    orderNote.disabled = true;
    load();
  });
  const prev = h("button", { type: "button", id: "prev" }, "← newer");
  const next = h("button", { type: "button", id: "next" }, "older →");
  prev.addEventListener("click", () => {
    state.offset = Math.max(0, state.offset - state.limit);
    load();
  });
  next.addEventListener("click", () => {
    if (state.offset + state.limit < total) state.offset += state.limit;
    load();
  });

  replace(container,
    h("h1", {}, "Rollouts"), summary,
    h("div", { class: "filters" }, statusSelect, modeSelect, idInput, inputInput, sizeSelect, orderNote),
    h("table", { id: "rollouts" }, h("thead", {}, headRow), tbody),
    h("div", { class: "pager" }, prev, pageInfo, next));

  // Newest first unless a column is sorted (then the server sorts).
  async function fetchPage(filters) {
    if (!state.sortBy) return newestRollouts(filters, state.limit, state.offset);
    return get("/rollouts", { ...filters, sort_by: state.sortBy, sort_order: state.order, limit: state.limit,
      offset: state.offset });
  }

  let generation = 0;
  async function load() {
    const mine = ++generation;
    const onServer = await filtersOnServer();
    const filters = { status_in: state.status, rollout_id_contains: state.idContains };
    if (onServer.mode && state.mode) filters.mode_in = [state.mode];
    if (onServer.input && state.inputContains) filters.input_contains = state.inputContains;
    const [page, stats] = await Promise.all([fetchPage(filters), get("/statistics")]);
    if (mine !== generation) return;
    total = page.total;
    let rows = page.items;
    const onPage = [];
    if (state.mode && !onServer.mode) {
      rows = rows.filter((r) => r.mode === state.mode);
      onPage.push("mode");
    }
    if (state.inputContains && !onServer.input) {
      const wanted = state.inputContains.toLowerCase();
      rows = rows.filter((r) => inputText(r.input).toLowerCase().includes(wanted));
      onPage.push("input");
    }
    summary.textContent = `${stats.total_rollouts} rollouts in the store · ${stats.total_spans} spans · ` +
      `${page.total} match the ${serverFilterNames(onServer)} filters` +
      (onPage.length ? ` · ${rows.length} of this page match ${onPage.join("/")}` : "");
    const last = Math.min(state.offset + page.items.length, page.total);
    pageInfo.textContent = page.total ? `${state.offset + 1}–${last} of ${page.total}` : "no rollouts";
    prev.disabled = state.offset === 0;
    next.disabled = state.offset + state.limit >= page.total;
    const cells = [];
    tbody.dataset.state = "rewards-loading";
    replace(tbody, rows.map((r) => {
      const attempt = r.attempt || null;
      const end = r.end_time ?? (r.status === "running" || r.status === "preparing" ? Date.now() / 1000 : null);
      const rewardCell = h("td", { class: "num reward" }, "…");
      cells.push(rewardCell);
      return h("tr", { "data-rollout": r.rollout_id },
        h("td", {}, routeLink(r.rollout_id, "rollout", r.rollout_id)),
        h("td", {}, badge(r.status)),
        h("td", {}, r.mode ?? "—"),
        h("td", {}, r.resources_id ?? "—"),
        rewardCell,
        h("td", { class: "num" }, attempt ? attempt.sequence_id : 0),
        h("td", { class: "num" }, r.start_time && end ? fmtDuration(end - r.start_time) : "—"),
        h("td", {}, fmtTime(r.start_time)),
        h("td", { class: "input", title: inputText(r.input).slice(0, 500) }, inputText(r.input).slice(0, 80)));
    }));
    const rewards = await rewardsOf(rows);
    if (mine !== generation) return;
    rewards.forEach((value, i) => {
      cells[i].textContent = fmtNumber(value);
    });
    tbody.dataset.state = "complete"; // every cell filled (tests and the first-paint bench wait for this)
  }

  await load();
  return { refresh: load };
}
