// Rollout detail: attempts on a timeline, the span tree of the chosen attempt (virtual scrolling, so
// thousands of spans stay fast), a span's details, LLM calls as a chat, rewards, and agl doctor's verdict.
import { ApiError, get } from "../api.js";
import { append, badge, fmtDuration, fmtNumber, fmtTime, h, longText, replace, routeLink } from "../dom.js";
import { llmCall, spanException, spanRewards, spanTree } from "../spans.js";

const ROW_HEIGHT = 24;
const SPAN_PAGE = 500;
const FINAL = new Set(["succeeded", "failed", "cancelled", "timeout", "unresponsive"]);

/** Before agl doctor has answered: does the span look like an LLM-call record? */
function looksLikeLlmSpan(span) {
  const a = span.attributes || {};
  return "gen_ai.input.messages" in a || "prompt_token_ids" in a || "gen_ai.prompt.0.role" in a ||
    "gen_ai.output.messages" in a;
}

/** The LLM tags of a span: one "LLM" per model call (on the record agl reads), "same call" on its other
 * records (a framework's own span, the tracer's beside the proxy's), from agl doctor's llm_records. */
function llmTags(span, records) {
  if (!records) return looksLikeLlmSpan(span) ? [h("span", { class: "tag llm" }, "LLM")] : [];
  if (!Object.hasOwn(records, span.span_id)) return [];
  const read = records[span.span_id];
  if (read === span.span_id) return [h("span", { class: "tag llm" }, "LLM")];
  return [h("span", { class: "tag llm-copy", title: `another record of the LLM call read from span ${read}` },
    "same call")];
}

function kvTable(entries) {
  return h("table", { class: "kv" }, h("tbody", {}, entries.map(([k, v]) =>
    h("tr", {}, h("th", {}, k), h("td", {}, v instanceof Node ? v : longText(v ?? "—", 2000))))));
}

function renderChat(call) {
  const messages = [...call.input.map((m) => [m, "input"]), ...call.output.map((m) => [m, "output"])];
  return h("div", { class: "chat" }, messages.map(([m]) => {
    const role = ["system", "user", "assistant", "tool"].includes(m.role) ? m.role : "other";
    return h("div", { class: `msg ${role}` },
      h("div", { class: "role" }, m.role, m.toolCallId ? ` · ${m.toolCallId}` : ""),
      m.text ? longText(m.text, 3000) : null,
      m.toolCalls.map((c) => h("div", { class: "toolcall" }, "→ ", c.name, "(",
        typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}), ")")));
  }));
}

function renderTokens(call) {
  const box = h("div", { class: "tokens" });
  const button = h("button", { type: "button", id: "show-tokens" }, "show token ids and logprobs");
  button.addEventListener("click", () => {
    button.remove();
    append(box, [
      h("h3", {}, `prompt token ids (${call.promptIds ? call.promptIds.length : 0})`),
      longText(call.promptIds ? call.promptIds.join(" ") : "none recorded", 4000),
      h("h3", {}, `response token ids (${call.responseIds ? call.responseIds.length : 0})`),
      longText(call.responseIds ? call.responseIds.join(" ") : "none recorded", 4000),
      h("h3", {}, "logprobs"),
      longText(call.logprobs ?? "none recorded", 4000),
    ]);
  });
  return h("div", {}, button, box);
}

function renderSpan(span) {
  const out = h("div", { id: "span-detail" });
  const dur = span.start_time && span.end_time ? fmtDuration(span.end_time - span.start_time) : "—";
  append(out, [h("h2", {}, span.name), kvTable([
    ["span id", span.span_id], ["parent", span.parent_id ?? "—"], ["sequence", String(span.sequence_id)],
    ["started", fmtTime(span.start_time)], ["duration", dur],
    ["status", span.status ? `${span.status.status_code}${span.status.description ? ": " + span.status.description : ""}` : "—"],
  ])]);
  const call = llmCall(span);
  if (call) {
    append(out, [h("h2", {}, "LLM call", call.model ? ` · ${call.model}` : "",
      call.usage.input !== null ? ` · ${call.usage.input} → ${call.usage.output ?? "?"} tokens` : ""),
    renderChat(call), renderTokens(call)]);
  }
  const rewards = spanRewards(span);
  if (rewards.length) {
    append(out, [h("h2", {}, "Reward"), kvTable(rewards.map((r) => [r.name, fmtNumber(r.value)]))]);
  }
  const exc = spanException(span);
  if (exc) append(out, [h("h2", {}, "Exception"), kvTable([["type", exc.type], ["message", exc.message], ["stack", exc.stacktrace]])]);
  const attrs = Object.entries(span.attributes || {});
  append(out, [h("h2", {}, `Attributes (${attrs.length})`), kvTable(attrs.map(([k, v]) => [k, v]))]);
  if ((span.events || []).length) {
    append(out, [h("h2", {}, `Events (${span.events.length})`), longText(span.events, 3000)]);
  }
  return out;
}

