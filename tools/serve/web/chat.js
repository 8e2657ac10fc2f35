/* chat.js - the chat page of coli serve. The conversation lives here and
 * is sent whole each turn (the server reuses its cached prefix); replies
 * stream in over server-sent events, reasoning folded away. */
"use strict";

const $ = (id) => document.getElementById(id);
const history = [];
let controller = null;

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.dataset.role = role;
  const body = document.createElement("div");
  body.className = "content";
  body.textContent = text || "";
  div.appendChild(body);
  $("log").appendChild(div);
  $("log").scrollTop = $("log").scrollHeight;
  return div;
}

/* The folded reasoning of a reply, made when its first piece arrives. */
function reasoningOf(div) {
  let d = div.querySelector("details");
  if (!d) {
    d = document.createElement("details");
    d.className = "reasoning";
    const s = document.createElement("summary");
    s.textContent = "Reasoning";
    const p = document.createElement("div");
    p.className = "reasoning-text";
    d.append(s, p);
    div.insertBefore(d, div.firstChild);
  }
  return d.querySelector(".reasoning-text");
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function busy(on) {
  $("send").disabled = on;
  $("stop").disabled = !on;
}

/* Reads an SSE body, calling onEvent with each data payload. */
async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of block.split("\n")) {
        if (line.startsWith("data: ")) onEvent(line.slice(6));
      }
    }
  }
}

async function send(text) {
  history.push({ role: "user", content: text });
  bubble("user", text);
  const div = bubble("assistant", "");
  const content = div.querySelector(".content");
  const messages = [];
  const sys = $("system").value.trim();
  if (sys) messages.push({ role: "system", content: sys });
  messages.push(...history);
  const body = {
    messages,
    stream: true,
    temperature: Number($("temperature").value),
    max_tokens: Number($("max_tokens").value),
  };
  controller = new AbortController();
  busy(true);
  $("status").textContent = "";
  let reply = "", finish = null;
  try {
    const res = await fetch("v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (!res.ok) {
      let msg = res.status + " " + res.statusText;
      try { msg = (await res.json()).error.message; } catch (e) { /* not JSON */ }
      throw new Error(msg);
    }
    await readEvents(res, (data) => {
      if (data === "[DONE]") return;
      const ev = JSON.parse(data);
      if (ev.error) throw new Error(ev.error.message);
      for (const ch of ev.choices || []) {
        const d = ch.delta || {};
        if (d.reasoning_content) reasoningOf(div).textContent += d.reasoning_content;
        if (d.content) { reply += d.content; content.textContent = reply; }
        if (ch.finish_reason) finish = ch.finish_reason;
      }
      $("log").scrollTop = $("log").scrollHeight;
    });
    history.push({ role: "assistant", content: reply });
    div.dataset.finish = finish || "";
    $("status").textContent = finish === "length" ? "Stopped at the token limit." : "";
  } catch (e) {
    if (e.name === "AbortError") {
      history.push({ role: "assistant", content: reply });
      div.dataset.finish = "abort";
      $("status").textContent = "Stopped.";
    } else {
      history.pop();
      div.classList.add("error");
      content.textContent = reply + (reply ? "\n" : "") + "Error: " + e.message;
      div.dataset.finish = "error";
    }
  } finally {
    controller = null;
    busy(false);
  }
}

$("form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value;
  if (!text.trim() || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("form").requestSubmit(); }
});
$("stop").addEventListener("click", () => controller && controller.abort());
$("clear").addEventListener("click", () => {
  if (controller) controller.abort();
  history.length = 0;
  $("log").textContent = "";
});
fetch("v1/models", { headers: headers() })
  .then((r) => r.json())
  .then((j) => { $("model").textContent = j.data[0].id; })
  .catch(() => {});
