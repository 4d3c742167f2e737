// A small agent in TypeScript on the official `openai` package. It knows nothing about agl: it reads its
// model endpoint the way any OpenAI SDK program does (OPENAI_BASE_URL, OPENAI_API_KEY), its model name and
// system prompt from its own variables, and its question from argv. With AGENT_TOOLS=true it offers a
// `multiply` tool.
// It prints the answer, and as its last line a JSON object with the reward when it was told the expected
// answer (EXPECTED) -- the documented way for a program to report a reward to agl.
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";

const MAX_TURNS = 4;

const tools: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "multiply",
      description: "Multiply two integers.",
      parameters: {
        type: "object",
        properties: { a: { type: "integer" }, b: { type: "integer" } },
        required: ["a", "b"],
      },
    },
  },
];

function runTool(name: string, argumentsJson: string): string {
  if (name !== "multiply") return `unknown tool ${name}`;
  const { a, b } = JSON.parse(argumentsJson) as { a: number; b: number };
  return String(a * b);
}

function reward(answer: string, expected: string): number {
  const numbers = answer.match(/-?\d+/g);
  if (/^-?\d+$/.test(expected)) return numbers && numbers[numbers.length - 1] === expected ? 1 : 0;
  return answer.includes(expected) ? 1 : 0;
}

async function main(): Promise<void> {
  const question = process.argv.slice(2).join(" ");
  const useTools = process.env.AGENT_TOOLS === "true";
  const client = new OpenAI({ maxRetries: 0, timeout: 60_000 });
  const messages: ChatCompletionMessageParam[] = [];
  if (process.env.SYSTEM_PROMPT) messages.push({ role: "system", content: process.env.SYSTEM_PROMPT });
  messages.push({ role: "user", content: question });

  let answer = "";
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const completion = await client.chat.completions.create({
      model: process.env.MODEL ?? "policy",
      messages,
      ...(useTools ? { tools } : {}),
    });
    const message = completion.choices[0].message;
    const calls = message.tool_calls ?? [];
    if (calls.length === 0) {
      answer = message.content ?? "";
      break;
    }
    messages.push({ role: "assistant", content: message.content ?? null, tool_calls: calls });
    for (const call of calls) {
      if (call.type !== "function") continue;
      const result = runTool(call.function.name, call.function.arguments);
      messages.push({ role: "tool", tool_call_id: call.id, content: result });
    }
  }
  console.log(answer);
  const expected = process.env.EXPECTED;
  if (expected !== undefined) console.log(JSON.stringify({ reward: reward(answer, expected) }));
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack ?? error.message : String(error));
  process.exit(1);
});
