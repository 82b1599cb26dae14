// One conversation with an Agent Server API server through LangGraph's JS SDK
// (@langchain/langgraph-sdk), as a JS app would hold it. Prints one JSON line
// per stream event, {step, event, id, data}, and a few {step, result} lines;
// tests/serve/test_js_sdk.py starts `hayata serve` and asserts on them.
//
//   node conversation.mjs http://127.0.0.1:PORT
import { Client } from "@langchain/langgraph-sdk";

const url = process.argv[2];
if (!url) {
  console.error("usage: node conversation.mjs SERVER_URL");
  process.exit(2);
}
const client = new Client({ apiUrl: url });
const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");

async function stream(step, parts) {
  for await (const part of parts) {
    print({ step, event: part.event, id: part.id ?? null, data: part.data });
  }
}

// 1. A chat turn, streamed in three modes.
const chat = await client.threads.create({ metadata: { client: "js" } });
print({ step: "thread", result: chat });
let created = null;
await stream("chat", client.runs.stream(chat.thread_id, "chat", {
  input: { messages: [{ type: "human", content: "hi from node" }] },
  streamMode: ["values", "updates", "messages-tuple"],
  onRunCreated: (meta) => { created = meta; },
}));
print({ step: "created", result: created });

// 2. The same run's stream again, after its second event (Last-Event-ID).
const runs = await client.runs.list(chat.thread_id);
await stream("join", client.runs.joinStream(chat.thread_id, runs[0].run_id,
                                            { lastEventId: "2" }));
print({ step: "state", result: (await client.threads.getState(chat.thread_id)).values });

// 3. An interrupt, then Command(resume=...).
const ask = await client.threads.create();
await stream("ask", client.runs.stream(ask.thread_id, "ask", {
  input: { question: "go?" }, streamMode: ["values"],
}));
print({ step: "asked", result: (await client.threads.get(ask.thread_id)).status });
await stream("resume", client.runs.stream(ask.thread_id, "ask", {
  command: { resume: "yes" }, streamMode: ["values"],
}));
print({ step: "answered", result: (await client.threads.get(ask.thread_id)).status });
