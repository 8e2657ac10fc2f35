// openai_check.mjs - the openai npm package (major 6) against a running
// `coli serve` on the demo model: what clients rely on, each case checked
// against an independent expectation (another request's answer, a count
// from the same reply, the OpenAI shapes), with node's test runner.
//
// Environment: COLI_BASE_URL (http://127.0.0.1:PORT/v1), COLI_API_KEY,
// COLI_MODEL_ID (the id /v1/models must list).
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.COLI_BASE_URL;
const apiKey = process.env.COLI_API_KEY;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const greedy = { temperature: 0, max_tokens: 24 };
const ask = (text, extra = {}) => ({
  model: process.env.COLI_MODEL_ID,
  messages: [{ role: "user", content: text }],
  ...greedy,
  ...extra,
});

async function collect(stream) {
  let text = "", finishes = [], roles = [], usage = null, chunks = 0;
  for await (const ch of stream) {
    chunks++;
    assert.equal(ch.object, "chat.completion.chunk");
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      if (c.delta.role) roles.push(c.delta.role);
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finishes.push(c.finish_reason);
    }
  }
  return { text, finishes, roles, usage, chunks };
}

test("models lists the one model", async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].id, process.env.COLI_MODEL_ID);
  assert.equal(page.data[0].object, "model");
});

