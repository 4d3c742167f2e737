// Reading spans: rewards, LLM calls as chat messages, token ids, and the parent/child tree.
// Attribute keys follow agl_core.semconv (the same shapes the adapters read).

const REWARD_DIM = /^agentlightning\.reward\.(\d{1,4})\.(name|value)$/;

/** Most list entries read from "prefix.<index>.<field>" attributes: a stored span may name any index
 * (agentlightning.reward.4294967294.value), and a plain array filled at such an index is huge. */
export const MAX_ATTRIBUTE_INDEX = 1000;

/** Entries of "prefix.<index>.<field>" keys (index <= MAX_ATTRIBUTE_INDEX), in index order. */
function indexedEntries(attrs, re) {
  const byIndex = new Map();
  for (const [key, value] of Object.entries(attrs)) {
    const m = re.exec(key);
    if (!m) continue;
    const i = Number(m[1]);
    if (!(i <= MAX_ATTRIBUTE_INDEX)) continue;
    if (!byIndex.has(i)) byIndex.set(i, {});
    byIndex.get(i)[m[2]] = value;
  }
  return [...byIndex.entries()].sort((a, b) => a[0] - b[0]).map((entry) => entry[1]);
}

/** The reward dimensions of a span: [{name, value}], empty when it carries none. */
export function spanRewards(span) {
  const attrs = span.attributes || {};
  const found = indexedEntries(attrs, REWARD_DIM).filter((d) => typeof d.value === "number");
  if (found.length) return found.map((d) => ({ name: d.name ?? "primary", value: d.value }));
  const legacy = attrs.reward;
  if ((span.name === "agentlightning.annotation" || span.name === "agentlightning.reward") &&
      typeof legacy === "number") {
    return [{ name: "reward", value: legacy }];
  }
  return [];
}

/** The primary value of the last reward span (what training uses), or null. */
export function finalReward(spans) {
  for (let i = spans.length - 1; i >= 0; i--) {
    const dims = spanRewards(spans[i]);
    if (dims.length) return dims[0].value;
  }
  return null;
}