/** A scrolling list that renders only the rows in view. */
function virtualTree(onSelect) {
  const box = h("div", { class: "tree", id: "span-tree", tabindex: "0" });
  const spacer = h("div", { style: { position: "relative" } });
  box.appendChild(spacer);
  let rows = [];
  let range = [0, 1];
  let selected = null;
  let spans = [];
  let records = null;
  function draw() {
    const first = Math.max(0, Math.floor(box.scrollTop / ROW_HEIGHT) - 10);
    const last = Math.min(rows.length, first + Math.ceil((box.clientHeight || 480) / ROW_HEIGHT) + 20);
    spacer.style.height = `${rows.length * ROW_HEIGHT}px`;
    const [t0, t1] = range;
    const width = Math.max(t1 - t0, 1e-9);
    const nodes = [];
    for (let i = first; i < last; i++) {
      const { span, depth } = rows[i];
      const start = span.start_time ?? t0;
      const end = span.end_time ?? start;
      const tags = llmTags(span, records);
      if (spanRewards(span).length) tags.push(h("span", { class: "tag reward" }, "reward"));
      if (span.status && span.status.status_code === "ERROR") tags.push(h("span", { class: "tag exc" }, "error"));
      const row = h("div", {
        class: "tree-row" + (span.span_id === selected ? " selected" : ""),
        "data-span": span.span_id,
        style: { top: `${i * ROW_HEIGHT}px`, "padding-left": `${6 + depth * 14}px` },
      }, h("span", { class: "tree-name", title: span.name }, span.name), tags,
      h("span", { class: "tree-dur" }, span.end_time && span.start_time ? fmtDuration(end - start) : ""),
      h("span", { class: "tree-bar" }, h("span", {
        style: { left: `${((start - t0) / width) * 100}%`, width: `${Math.max(((end - start) / width) * 100, 0.5)}%` },
      })));
      row.addEventListener("click", () => {
        selected = span.span_id;
        draw();
        onSelect(span);
      });
      nodes.push(row);
    }
    spacer.replaceChildren(...nodes);
  }
  box.addEventListener("scroll", () => requestAnimationFrame(draw));
  return {
    element: box,
    /** Show `list`; `llmRecords` (agl doctor's llm_records, or null) folds each call's records. */
    set(list, llmRecords = records) {
      spans = list;
      records = llmRecords;
      rows = spanTree(spans, records || {});
      box.style.height = `${Math.min(480, Math.max(rows.length, 1) * ROW_HEIGHT + 4)}px`;
      const starts = spans.map((s) => s.start_time).filter((t) => t);
      const ends = spans.map((s) => s.end_time ?? s.start_time).filter((t) => t);
      range = starts.length ? [Math.min(...starts), Math.max(...ends)] : [0, 1];
      draw();
    },
    draw,
  };
}

