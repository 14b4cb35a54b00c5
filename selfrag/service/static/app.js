// The selfrag page: ask, watch the reflection steps stream in, read the cited passages, upload documents.
// Plain JS, no build step, no external assets. Every string from the server or a document is rendered as
// text (textContent / text nodes), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "selfrag-token";

// el("li", {class: "x"}, "text", childNode, ...): strings become text nodes, never markup.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) { node.replaceChildren(); }

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const response = await fetch(path, opts);
  if (response.status === 401) {
    $("token-form").classList.remove("hidden");
    throw new Error("This service needs an API token: enter it at the top right.");
  }
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try {
      const body = await response.json();
      if (body && body.error) message = body.error.message + " (" + body.error.code + ")";
    } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.classList.toggle("hidden", !message);
}

// ---------------------------------------------------------------- collections

async function loadCollections() {
  try {
    const body = await (await api("/v1/collections")).json();
    const select = $("collection");
    const current = select.value || body.default;
    clear(select);
    const names = body.collections.map((c) => c.name);
    if (!names.includes(body.default)) body.collections.unshift({ name: body.default, chunks: 0 });
    for (const c of body.collections) {
      select.append(el("option", { value: c.name, selected: c.name === current }, c.name + " (" + c.chunks + (c.chunks === 1 ? " chunk)" : " chunks)")));
    }
  } catch (e) {
    showError(e.message);
  }
}

// ---------------------------------------------------------------- the timeline

const KIND = {
  retrieve_decision: "decision", route: "route", retrieve: "retrieve", web_search: "retrieve",
  grade_relevance: "grade", evaluate_retrieval: "grade", filter_strip: "grade", refine: "grade",
  generate_answer: "draft", answer_directly: "draft", rewrite_query: "retrieve", rewrite_web_query: "retrieve",
  judge_support: "critique", judge_usefulness: "critique", candidate_dropped: "critique",
  check_answer: "critique", check_prior: "critique", support_verified: "critique",
  select_candidate: "final", abstain: "final",
  continue_decision: "decision", next_query: "retrieve", merge: "retrieve",
};

const LABEL = {
  retrieve_decision: "Retrieve?", route: "Route", retrieve: "Retrieve", web_search: "Web search",
  grade_relevance: "Relevance", evaluate_retrieval: "Retrieval score", filter_strip: "Strip filter", refine: "Refine",
  generate_answer: "Draft", answer_directly: "Direct answer", rewrite_query: "Rewrite query",
  rewrite_web_query: "Web query", judge_support: "Support", judge_usefulness: "Usefulness",
  candidate_dropped: "Draft dropped", select_candidate: "Choice", abstain: "Abstain",
  check_answer: "Answer stated?", check_prior: "Prior", support_verified: "Support",
  continue_decision: "Continue?", next_query: "Next query", merge: "New passages",
};

const ROUTES = {
  retrieve: "retrieve from the knowledge base", direct: "answer without retrieval", generate: "draft answers",
  rewrite: "rewrite the query and retry", web: "search the web", abstain: "abstain", accept: "accept the best draft",
  regenerate: "regenerate from all relevant passages", flag_unsupported: "return it, flagged as unsupported",
};

function verdict(text, good) {
  return el("span", { class: good ? "verdict-good" : "verdict-bad" }, text);
}

function brief(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text && text.length > 300 ? text.slice(0, 299) + "…" : text;
}

// A judgement's label probabilities, e.g. " (fully 0.72 · partially 0.20)"; "" without them.
function probs(step) {
  const p = step.probs;
  if (!p) return "";
  const parts = Object.entries(p).filter(([, v]) => v >= 0.005).map(([k, v]) => k + " " + v.toFixed(2));
  return parts.length ? "  (" + parts.join(" · ") + (step.soft === false ? ", hard" : "") + ")" : "";
}

