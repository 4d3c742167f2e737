// Resources: every version, a side-by-side diff of two versions (prompt templates line by line), and
// which recent rollouts used which version.
import { getAll, newestRollouts } from "../api.js";
import { fmtTime, h, replace, routeLink } from "../dom.js";

const RECENT = 1000;

function describe(resource) {
  if (!resource || typeof resource !== "object") return String(resource);
  if (resource.resource_type === "prompt_template") return String(resource.template ?? "");
  return JSON.stringify(resource, null, 2);
}

/** Line diff (longest common subsequence) as aligned rows [{left, right, kind}]. */
export function diffLines(a, b) {
  const A = a.split("\n"), B = b.split("\n");
  if (A.length * B.length > 4e6) return A.map((l, i) => ({ left: l, right: B[i] ?? "", kind: l === B[i] ? "same" : "change" }));
  const n = A.length, m = B.length;
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) {
    L[i][j] = A[i] === B[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  }
  const rows = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && A[i] === B[j]) rows.push({ left: A[i++], right: B[j++], kind: "same" });
    else if (j < m && (i >= n || L[i][j + 1] >= L[i + 1][j])) rows.push({ left: null, right: B[j++], kind: "add" });
    else rows.push({ left: A[i++], right: null, kind: "del" });
  }
  return rows;
}

function renderDiff(older, newer) {
  const names = [...new Set([...Object.keys(older.resources), ...Object.keys(newer.resources)])].sort();
  return h("div", { id: "resource-diff" }, names.map((name) => {
    const a = describe(older.resources[name]), b = describe(newer.resources[name]);
    const rows = diffLines(a, b);
    const changed = rows.some((r) => r.kind !== "same");
    return h("div", {}, h("h3", {}, name, changed ? " (changed)" : " (same)"),
      h("div", { class: "diff" },
        h("div", { class: "muted" }, older.resources_id), h("div", { class: "muted" }, newer.resources_id),
        rows.flatMap((r) => [
          h("div", { class: r.left === null ? "empty" : r.kind === "same" ? "" : "del" }, r.left ?? ""),
          h("div", { class: r.right === null ? "empty" : r.kind === "same" ? "" : "add" }, r.right ?? ""),
        ])));
  }));
}

export async function mount(container) {
  const versions = await getAll("/resources", { sort_by: "create_time", sort_order: "asc" }, 200);
  const recent = await newestRollouts({}, RECENT);
  const used = new Map();
  for (const r of recent.items) {
    const key = r.resources_id ?? "(none)";
    if (!used.has(key)) used.set(key, []);
    used.get(key).push(r);
  }
  const pick = (id, index) => h("select", { id }, versions.map((v, i) =>
    h("option", { value: v.resources_id, selected: i === index }, `#${i + 1} · ${v.resources_id}`)));
  const left = pick("diff-left", Math.max(0, versions.length - 2));
  const right = pick("diff-right", versions.length - 1);
  const diffBox = h("div", {});
  const byId = new Map(versions.map((v) => [v.resources_id, v]));
  const showDiff = () => {
    if (versions.length) replace(diffBox, renderDiff(byId.get(left.value), byId.get(right.value)));
  };
  left.addEventListener("change", showDiff);
  right.addEventListener("change", showDiff);
  replace(container,
    h("h1", {}, "Resources"),
    h("table", { id: "resources" }, h("thead", {}, h("tr", {}, ["#", "Id", "Updates", "Created", "Updated", "Resources",
      `Used by (last ${recent.items.length} rollouts)`].map((t) => h("th", {}, t)))),
    h("tbody", {}, versions.map((v, i) => {
      const users = used.get(v.resources_id) || [];
      return h("tr", {}, h("td", {}, `#${i + 1}`), h("td", {}, v.resources_id), h("td", { class: "num" }, v.version),
        h("td", {}, fmtTime(v.create_time)),
        h("td", {}, fmtTime(v.update_time)),
        h("td", {}, Object.entries(v.resources).map(([k, r]) => `${k}: ${r.resource_type ?? "?"}`).join(", ")),
        h("td", {}, `${users.length} `, users.slice(0, 3).map((r) => [routeLink(r.rollout_id, "rollout", r.rollout_id), " "])));
    }))),
    h("h2", {}, "Compare two versions"),
    versions.length ? h("div", { class: "filters" }, left, " → ", right) : h("p", { class: "muted" }, "No resources yet."),
    diffBox);
  showDiff();
  return {};
}