function attemptTimeline(rollout, attempts, selectedId, onSelect) {
  const now = Date.now() / 1000;
  const t0 = Math.min(rollout.start_time ?? now, ...attempts.map((a) => a.start_time ?? now));
  const t1 = Math.max(rollout.end_time ?? 0, ...attempts.map((a) => a.end_time ?? a.last_heartbeat_time ?? now), t0 + 1e-3);
  const pct = (t) => `${((t - t0) / (t1 - t0)) * 100}%`;
  return h("div", { class: "timeline", id: "attempts" }, attempts.map((a) => {
    const end = a.end_time ?? now;
    const track = h("div", { class: "tl-track" }, h("div", {
      class: `tl-bar ${["succeeded", "failed", "timeout", "unresponsive"].includes(a.status) ? a.status : ""}`,
      style: { left: pct(a.start_time ?? t0), width: `calc(${pct(end)} - ${pct(a.start_time ?? t0)})` },
      title: `${a.status} · ${fmtDuration(end - (a.start_time ?? end))}`,
    }));
    if (a.last_heartbeat_time) {
      track.appendChild(h("div", { class: "tl-beat", style: { left: pct(a.last_heartbeat_time) },
        title: `last heartbeat ${fmtTime(a.last_heartbeat_time)}` }));
    }
    const row = h("div", { class: "tl-row" + (a.attempt_id === selectedId ? " selected" : ""), "data-attempt": a.attempt_id },
      h("span", { class: "tl-label" }, `#${a.sequence_id} `, badge(a.status), ` ${a.worker_id ?? "no worker"}`), track);
    row.addEventListener("click", () => onSelect(a.attempt_id));
    return row;
  }));
}

function renderDoctor(report) {
  const r = report.report || {};
  const problems = r.problems || [];
  const triplets = (r.triplets || []).length;
  const ok = triplets > 0 && !problems.some((p) => p.severity === "error");
  return h("div", { id: "doctor" },
    h("p", { class: ok ? "doctor-ok" : "doctor-bad" },
      ok ? `✓ gives ${triplets} training triplet(s)` : "✗ gives no usable training data",
      ` · ${r.span_count ?? 0} spans, ${r.llm_span_count ?? 0} LLM calls (${report.scope}, adapter ${r.adapter})`),
    problems.length
      ? h("ul", {}, problems.map((p) => h("li", {}, h("span", { class: `tag ${p.severity === "error" ? "exc" : ""}` }, p.severity),
        " ", p.code, ": ", p.message, p.fix ? ` Fix: ${p.fix}` : "")))
      : h("p", { class: "muted" }, "No problems found."),
    h("details", {}, h("summary", {}, "full report (JSON)"), longText(report, 6000)));
}

