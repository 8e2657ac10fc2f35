// web_check.mjs - the chat page of `coli serve` in headless Chromium,
// driven through chromedriver's WebDriver protocol with plain fetch: a
// message typed and sent streams in a reply equal to the API's blocking
// answer to the same conversation, and a second turn carries the history.
// With COLI_WEB_REASONING=1 the server's template opens a thinking block,
// so the whole reply is reasoning: it must be shown folded.
//
// Environment: COLI_WEB_URL (the server's root), COLI_DRIVER_URL
// (chromedriver), COLI_CHROMIUM (the browser binary), COLI_API_KEY.
import assert from "node:assert/strict";

const root = process.env.COLI_WEB_URL.replace(/\/$/, "");
const driver = process.env.COLI_DRIVER_URL.replace(/\/$/, "");
const key = process.env.COLI_API_KEY || "";
const reasoning = process.env.COLI_WEB_REASONING === "1";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function wd(method, path, body) {
  const res = await fetch(driver + path, {
    method,
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const j = await res.json();
  if (!res.ok) throw new Error(`WebDriver ${method} ${path}: ${JSON.stringify(j.value)}`);
  return j.value;
}

async function api(messages) {
  const res = await fetch(root + "/v1/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + key },
    body: JSON.stringify({ messages, temperature: 0, max_tokens: 48 }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).choices[0].message;
}

const session = await wd("POST", "/session", {
  capabilities: {
    alwaysMatch: {
      browserName: "chrome",
      "goog:chromeOptions": {
        binary: process.env.COLI_CHROMIUM,
        args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
      },
    },
  },
});
const sid = session.sessionId;
const run = (script, args = []) => wd("POST", `/session/${sid}/execute/sync`, { script, args });
const el = async (css) => (await wd("POST", `/session/${sid}/element`, { using: "css selector", value: css }))[
  "element-6066-11e4-a52e-4f735466cecf"];

// One turn through the page: what the last reply showed while it streamed
// and at the end.
async function turn(text) {
  await wd("POST", `/session/${sid}/element/${await el("#input")}/value`, { text });
  await wd("POST", `/session/${sid}/element/${await el("#send")}/click`, {});
  const seen = new Set();
  for (let i = 0; i < 600; i++) {
    const s = await run(`const m = [...document.querySelectorAll('.msg.assistant')].pop();
      if (!m) return null;
      const d = m.querySelector('details');
      return { finish: m.dataset.finish || null, text: m.querySelector('.content').textContent,
               reasoning: d ? d.querySelector('.reasoning-text').textContent : null, open: d ? d.open : null };`);
    if (s) seen.add((s.reasoning || "").length + s.text.length);
    if (s && s.finish) return { ...s, lengths: seen.size };
    await sleep(25);
  }
  throw new Error("the reply did not finish");
}

try {
  await wd("POST", `/session/${sid}/url`, { url: root + "/" });
  // the settings, as a user opens them: the key, greedy, 48 tokens
  await wd("POST", `/session/${sid}/element/${await el("#settings summary")}/click`, {});
  if (key) await wd("POST", `/session/${sid}/element/${await el("#key")}/value`, { text: key });
  await run(`document.getElementById('temperature').value = '0';
             document.getElementById('max_tokens').value = '48';`);
  const first = await turn("In the beginning God created");
  assert.ok(["stop", "length"].includes(first.finish), "finish: " + first.finish);
  const want1 = await api([{ role: "user", content: "In the beginning God created" }]);
  if (reasoning) {
    assert.equal(first.reasoning, want1.reasoning_content);
    assert.equal(first.open, false, "reasoning is folded");
    assert.equal(first.text, want1.content || "");
    console.log("reasoning shown folded:", JSON.stringify(first.reasoning.slice(0, 60)));
  } else {
    assert.equal(first.text, want1.content);
    assert.equal(first.reasoning, null);
  }
  assert.ok(first.lengths > 2, "the reply grew in steps, not at once: " + first.lengths);
  if (!reasoning) {
    const second = await turn("And God said");
    const want2 = await api([
      { role: "user", content: "In the beginning God created" },
      { role: "assistant", content: want1.content },
      { role: "user", content: "And God said" },
    ]);
    assert.equal(second.text, want2.content);
    const count = await run(`return document.querySelectorAll('.msg').length;`);
    assert.equal(count, 4);
    console.log("two turns streamed; replies equal the API's:", JSON.stringify(second.text.slice(0, 60)));
  }
} finally {
  await wd("DELETE", `/session/${sid}`);
}