function parseJson(value) {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

/** Unflatten "prefix.0.role", "prefix.0.content", ... into [{role, content, ...}]. */
function unflattenList(attrs, prefix) {
  return indexedEntries(attrs, new RegExp("^" + prefix.replace(/\./g, "\\.") + "\\.(\\d{1,4})\\.(.+)$"));
}

/** A GenAI "parts" message or an OpenAI chat message -> {role, text, toolCalls: [{name, arguments}], toolCallId}. */
function normalizeMessage(message) {
  if (!message || typeof message !== "object") return { role: "unknown", text: String(message), toolCalls: [] };
  const role = String(message.role ?? "unknown");
  const toolCalls = [];
  const texts = [];
  let toolCallId = message.tool_call_id ?? null;
  if (Array.isArray(message.parts)) {
    for (const part of message.parts) {
      if (!part || typeof part !== "object") continue;
      if (part.type === "text" || part.type === "reasoning") texts.push(String(part.content ?? ""));
      else if (part.type === "tool_call") {
        toolCalls.push({ name: String(part.name ?? ""), arguments: part.arguments, id: part.id });
      } else if (part.type === "tool_call_response") {
        toolCallId = part.id ?? toolCallId;
        texts.push(typeof part.response === "string" ? part.response : JSON.stringify(part.response));
      } else texts.push(JSON.stringify(part));
    }
  } else if (message.content !== undefined && message.content !== null) {
    const c = message.content;
    if (typeof c === "string") texts.push(c);
    else if (Array.isArray(c)) {
      for (const part of c) texts.push(typeof part === "object" && part && "text" in part ? String(part.text) : JSON.stringify(part));
    } else texts.push(JSON.stringify(c));
  }
  for (const call of message.tool_calls || []) {
    const fn = call.function || call;
    toolCalls.push({ name: String(fn.name ?? ""), arguments: fn.arguments, id: call.id });
  }
  return { role, text: texts.join("\n"), toolCalls, toolCallId };
}

function messagesFrom(attrs, jsonKeys, flatPrefix) {
  for (const key of jsonKeys) {
    if (key in attrs) {
      const value = parseJson(attrs[key]);
      if (Array.isArray(value)) return value.map(normalizeMessage);
      if (value && typeof value === "object") return [normalizeMessage(value)];
    }
  }
  const flat = unflattenList(attrs, flatPrefix);
  return flat.length ? flat.map(normalizeMessage) : null;
}

function numberList(value) {
  const parsed = parseJson(value);
  return Array.isArray(parsed) && parsed.every((x) => typeof x === "number") ? parsed : null;
}

/** If the span is an LLM call: {model, input: [...], output: [...], promptIds, responseIds, logprobs, usage}. */
export function llmCall(span) {
  const attrs = span.attributes || {};
  const input = messagesFrom(attrs, ["gen_ai.input.messages", "gen_ai.prompt"], "gen_ai.prompt");
  const output = messagesFrom(attrs, ["gen_ai.output.messages", "gen_ai.completion"], "gen_ai.completion");
  const promptIds = numberList(attrs.prompt_token_ids);
  const responseIds = numberList(attrs.response_token_ids);
  if (!input && !output && !promptIds && !responseIds) return null;
  const system = parseJson(attrs["gen_ai.system_instructions"]);
  const messages = [...(input || [])];
  if (Array.isArray(system)) messages.unshift(normalizeMessage({ role: "system", parts: system }));
  return {
    model: attrs["gen_ai.response.model"] ?? attrs["gen_ai.request.model"] ?? null,
    source: attrs["agl.llm.source"] ?? null,
    input: messages,
    output: output || [],
    promptIds,
    responseIds,
    logprobs: parseJson(attrs["logprobs.content"]) ?? null,
    usage: {
      input: attrs["gen_ai.usage.input_tokens"] ?? (promptIds ? promptIds.length : null),
      output: attrs["gen_ai.usage.output_tokens"] ?? (responseIds ? responseIds.length : null),
    },
  };
}

/** The exception a span records ({type, message, stacktrace}) or null. */
export function spanException(span) {
  for (const event of span.events || []) {
    if (event.name === "exception") {
      const a = event.attributes || {};
      return { type: a["exception.type"], message: a["exception.message"], stacktrace: a["exception.stacktrace"] };
    }
  }
  const a = span.attributes || {};
  if (span.name === "agentlightning.exception" || a["exception.type"]) {
    return { type: a["exception.type"], message: a["exception.message"], stacktrace: a["exception.stacktrace"] };
  }
  return null;
}

/** Spans as a depth-first list of {span, depth, children} (roots: spans whose parent is not in the list).
 * `foldUnder` (span id -> span id, agl doctor's llm_records) folds each other record of an LLM call under
 * the record read for it: the copy becomes a leaf child of that record, its own children move up to it. */
export function spanTree(spans, foldUnder = {}) {
  const byId = new Map();
  for (const span of spans) byId.set(span.span_id, { span, children: [], depth: 0 });
  const folded = (id) => {
    const target = Object.hasOwn(foldUnder, id) ? foldUnder[id] : id;
    return target !== id && byId.has(target) ? target : null;
  };
  const roots = [];
  for (const node of byId.values()) {
    const target = folded(node.span.span_id);
    let parentId = target ?? node.span.parent_id;
    // a copy is a leaf: a child of one hangs from the copy's nearest ancestor that is not a copy
    for (let hops = 0; !target && parentId && folded(parentId) && hops < byId.size; hops++) {
      parentId = byId.get(parentId).span.parent_id;
    }
    const parent = parentId ? byId.get(parentId) : null;
    if (parent && parent !== node) parent.children.push(node);
    else roots.push(node);
  }
  const order = (a, b) => (a.span.start_time ?? 0) - (b.span.start_time ?? 0) || a.span.sequence_id - b.span.sequence_id;
  const flat = [];
  const stack = roots.sort(order).reverse().map((n) => [n, 0]);
  while (stack.length) {
    const [node, depth] = stack.pop();
    node.depth = depth;
    flat.push(node);
    const kids = node.children.sort(order);
    for (let i = kids.length - 1; i >= 0; i--) stack.push([kids[i], depth + 1]);
  }
  return flat;
}