test("a blocking chat answers with usage that adds up", async () => {
  const r = await client.chat.completions.create(ask("In the beginning God created"));
  assert.equal(r.object, "chat.completion");
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(r.choices[0].message.content.length > 0);
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= greedy.max_tokens);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test("a stream gives the blocking reply, one role and one finish", async () => {
  const want = await client.chat.completions.create(ask("And God said"));
  const got = await collect(await client.chat.completions.create(ask("And God said", { stream: true })));
  assert.equal(got.text, want.choices[0].message.content);
  assert.deepEqual(got.roles, ["assistant"]);
  assert.deepEqual(got.finishes, [want.choices[0].finish_reason]);
  assert.equal(got.usage, null);
});

test("include_usage ends the stream with the usage of the blocking reply", async () => {
  const want = await client.chat.completions.create(ask("The LORD is my shepherd"));
  const got = await collect(await client.chat.completions.create(
    ask("The LORD is my shepherd", { stream: true, stream_options: { include_usage: true } })));
  assert.equal(got.text, want.choices[0].message.content);
  for (const k of ["prompt_tokens", "completion_tokens", "total_tokens"]) assert.equal(got.usage[k], want.usage[k]);
  // the same prompt again: the slot's cache holds all of it but the last token
  assert.equal(got.usage.prompt_tokens_details.cached_tokens, want.usage.prompt_tokens - 1);
});

test("the stream helper's final completion (its strictest path)", async () => {
  const want = await client.chat.completions.create(ask("Blessed are the poor in spirit"));
  const final = await client.chat.completions.stream(ask("Blessed are the poor in spirit")).finalChatCompletion();
  assert.equal(final.choices[0].message.content, want.choices[0].message.content);
  assert.equal(final.choices[0].finish_reason, want.choices[0].finish_reason);
});

test("a stop string cuts the reply just before it", async () => {
  const full = (await client.chat.completions.create(ask("And the earth was"))).choices[0].message.content;
  const words = full.trim().split(/\s+/);
  assert.ok(words.length >= 3, "the reply is long enough to cut: " + JSON.stringify(full));
  const stop = words[2];
  const r = await client.chat.completions.create(ask("And the earth was", { stop: [stop] }));
  assert.equal(r.choices[0].message.content, full.slice(0, full.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, "stop");
  const s = await collect(await client.chat.completions.create(ask("And the earth was", { stop, stream: true })));
  assert.equal(s.text, r.choices[0].message.content);
});

test("max_tokens ends with finish_reason length", async () => {
  const r = await client.chat.completions.create(ask("In the beginning", { max_tokens: 3 }));
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 3);
  const m = await client.chat.completions.create(ask("In the beginning", { max_tokens: null, max_completion_tokens: 3 }));
  assert.equal(m.choices[0].message.content, r.choices[0].message.content);
});

test("a seed makes sampling repeatable; null and unknown fields are defaults", async () => {
  const req = ask("And the evening and the morning", { temperature: 0.9, seed: 1234, max_tokens: 16 });
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create({ ...req, top_p: null, frequency_penalty: null, some_field: 7 });
  assert.equal(b.choices[0].message.content, a.choices[0].message.content);
});

test("developer is system, and text parts are text", async () => {
  const sys = await client.chat.completions.create({
    ...greedy, model: process.env.COLI_MODEL_ID,
    messages: [{ role: "system", content: "Hear, O Israel" }, { role: "user", content: "and the LORD said" }],
  });
  const dev = await client.chat.completions.create({
    ...greedy, model: process.env.COLI_MODEL_ID,
    messages: [{ role: "developer", content: [{ type: "text", text: "Hear, O Israel" }] },
               { role: "user", content: [{ type: "text", text: "and the LORD " }, { type: "text", text: "said" }] }],
  });
  assert.equal(dev.choices[0].message.content, sys.choices[0].message.content);
});

test("legacy completions continue a prompt", async () => {
  const r = await client.completions.create({ model: process.env.COLI_MODEL_ID, prompt: "In the beginning", ...greedy });
  assert.equal(r.object, "text_completion");
  assert.equal(typeof r.choices[0].text, "string");
  assert.ok(r.usage.completion_tokens > 0);
});

test("errors come as the SDK's error classes", async () => {
  const bad = new OpenAI({ baseURL, apiKey: apiKey + "-wrong", maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create(ask("hi")), OpenAI.AuthenticationError);
  await assert.rejects(client.chat.completions.create({ model: "x", messages: "not a list" }), OpenAI.BadRequestError);
  await assert.rejects(client.chat.completions.create(ask("hi", { temperature: -3 })), OpenAI.BadRequestError);
  const long = "And God said, Let there be light: and there was light. ".repeat(400);
  await assert.rejects(client.chat.completions.create(ask(long)), OpenAI.BadRequestError);
});

test("parallel streams each give what they give alone", async () => {
  const prompts = ["In the beginning", "And God said", "The LORD is my shepherd", "Blessed are the meek"];
  const alone = [];
  for (const p of prompts) alone.push((await client.chat.completions.create(ask(p))).choices[0].message.content);
  const together = await Promise.all(prompts.map(async (p) =>
    (await collect(await client.chat.completions.create(ask(p, { stream: true })))).text));
  assert.deepEqual(together, alone);
});

// On a server slowed to a step every few milliseconds (COLI_SLOW_BASE_URL),
// so that the reply is still coming when the client leaves.
test("a client that goes away frees its slot", async () => {
  const slowURL = process.env.COLI_SLOW_BASE_URL;
  const slow = new OpenAI({ baseURL: slowURL, apiKey, maxRetries: 0 });
  const ac = new AbortController();
  const stream = await slow.chat.completions.create(ask("In the beginning", { stream: true, max_tokens: 400 }),
                                                    { signal: ac.signal });
  // the SDK ends the iteration quietly when its signal aborts
  let n = 0, text = "";
  for await (const ch of stream) {
    text += ch.choices.length ? ch.choices[0].delta.content || "" : "";
    if (++n === 3) ac.abort();
  }
  assert.ok(n < 50, `the stream stopped when the client left (${n} chunks)`);
  const root = slowURL.replace(/\/v1\/?$/, "");
  let busy = -1;
  for (let i = 0; i < 50 && busy !== 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const text = await (await fetch(root + "/metrics", { headers: { Authorization: "Bearer " + apiKey } })).text();
    const m = text.match(/^coli_slots_busy (\d+)/m);
    busy = m ? Number(m[1]) : -1;
  }
  assert.equal(busy, 0);
});
