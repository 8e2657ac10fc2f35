// load.mjs - a fixed load on an OpenAI-compatible server: C clients, each
// sending R streamed completions of its own prompts one after another,
// greedy, max_tokens N. Prints one JSON line: the tokens generated (as
// the server's usage counts them), the wall time, the aggregate tokens per
// second, and the mean time to first token.
//
// usage: node bench/load.mjs URL CLIENTS REQUESTS MAX_TOKENS [API_KEY]
//   URL: the server's /v1 root, e.g. http://127.0.0.1:8080/v1
const [url, clients, requests, maxTokens, key] = process.argv.slice(2);
const C = Number(clients), R = Number(requests), N = Number(maxTokens);
const words = ["In the beginning", "And God said", "The LORD is my shepherd", "Blessed are the meek",
               "And the earth was", "Hear, O Israel", "Let there be light", "And it came to pass"];

async function one(prompt) {
  const t0 = performance.now();
  const res = await fetch(url + "/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + (key || "none") },
    body: JSON.stringify({ prompt, max_tokens: N, temperature: 0, stream: true,
                           stream_options: { include_usage: true } }),
  });
  if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "", first = null, tokens = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
      const j = JSON.parse(ev.slice(6));
      if (first === null && j.choices && j.choices.length && j.choices[0].text) first = performance.now() - t0;
      if (j.usage) tokens = j.usage.completion_tokens;
    }
  }
  return { tokens, ttft: first };
}

const t0 = performance.now();
const results = await Promise.all(Array.from({ length: C }, async (_, c) => {
  const out = [];
  for (let r = 0; r < R; r++) out.push(await one(words[(c + r) % words.length] + ` (${c}.${r})`));
  return out;
}));
const wall = (performance.now() - t0) / 1000;
const flat = results.flat();
const tokens = flat.reduce((a, x) => a + x.tokens, 0);
const ttfts = flat.filter((x) => x.ttft !== null).map((x) => x.ttft);
console.log(JSON.stringify({
  clients: C, requests: flat.length, tokens, wall_s: +wall.toFixed(3), tok_s: +(tokens / wall).toFixed(2),
  ttft_ms: ttfts.length ? +(ttfts.reduce((a, b) => a + b, 0) / ttfts.length).toFixed(1) : null,
}));
