// The dashboard's entry point: hash router, token prompt, live refresh loop.
import { ApiError, getToken, setToken } from "./api.js";
import { h, replace } from "./dom.js";
import * as resources from "./views/resources.js";
import * as rollout from "./views/rollout.js";
import * as rollouts from "./views/rollouts.js";
import * as training from "./views/training.js";
import * as workers from "./views/workers.js";

const REFRESH_MS = 3000;
const VIEWS = { rollouts, rollout, resources, training, workers };
const main = document.getElementById("main");
const live = document.getElementById("live");
let current = null; // {name, view, handle}
let refreshing = false;

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const name = parts[0] && VIEWS[parts[0]] ? parts[0] : "rollouts";
  return { name, args: parts.slice(1) };
}

function showError(error) {
  replace(main, h("div", { class: "error", role: "alert" },
    h("strong", {}, error instanceof ApiError ? error.type : "Error"), ": ", String(error.message || error)));
}

function askToken(message) {
  const input = h("input", { type: "password", id: "token", autocomplete: "off", placeholder: "store token" });
  const form = h("form", { class: "token" },
    h("h2", {}, "This store needs a token"),
    h("p", { class: "muted" }, message, " It is kept for this tab only (sessionStorage)."),
    h("label", { for: "token" }, "Token "), input, " ",
    h("button", { type: "submit" }, "Open"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value.trim());
    route();
  });
  replace(main, form);
  input.focus();
}

async function route() {
  if (current && current.handle && current.handle.unmount) current.handle.unmount();
  current = null;
  const { name, args } = parseHash();
  for (const a of document.querySelectorAll("#nav a[data-view]")) {
    a.classList.toggle("active", a.dataset.view === name || (name === "rollout" && a.dataset.view === "rollouts"));
  }
  const view = VIEWS[name];
  const container = h("div", { class: `view view-${name}` });
  replace(main, container);
  try {
    const handle = await view.mount(container, args);
    current = { name, view, handle };
    stamp();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      askToken(getToken() ? "The token you gave was not accepted." : "Enter the token the server was started with.");
    } else {
      showError(error);
    }
  }
}

function stamp() {
  live.textContent = `live · updated ${new Date().toLocaleTimeString()}`;
}

async function tick() {
  if (refreshing || document.hidden || !current || !current.handle || !current.handle.refresh) return;
  refreshing = true;
  try {
    await current.handle.refresh();
    stamp();
  } catch (error) {
    live.textContent = `live · refresh failed: ${error.message}`;
  } finally {
    refreshing = false;
  }
}

window.addEventListener("hashchange", route);
setInterval(tick, REFRESH_MS);
route();