export async function mount(container, args) {
  const rolloutId = args[0];
  const header = h("div", {});
  const timelineBox = h("div", {});
  const doctorBox = h("div", { class: "panel" }, h("p", { class: "muted" }, "Asking agl doctor…"));
  const rewardsBox = h("div", { class: "panel", id: "rewards" });
  const failuresBox = h("div", { id: "failures" });
  const detail = h("div", { class: "panel" }, h("p", { class: "muted" }, "Click a span to see it."));
  const spanInfo = h("p", { class: "muted", id: "span-count" });
  const tree = virtualTree((span) => replace(detail, renderSpan(span)));
  let selectedAttempt = null;
  let spans = [];
  let attempts = [];
  let rollout = null;
  let calls = null; // agl doctor's count of the selected attempt's model calls and their records

  replace(container,
    h("p", {}, routeLink("← all rollouts", "rollouts")), header,
    h("h2", {}, "Attempts"), timelineBox,
    h("div", { class: "grid2" },
      h("div", {}, h("h2", {}, "Spans"), spanInfo, tree.element,
        failuresBox, h("h2", {}, "Rewards"), rewardsBox, h("h2", {}, "agl doctor"), doctorBox),
      h("div", {}, h("h2", {}, "Span"), detail)));

  function spanLink(span) {
    const link = h("a", { href: "#" }, `${span.name} #${span.sequence_id}`);
    link.addEventListener("click", (e) => {
      e.preventDefault();
      replace(detail, renderSpan(span));
    });
    return link;
  }

  function renderFailures() {
    const failed = spans.filter((s) => spanException(s) || (s.status && s.status.status_code === "ERROR"));
    if (!failed.length) {
      replace(failuresBox);
      return;
    }
    replace(failuresBox, h("h2", {}, "Failures"), h("div", { class: "panel" }, h("table", {}, h("tbody", {},
      failed.map((span) => {
        const exc = spanException(span) || {};
        return h("tr", {}, h("td", {}, spanLink(span)), h("td", { class: "tag exc" }, exc.type ?? "ERROR"),
          h("td", { title: exc.message ?? "" }, String(exc.message ?? span.status.description ?? "").slice(0, 200)));
      })))));
  }

  function renderRewards() {
    renderFailures();
    const found = [];
    for (const span of spans) for (const r of spanRewards(span)) found.push([span, r]);
    if (!found.length) {
      replace(rewardsBox, h("p", { class: "muted" }, "No reward span in this attempt."));
      return;
    }
    replace(rewardsBox, h("table", {}, h("tbody", {}, found.map(([span, r]) =>
      h("tr", {}, h("td", {}, r.name), h("td", { class: "num" }, fmtNumber(r.value)), h("td", {}, "from ", spanLink(span)))))));
  }

  async function loadSpans(reset) {
    if (reset) spans = [];
    for (;;) {
      const page = await get("/spans", { rollout_id: rolloutId, attempt_id: selectedAttempt, limit: SPAN_PAGE,
        offset: spans.length, sort_by: "sequence_id", sort_order: "asc" });
      spans.push(...page.items);
      drawSpanInfo(page.total);
      if (!page.items.length || spans.length >= page.total) break;
    }
    tree.set(spans);
    renderRewards();
  }

  let spanTotal = 0;
  function drawSpanInfo(total = spanTotal) {
    spanTotal = total;
    const llm = calls ? ` · ${calls.count} LLM call(s) in ${calls.records} record(s)` : "";
    spanInfo.textContent = `${spans.length} of ${total} spans of attempt ${selectedAttempt}${llm}`;
  }

  function drawHeader() {
    replace(header,
      h("h1", {}, "Rollout ", rollout.rollout_id, " ", badge(rollout.status)),
      kvTable([["mode", rollout.mode ?? "—"], ["resources", rollout.resources_id ?? "—"],
        ["started", fmtTime(rollout.start_time)], ["ended", fmtTime(rollout.end_time)],
        ["input", rollout.input], ["metadata", rollout.metadata ?? {}]]));
    replace(timelineBox, attempts.length ? attemptTimeline(rollout, attempts, selectedAttempt, selectAttempt)
      : h("p", { class: "muted" }, "No attempt yet (queued)."));
  }

  async function selectAttempt(attemptId) {
    selectedAttempt = attemptId;
    calls = null;
    drawHeader();
    tree.set([], null);
    await loadSpans(true);
    loadDoctor();
  }

  async function loadRollout() {
    const [r, page] = await Promise.all([get(`/rollouts/${encodeURIComponent(rolloutId)}`),
      get(`/rollouts/${encodeURIComponent(rolloutId)}/attempts`, { limit: -1 })]);
    if (!r) throw new ApiError(404, "RolloutNotFound", `No rollout ${rolloutId} in this store.`);
    rollout = r;
    attempts = page.items;
  }

  async function loadDoctor() {
    const attempt = selectedAttempt;
    try {
      const report = await get(`/rollouts/${encodeURIComponent(rolloutId)}/doctor`, { attempt });
      if (attempt !== selectedAttempt) return; // another attempt was chosen meanwhile
      replace(doctorBox, renderDoctor(report));
      const records = (report.report || {}).llm_records;
      if (records && typeof records === "object") {
        calls = { count: report.report.llm_span_count ?? 0, records: Object.keys(records).length };
        tree.set(spans, records);
        drawSpanInfo();
      }
    } catch (error) {
      replace(doctorBox, h("p", { class: "muted" }, `No verdict: ${error.message}`));
    }
  }

  await loadRollout();
  selectedAttempt = args[1] || (attempts.length ? attempts[attempts.length - 1].attempt_id : null);
  drawHeader();
  if (selectedAttempt) await loadSpans(true);
  else spanInfo.textContent = "No spans yet.";
  loadDoctor();

  return {
    async refresh() {
      if (rollout && FINAL.has(rollout.status) && attempts.every((a) => FINAL.has(a.status))) return;
      const before = attempts.length;
      await loadRollout();
      if (!selectedAttempt && attempts.length) selectedAttempt = attempts[attempts.length - 1].attempt_id;
      drawHeader();
      const known = spans.length;
      if (selectedAttempt) await loadSpans(false);
      if (FINAL.has(rollout.status) || attempts.length !== before || spans.length !== known) loadDoctor();
    },
  };
}