// What one step says, as nodes (text only).
function describe(step) {
  const out = step.output, inp = step.inputs || {};
  if (!step.ok) return [verdict("failed", false), " ", step.error || ""];
  switch (step.step) {
    case "retrieve_decision": return [verdict(String(out), out === "yes"), " — does the question need retrieval?",
                                      probs(step)];
    case "route": {
      const why = Object.entries(inp).map(([k, v]) => k + "=" + v).join(", ");
      return ["→ ", ROUTES[out] || String(out), why ? "  (" + why + ")" : ""];
    }
    case "retrieve": return [(out || []).length + " passage(s) for “" + (inp.query || "") + "”"];
    case "web_search": return [Array.isArray(out) ? out.length + " result(s)" : brief(out), " for “" + (inp.query || "") + "”"];
    case "grade_relevance": return ["passage ", inp.passage_id || "?", ": ", verdict(String(out), out === "relevant"),
                                    probs(step)];
    case "grade_relevance_batch": return [((out || []).length) + " passage(s) graded in one call"];
    case "retrieve_rule": return ["rule ", inp.rule || "?", " → ", verdict(String(out), out === "yes")];
    case "evaluate_retrieval": return ["score ", String(out), "/10"];
    case "generate_answer": case "answer_directly": return ["“" + brief(out) + "”"];
    case "judge_support": return [verdict(String(out), out === "fully"), " supported by its passages", probs(step)];
    case "check_answer": return [verdict(String(out), out === "yes"), " — do the passages state the answer?", probs(step)];
    case "check_prior": return [String(out), " — the same check shown no passage (how much “yes” the question draws alone)",
                                probs(step)];
    case "support_verified": return ["not judged: the answer check is sure (P(stated) " +
                                     Number(inp.p_stated).toFixed(2) + " > " + Number(inp.threshold).toFixed(2) + ")"];
    case "judge_usefulness": return [verdict(String(out) + "/5", Number(out) >= 4), " useful"];
    case "rewrite_query": case "rewrite_web_query": return ["new query: “" + brief(out) + "”"];
    case "candidate_dropped": return [brief(out), inp.answer ? " (" + brief(inp.answer) + ")" : ""];
    case "select_candidate": {
      const best = out && out.best !== null && out.best !== undefined ? "draft " + (out.best + 1) : "none";
      return ["scores " + JSON.stringify((out && out.scores) || []) + " → best: " + best];
    }
    case "abstain": return [verdict("abstained", false), " — " + (out && out.reason ? out.reason.replace(/_/g, " ")
                                                                 : brief(out))];
    default: return [brief(out)];
  }
}

const timeline = { items: [], lmCalls: 0, started: 0, timer: null };

function renderStep(index, step) {
  const kind = KIND[step.step] || "route";
  const meta = [];
  if (step.lm_calls) meta.push(step.lm_calls + " LM");
  if (step.seconds) meta.push(step.seconds.toFixed(2) + " s");
  const node = el("li", { class: "kind-" + kind + (step.ok ? "" : " failed"), "data-step": step.step, "data-index": index },
    el("span", { class: "meta" }, meta.join(" · ")),
    el("span", { class: "name" }, LABEL[step.step] || step.step),
    el("span", { class: "detail" }, describe(step)));
  const list = $("steps");
  const old = timeline.items[index];
  if (old) {  // a repeated index: the program completed this step after recording it
    timeline.lmCalls -= old.step.lm_calls || 0;
    old.node.replaceWith(node);
  } else {
    list.append(node);
    list.scrollTop = list.scrollHeight;
  }
  timeline.items[index] = { step, node };
  timeline.lmCalls += step.lm_calls || 0;
  updateCounters();
}

function updateCounters(result) {
  const seconds = timeline.started ? (performance.now() - timeline.started) / 1000 : 0;
  const parts = [timeline.items.filter(Boolean).length + " steps", timeline.lmCalls + " LM calls", seconds.toFixed(1) + " s"];
  if (result) {
    const u = result.usage;
    parts.push(u.prompt_tokens + " prompt + " + u.completion_tokens + " completion tokens");
  }
  $("counters").textContent = parts.join(" · ");
}

function resetTimeline() {
  clear($("steps"));
  timeline.items = [];
  timeline.lmCalls = 0;
  timeline.started = performance.now();
  clearInterval(timeline.timer);
  timeline.timer = setInterval(() => updateCounters(), 250);
  updateCounters();
}

function stopTimer() { clearInterval(timeline.timer); timeline.timer = null; }

// ---------------------------------------------------------------- the answer

function renderResult(result, collection) {
  const answer = $("answer");
  answer.textContent = result.answer;
  answer.className = "answer-text" + (result.abstained ? " abstained" : "");
  const flags = $("flags");
  clear(flags);
  if (result.abstained) flags.append(el("li", { class: "warn" },
    "abstained" + (result.abstain_reason ? ": " + result.abstain_reason.replace(/_/g, " ") : "")));
  if (result.confidence !== null && result.confidence !== undefined)
    flags.append(el("li", {}, "confidence: " + result.confidence.toFixed(2)));
  if (result.supported) flags.append(el("li", { class: result.supported === "fully" ? "good" : result.supported === "no" ? "bad" : "warn" }, "support: " + result.supported));
  if (result.usefulness !== null && result.usefulness !== undefined) flags.append(el("li", {}, "usefulness: " + result.usefulness + "/5"));
  if (result.used_web) flags.append(el("li", {}, "web"));
  if (!result.retrieved) flags.append(el("li", {}, "no retrieval"));
  const citations = $("citations");
  clear(citations);
  result.citations.forEach((c, i) => {
    const link = el("a", { href: "#", "data-citation": i + 1, onclick: (e) => { e.preventDefault(); openPassage(c, collection); } },
      "[" + (i + 1) + "] " + (c.title || c.source || c.id));
    citations.append(el("li", {}, link, el("span", { class: "snippet" }, c.snippet)));
  });
  if (!result.citations.length) citations.append(el("li", { class: "muted empty" }, "none"));
  const u = result.usage;
  $("usage").textContent = u.lm_calls + " LM calls · " + u.prompt_tokens + " prompt + " + u.completion_tokens +
    " completion tokens · " + result.seconds.toFixed(1) + " s";
  updateCounters(result);
}

