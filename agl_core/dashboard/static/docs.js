// Browsable API docs rendered from /v1/agl/openapi.json (offline; no third-party viewer).
import { ApiError, get, setToken } from "./api.js";
import { h, longText, replace } from "./dom.js";

const main = document.getElementById("main");

function resolve(doc, schema) {
  if (schema && schema.$ref) return { name: schema.$ref.split("/").pop(), schema: doc.components.schemas[schema.$ref.split("/").pop()] };
  return { name: null, schema };
}

function schemaBlock(doc, schema) {
  const { name, schema: s } = resolve(doc, schema);
  return h("details", {}, h("summary", {}, name ?? (s && s.type) ?? "schema"), longText(s ?? {}, 4000));
}

function render(doc) {
  const ops = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) ops.push({ path, method, op });
  }
  const tags = [...new Set(ops.map((o) => (o.op.tags || ["other"])[0]))];
  replace(main, h("h1", {}, doc.info.title, " ", h("span", { class: "muted" }, doc.info.version)),
    h("p", { class: "muted" }, doc.info.description ?? ""),
    tags.map((tag) => h("section", {}, h("h2", {}, tag), ops.filter((o) => (o.op.tags || ["other"])[0] === tag).map((o) =>
      h("details", { class: "panel op", id: o.op.operationId },
        h("summary", {}, h("span", { class: "badge" }, o.method.toUpperCase()), " ", h("code", {}, o.path), " — ", o.op.summary ?? ""),
        (o.op.parameters || []).length
          ? h("table", { class: "kv" }, h("tbody", {}, o.op.parameters.map((p) =>
            h("tr", {}, h("th", {}, p.name, p.required ? " *" : ""), h("td", {}, p.in, " · ", JSON.stringify(p.schema ?? {}))))))
          : null,
        o.op.requestBody ? h("div", {}, h("h3", {}, "Body"),
          schemaBlock(doc, Object.values(o.op.requestBody.content)[0].schema)) : null,
        h("h3", {}, "Responses"),
        h("ul", {}, Object.entries(o.op.responses || {}).map(([code, r]) => h("li", {}, code, " ", r.description ?? "",
          r.content ? schemaBlock(doc, Object.values(r.content)[0].schema) : null))))))));
}

async function load() {
  try {
    render(await get("/openapi.json"));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      const input = h("input", { type: "password", placeholder: "store token" });
      const form = h("form", { class: "token" }, h("p", {}, "This store needs a token."), input, h("button", { type: "submit" }, "Open"));
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        setToken(input.value.trim());
        load();
      });
      replace(main, form);
    } else replace(main, h("p", { class: "error" }, String(error.message)));
  }
}
load();