async function openPassage(citation, collection) {
  $("passage-title").textContent = citation.title || citation.id;
  $("passage-source").textContent = citation.source;
  $("passage-text").textContent = citation.snippet;
  $("passage").showModal();
  try {  // the full chunk, when the citation is a knowledge-base passage
    const path = "/v1/collections/" + encodeURIComponent(collection) + "/chunks/" + encodeURIComponent(citation.id);
    const chunk = await (await api(path)).json();
    $("passage-text").textContent = chunk.text;
  } catch (e) { /* a web result or a removed chunk: the snippet stays */ }
}

// ---------------------------------------------------------------- asking (server-sent events over fetch)

let controller = null;

function parseEvents(buffer, onEvent) {
  const blocks = buffer.split("\n\n");
  const rest = blocks.pop();
  for (const block of blocks) {
    let name = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) name = line.slice(6).trim();
      else if (line.startsWith("data:")) data += line.slice(5).trim();
    }
    if (data) onEvent(name, JSON.parse(data));
  }
  return rest;
}

async function ask(event) {
  event.preventDefault();
  if (controller) return;  // one question at a time: Enter while one runs does not start a second
  const question = $("question").value.trim();
  if (!question) return;
  const collection = $("collection").value;
  showError("");
  resetTimeline();
  $("answer").textContent = "Thinking…";
  $("answer").className = "answer-text muted";
  clear($("flags")); clear($("citations")); $("usage").textContent = "";
  $("ask-button").disabled = true;
  $("stop-button").disabled = false;
  $("live").classList.remove("hidden");
  $("status").textContent = "queued";
  controller = new AbortController();
  try {
    const response = await api("/v1/ask/stream", {
      method: "POST", signal: controller.signal,
      headers: { "Content-Type": "application/json", "Accept": "text/event-stream" },
      body: JSON.stringify({ question, collection: collection || null }),
    });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer = parseEvents(buffer + decoder.decode(value, { stream: true }), (name, data) => {
        if (name === "started") $("status").textContent = "thinking";
        else if (name === "step") renderStep(data.index, data.step);
        else if (name === "result") { renderResult(data, collection); $("status").textContent = "done"; }
        else if (name === "error") {
          showError(data.error.message + " (" + data.error.code + ")");
          $("status").textContent = ""; $("answer").textContent = "";
        }
      });
    }
  } catch (e) {
    if (e.name === "AbortError") { $("status").textContent = "stopped"; $("answer").textContent = "Stopped."; }
    else { showError(e.message); $("status").textContent = ""; $("answer").textContent = ""; }
  } finally {
    stopTimer();
    controller = null;
    $("ask-button").disabled = false;
    $("stop-button").disabled = true;
    $("live").classList.add("hidden");
  }
}

// ---------------------------------------------------------------- uploads

async function upload(event) {
  event.preventDefault();
  const files = $("files").files;
  if (!files.length) { $("upload-report").textContent = "Choose one or more files first."; return; }
  const collection = $("upload-collection").value.trim() || $("collection").value;
  const form = new FormData();
  for (const f of files) form.append("files", f, f.name);
  $("upload-button").disabled = true;
  $("upload-report").textContent = "Uploading " + files.length + " file(s)…";
  try {
    const path = "/v1/collections/" + encodeURIComponent(collection) + "/documents";
    const r = await (await api(path, { method: "POST", body: form })).json();
    const lines = ["Ingested into " + r.collection + ": " + r.documents + " document(s), " + r.chunks_added +
      " chunk(s) added, " + r.chunks_unchanged + " unchanged, " + r.chunks_removed + " replaced (" + r.seconds.toFixed(2) + " s)"];
    for (const s of r.skipped) lines.push("skipped " + s.path + ": " + s.reason);
    await loadCollections();  // the picker follows before the report says it is done
    $("collection").value = r.collection;
    $("upload-report").textContent = lines.join("\n");
  } catch (e) {
    $("upload-report").textContent = "Upload failed: " + e.message;
  } finally {
    $("upload-button").disabled = false;
  }
}

function setupDrop() {
  const drop = $("drop");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    $("files").files = e.dataTransfer.files;
  });
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask-form").addEventListener("submit", ask);
  $("question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("ask-form").requestSubmit(); }
  });
  $("stop-button").addEventListener("click", () => { if (controller) controller.abort(); });
  $("upload-form").addEventListener("submit", upload);
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    $("token").value = "";
    $("token-form").classList.add("hidden");
    loadCollections();
  });
  setupDrop();
  loadCollections();
});
