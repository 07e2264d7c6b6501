// The Tandem page: starts agent runs, follows their event stream, decides on plans, lists runs. Plain DOM, no
// framework, no build step; every element is built with h() (never innerHTML), so run data is always text.
// Routes live in the URL's fragment (#/, #/new, #/runs/ID), so a run's link can be kept and reloaded.

const KEY = "tandem-api-key";
const $ = (id) => document.getElementById(id);

/** An element with attributes (on* keys are listeners) and children (strings become text). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

function showError(message) {
  const box = $("alert");
  box.textContent = message;
  box.hidden = !message;
}
function notice(message) { $("notice").textContent = message || ""; }

class ApiFailure extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.param = body && body.error && body.error.param;
  }
}

function headers(json) {
  const out = {};
  const key = sessionStorage.getItem(KEY);
  if (key) out.Authorization = `Bearer ${key}`;
  if (json) out["Content-Type"] = "application/json";
  return out;
}

/** A JSON API call; throws ApiFailure with the server's message on a non-2xx answer. */
async function api(method, path, body) {
  const response = await fetch(path, {
    method, headers: headers(body !== undefined), body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit", cache: "no-store",
  });
  let value = null;
  try { value = await response.json(); } catch { value = null; }
  if (!response.ok) {
    const failure = new ApiFailure(response.status, value);
    if (response.status === 401) failure.message = `The API key was refused (401): ${failure.message}`;
    throw failure;
  }
  return value;
}

// ---------------------------------------------------------------- routing

let stopStream = null;
async function route() {
  if (stopStream) { stopStream(); stopStream = null; }
  showError("");
  notice("");
  const hash = location.hash || "#/";
  const view = $("view");
  view.replaceChildren();
  try {
    const run = hash.match(/^#\/runs\/([A-Za-z0-9_-]+)$/);
    const bench = hash.match(/^#\/bench(?:\/([A-Za-z0-9_.+-]+))?$/);
    if (run) await runView(view, run[1]);
    else if (bench) await benchView(view, bench[1]);
    else if (hash === "#/new") await newRunView(view);
    else await listView(view);
  } catch (e) {
    showError(e.message);
  }
}

// ---------------------------------------------------------------- new run

function numberField(name, label, placeholder) {
  return h("div", { class: "field" }, h("label", { for: `f-${name}` }, label),
    h("input", { id: `f-${name}`, name, type: "number", min: 0, step: 1, inputmode: "numeric", placeholder }));
}

async function newRunView(view) {
  let options = { tools: [], mcp: [], budgets: {}, plans: 1 };
  try { options = await api("GET", "/v1/runs/options"); } catch (e) { showError(e.message); }
  const b = options.budgets || {};
  const select = (name, label, names, none) => h("div", { class: "field" }, h("label", { for: `f-${name}` }, label),
    h("select", { id: `f-${name}`, name }, h("option", { value: "" }, none), names.map((n) => h("option", { value: n }, n))));
  const form = h("form", { class: "form", id: "new-run", "aria-labelledby": "new-title" },
    h("div", { class: "field" }, h("label", { for: "f-goal" }, "Goal"),
      h("textarea", { id: "f-goal", name: "goal", rows: 3, required: true, placeholder: "What is 12*4+5?" })),
    h("div", { class: "row" },
      select("tools", "Tool set", options.tools || [], "server's tools"),
      select("mcp", "MCP set", options.mcp || [], "none"),
      h("div", { class: "field" }, h("label", { for: "f-approve" }, "Approval"),
        h("select", { id: "f-approve", name: "approve" },
          h("option", { value: "plan" }, "approve the plan first"), h("option", { value: "none" }, "run at once")))),
    h("fieldset", {}, h("legend", {}, "Budgets (empty: the server's default)"),
      h("div", { class: "row" },
        numberField("max_replans", "Replans", b.max_replans), numberField("max_steps", "Steps", b.max_steps),
        numberField("max_seconds", "Seconds", b.max_seconds), numberField("max_tokens", "Tokens", b.max_tokens),
        numberField("plans", "Candidate plans", options.plans))),
    h("div", {}, h("button", { type: "submit", id: "start" }, "Start run")));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = { goal: String(data.get("goal") || "").trim(), approve: data.get("approve") };
    for (const k of ["tools", "mcp"]) if (data.get(k)) body[k] = data.get(k);
    for (const k of ["max_replans", "max_steps", "max_seconds", "max_tokens", "plans"]) {
      const v = String(data.get(k) || "").trim();
      if (v !== "") body[k] = Number(v);
    }
    try {
      const created = await api("POST", "/v1/runs", body);
      location.hash = `#/runs/${created.id}`;
    } catch (e) {
      showError(e.message);
      if (e.param) { const f = form.elements[e.param]; if (f) { f.setAttribute("aria-invalid", "true"); f.focus(); } }
    }
  });
  view.append(h("h2", { id: "new-title" }, "New run"), form);
  $("f-goal").focus();
}

// ---------------------------------------------------------------- runs list

async function listView(view) {
  const list = await api("GET", "/v1/runs?limit=100");
  const runs = list.data || [];
  const statuses = ["queued", "running", "awaiting_approval", "interrupted", "finished", "cancelled"];
  const text = h("input", { id: "q", type: "search", placeholder: "goal or id" });
  const status = h("select", { id: "q-status" }, h("option", { value: "" }, "any"), statuses.map((s) => h("option", { value: s }, s)));
  const from = h("input", { id: "q-from", type: "date" });
  const to = h("input", { id: "q-to", type: "date" });
  const tbody = h("tbody");
  const cards = h("ul", { class: "cards", "aria-label": "Runs" });
  const count = h("p", { class: "hint", role: "status" });
  const day = (secs) => new Date(secs * 1000).toISOString().slice(0, 10);
  function render() {
    const q = text.value.trim().toLowerCase();
    const shown = runs.filter((r) => (!q || `${r.goal || ""} ${r.id}`.toLowerCase().includes(q))
      && (!status.value || r.status === status.value)
      && (!from.value || day(r.created) >= from.value) && (!to.value || day(r.created) <= to.value));
    tbody.replaceChildren(...shown.map((r) => h("tr", {},
      h("td", {}, h("a", { href: `#/runs/${r.id}` }, r.id)),
      h("td", {}, h("span", { class: `status status-${r.status}` }, r.status), r.stop && r.stop !== "done" ? ` (${r.stop})` : ""),
      h("td", {}, r.goal || ""), h("td", {}, new Date(r.created * 1000).toLocaleString()),
      h("td", {}, String(r.steps)), h("td", {}, String(r.replans)))));
    cards.replaceChildren(...shown.map((r) => h("li", {}, h("a", { href: `#/runs/${r.id}` }, r.goal || r.id), " ",
      h("span", { class: `status status-${r.status}` }, r.status), h("div", { class: "hint" }, r.id))));
    count.textContent = `${shown.length} of ${runs.length} runs${list.has_more ? " (the newest 100)" : ""}`;
  }
  for (const el of [text, status, from, to]) el.addEventListener("input", render);
  const field = (el, label) => h("div", { class: "field" }, h("label", { for: el.id }, label), el);
  view.append(h("h2", {}, "Runs"),
    h("div", { class: "filters", role: "search" }, field(text, "Search"), field(status, "Status"), field(from, "From"), field(to, "To"),
      h("a", { href: "#/new" }, "New run")),
    count,
    h("table", { class: "runs" }, h("thead", {}, h("tr", {}, ["Run", "Status", "Goal", "Started", "Steps", "Replans"].map((t) => h("th", { scope: "col" }, t)))), tbody),
    cards);
  render();
}

// ---------------------------------------------------------------- one run

/** Reads a server-sent event stream with fetch (EventSource cannot send the key); calls onEvent(name, data). */
function streamEvents(id, onEvent, onEnd) {
  const controller = new AbortController();
  (async () => {
    try {
      const response = await fetch(`/v1/runs/${id}/events`, { headers: headers(false), signal: controller.signal, credentials: "omit" });
      if (!response.ok) {
        let body = null; try { body = await response.json(); } catch { body = null; }
        throw new ApiFailure(response.status, body);
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let name = "message"; const data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) name = line.slice(6).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
          }
          if (data.length) onEvent(name, data.join("\n"));
        }
      }
      onEnd(null);
    } catch (e) {
      if (e.name !== "AbortError") onEnd(e);
    }
  })();
  return () => controller.abort();
}

const LONG = 300;
/** A value as text; long ones folded in a <details>. */
function shown(value, label) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  if (text === undefined) return null;
  if (text.length <= LONG) return h("pre", {}, text);
  return h("details", {}, h("summary", {}, `${label} (${text.length} characters)`), h("pre", {}, text));
}

/** What changed from one plan to the next: steps added, removed, changed (tool, arguments, dependencies). */
function planDiff(before, after) {
  const items = [];
  const old = new Map(before.steps.map((s) => [s.id, s]));
  const now = new Map(after.steps.map((s) => [s.id, s]));
  for (const s of after.steps) {
    const o = old.get(s.id);
    if (!o) items.push(h("li", { class: "added" }, `added ${s.id}: ${s.tool} ${JSON.stringify(s.args)}`));
    else {
      const parts = [];
      if (o.tool !== s.tool) parts.push(`tool ${o.tool} → ${s.tool}`);
      if (JSON.stringify(o.args) !== JSON.stringify(s.args)) parts.push(`args ${JSON.stringify(o.args)} → ${JSON.stringify(s.args)}`);
      if (JSON.stringify(o.depends_on || []) !== JSON.stringify(s.depends_on || [])) parts.push(`depends on [${(o.depends_on || []).join(", ")}] → [${(s.depends_on || []).join(", ")}]`);
      if (parts.length) items.push(h("li", { class: "changed" }, `changed ${s.id}: ${parts.join("; ")}`));
    }
  }
  for (const s of before.steps) if (!now.has(s.id)) items.push(h("li", { class: "removed" }, `removed ${s.id}: ${s.tool}`));
  return items.length ? h("ul", { class: "diff", "aria-label": "Changes from the previous plan" }, items) : h("p", { class: "hint" }, "no step changed");
}

function planTable(plan) {
  return h("table", { class: "steps" },
    h("thead", {}, h("tr", {}, ["Step", "Tool", "Arguments", "After", "What"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, plan.steps.map((s) => h("tr", {}, h("td", {}, s.id), h("td", {}, s.tool),
      h("td", {}, h("code", {}, JSON.stringify(s.args))), h("td", {}, (s.depends_on || []).join(", ")), h("td", {}, s.description || "")))));
}

/** The run's state as the timeline builds it up. */
function newRunState() {
  return { settings: null, plans: [], steps: new Set(), replans: 0, tokens: 0, first: 0, last: 0, answer: null, status: null };
}

function budgetsView(state) {
  const s = state.settings;
  if (!s) return h("p", { class: "hint" }, "budgets: not started");
  const secs = Math.round((state.last - state.first) / 1000);
  const one = (label, used, max) => h("div", { class: "budget" },
    h("div", {}, `${label}: ${used} of ${max}`),
    h("meter", { min: 0, max: Math.max(max, 1), value: Math.min(used, max), "aria-label": `${label} spent` }));
  return h("div", { class: "budgets", "aria-label": "Budgets spent" },
    one("Steps", state.steps.size, s.max_steps), one("Replans", state.replans, s.max_replans),
    one("Generated tokens", state.tokens, s.max_tokens), one("Seconds", secs, s.max_seconds));
}

/** One timeline entry for a log record (null for records not shown). */
function entry(record, state) {
  const time = record.at_ms ? h("span", { class: "time" }, new Date(record.at_ms).toLocaleTimeString()) : null;
  const item = (cls, title, ...body) => h("li", { class: `ev-${cls}` }, h("div", { class: "ev-title" }, title, time), ...body);
  const usage = (u) => (u ? ` · ${u.tokens_out} tokens out, ${u.ms} ms` : "");
  switch (record.event) {
    case "run_started": {
      const s = record.settings;
      return item("run_started", "Run started", h("p", {}, record.goal),
        h("p", { class: "hint" }, `planner ${s.planner}, executor ${s.executor}; approval ${s.approve || "none"}; budgets: ${s.max_steps} steps, ${s.max_replans} replans, ${s.max_tokens} tokens, ${s.max_seconds} s`));
    }
    case "tools_selected": return item("tools_selected", `Tools chosen for the planner (${record.tools.length} of ${record.offered})`, h("p", { class: "hint" }, record.tools.join(", ")));
    case "model_loaded": return item("model_loaded", `Model loaded: ${record.role} ${record.id}`);
    case "plan_written": {
      const before = state.plans.length ? state.plans[state.plans.length - 1] : null;
      return item("plan_written", `Plan v${record.version} (${record.origin})${usage(record.usage)}`,
        record.reason ? h("p", {}, `Why: ${record.reason}`) : null,
        before ? planDiff(before, record.plan) : null,
        planTable(record.plan),
        record.issues && record.issues.length ? h("ul", { class: "error-text", "aria-label": "Plan problems" }, record.issues.map((i) => h("li", {}, i))) : null);
    }
    case "plan_approval": return item("plan_approval", `Plan v${record.version} ${record.decision} (by ${record.by})`);
    case "step_started": return item("step_started", `Step ${record.step} started: ${record.tool}`);
    case "executor_call": return item("executor_call", `Executor for ${record.step}: ${record.purpose}${usage(record.usage)}`);
    case "step_approval": return item("step_approval", `Step ${record.step} ${record.decision}`);
    case "tool_call": return item("tool_call", `Tool call ${record.step}: ${record.tool}`, shown(record.args, "arguments"));
    case "step_finished":
      return item(record.error ? "failed" : "step_finished", `Step ${record.step} ${record.error ? "failed" : "finished"}: ${record.tool} (${record.ms} ms, via ${record.via})`,
        h("div", { class: "hint" }, "arguments"), shown(record.args, "arguments"),
        record.error ? h("p", { class: "error-text" }, record.error) : [h("div", { class: "hint" }, "output"), shown(record.output, "output")]);
    case "replan": return item("replan", `Replan from v${record.from_version}`, h("p", {}, record.reason));
    case "joined": return item("joined", `Joiner (${record.role}): ${record.verdict}${usage(record.usage)}`, shown(record.text, "text"));
    case "steps_evaluated":
      return item("steps_evaluated", `Steps checked (${record.role})${record.sent_back ? ": sent back to the planner" : ""}${usage(record.usage)}`, shown(record.judgments, "judgments"));
    case "answer": return item("answer", "Answer", h("p", {}, record.text));
    case "run_finished": return item("run_finished", `Run finished: ${record.stop}`, h("p", {}, record.detail));
    case "resumed": return item("resumed", "Resumed", h("p", { class: "hint" }, `steps already done: ${record.completed.join(", ") || "none"}${record.rerun && record.rerun.length ? `; run again: ${record.rerun.join(", ")}` : ""}`));
    default: return item("other", record.event || "event", shown(record, "record"));
  }
}

/** Folds a record into the run's state (after its entry is drawn, so a plan's diff sees the plan before). */
function account(record, state) {
  if (record.at_ms) { if (!state.first) state.first = record.at_ms; state.last = record.at_ms; }
  const u = record.usage;
  if (u && typeof u.tokens_out === "number") state.tokens += u.tokens_out;
  switch (record.event) {
    case "run_started": state.settings = record.settings; break;
    case "plan_written": state.plans.push(record.plan); break;
    case "step_finished": state.steps.add(`${record.version}/${record.step}`); break;
    case "replan": state.replans += 1; break;
    case "answer": state.answer = record.text; break;
    default: break;
  }
}

async function runView(view, id) {
  const title = h("h2", { id: "run-title" }, `Run ${id}`);
  const statusBadge = h("span", { class: "status", id: "run-status" }, "…");
  const goal = h("p", { id: "run-goal" });
  const controls = h("div", { class: "controls", role: "group", "aria-label": "Run controls" });
  const budgets = h("section", { "aria-label": "Budgets" });
  const answer = h("section", { class: "answer", id: "answer", "aria-label": "Answer", hidden: true });
  const editorBox = h("section", { id: "editor-box", "aria-label": "Plan decision" });
  const timeline = h("ol", { class: "timeline", id: "timeline", "aria-label": "Timeline", "aria-live": "polite" });
  view.append(h("div", { class: "runhead" }, title, statusBadge, h("a", { href: `#/runs/${id}`, id: "permalink" }, "link to this run")),
    goal, controls, budgets, answer, editorBox, h("h3", {}, "Timeline"), timeline);
  let state = newRunState();

  const button = (label, cls, onclick, idAttr) => h("button", { type: "button", class: cls, onclick, id: idAttr }, label);
  async function act(label, method, path, body) {
    try {
      showError("");
      await api(method, path, body);
      notice(`${label}: done`);
      follow();
    } catch (e) { showError(e.message); return e; }
    return null;
  }

  async function refresh() {
    let summary;
    try { summary = await api("GET", `/v1/runs/${id}`); } catch (e) { showError(e.message); return; }
    state.status = summary.status;
    statusBadge.textContent = summary.status + (summary.stop && summary.status === "finished" ? ` (${summary.stop})` : "");
    statusBadge.className = `status status-${summary.status}`;
    goal.textContent = summary.goal || "";
    document.title = `Tandem · ${summary.goal || id}`;
    const buttons = [];
    if (["queued", "running", "awaiting_approval", "interrupted"].includes(summary.status))
      buttons.push(button("Cancel run", "danger", () => act("Cancel", "POST", `/v1/runs/${id}/cancel`), "cancel"));
    if (summary.status === "interrupted") {
      buttons.push(button("Resume", "", () => act("Resume", "POST", `/v1/runs/${id}/resume`, {}), "resume"));
      buttons.push(button("Resume, re-running steps in doubt", "secondary", () => act("Resume", "POST", `/v1/runs/${id}/resume`, { rerun_in_doubt: true }), "resume-doubt"));
    }
    controls.replaceChildren(...buttons);
    editorBox.replaceChildren();
    if (summary.status === "awaiting_approval" && summary.plan) editorBox.append(planEditor(id, summary.plan, act));
  }

  function follow() {
    if (stopStream) stopStream();
    state = newRunState();
    timeline.replaceChildren();
    answer.hidden = true;
    budgets.replaceChildren(budgetsView(state));
    notice("following the run…");
    refresh();
    stopStream = streamEvents(id, (name, data) => {
      let record;
      try { record = JSON.parse(data); } catch { return; }
      if (["awaiting_approval", "interrupted"].includes(name) && !record.event) {
        notice(name === "awaiting_approval" ? "The plan waits for your decision." : "The run stopped before its end: resume it to go on.");
        refresh();
        return;
      }
      const li = entry(record, state);
      account(record, state);
      if (li) timeline.append(li);
      budgets.replaceChildren(budgetsView(state));
      if (state.answer !== null) { answer.hidden = false; answer.replaceChildren(h("h3", {}, "Answer"), h("p", { id: "answer-text" }, state.answer)); }
      if (record.event === "run_finished") { notice(`The run finished: ${record.stop}.`); refresh(); }
    }, (error) => { if (error) showError(error.message); });
  }
  follow();
}

/** The waiting plan as a form: each step's tool, arguments and dependencies editable; checked by the server
 * (POST /v1/runs/ID/check, the validation approving runs) before an edited plan is sent. */
function planEditor(id, plan, act) {
  const form = h("form", { class: "editor", id: "plan-editor", "aria-labelledby": "editor-title" });
  const result = h("div", { id: "check-result", role: "status" });
  const fields = plan.steps.map((s, i) => {
    const args = Object.entries(s.args || {}).map(([k, v]) => {
      const isText = typeof v === "string";
      const input = h("input", { id: `p-${i}-arg-${k}`, "data-arg": k, "data-text": isText ? "1" : "", value: isText ? v : JSON.stringify(v), spellcheck: "false" });
      return h("div", { class: "field" }, h("label", { for: input.id }, `${k}${isText ? "" : " (JSON)"}`), input);
    });
    return h("fieldset", { "data-step": i }, h("legend", {}, `Step ${s.id}`),
      h("div", { class: "row" },
        h("div", { class: "field" }, h("label", { for: `p-${i}-tool` }, "Tool"), h("input", { id: `p-${i}-tool`, value: s.tool, spellcheck: "false" })),
        h("div", { class: "field" }, h("label", { for: `p-${i}-deps` }, "After steps (comma-separated)"), h("input", { id: `p-${i}-deps`, value: (s.depends_on || []).join(", ") }))),
      h("div", { class: "field" }, h("label", { for: `p-${i}-desc` }, "What it is for"), h("input", { id: `p-${i}-desc`, value: s.description || "" })),
      args,
      h("div", { class: "field" }, h("label", { for: `p-${i}-extra` }, "More arguments (JSON object, optional)"),
        h("input", { id: `p-${i}-extra`, placeholder: "{}", spellcheck: "false" })),
      h("label", {}, h("input", { type: "checkbox", id: `p-${i}-remove` }), " remove this step"));
  });

  /** The plan as edited; throws naming the field that is not JSON. */
  function edited() {
    const steps = [];
    plan.steps.forEach((s, i) => {
      if ($(`p-${i}-remove`).checked) return;
      const args = {};
      for (const input of form.querySelectorAll(`[data-step="${i}"] [data-arg]`)) {
        const k = input.getAttribute("data-arg");
        if (input.getAttribute("data-text")) args[k] = input.value;
        else {
          try { args[k] = JSON.parse(input.value); } catch { input.setAttribute("aria-invalid", "true"); throw new Error(`step ${s.id}, argument ${k}: not JSON`); }
        }
      }
      const extra = $(`p-${i}-extra`).value.trim();
      if (extra) {
        let more;
        try { more = JSON.parse(extra); } catch { more = null; }
        if (!more || typeof more !== "object" || Array.isArray(more)) { $(`p-${i}-extra`).setAttribute("aria-invalid", "true"); throw new Error(`step ${s.id}: more arguments must be a JSON object`); }
        Object.assign(args, more);
      }
      const deps = $(`p-${i}-deps`).value.split(",").map((d) => d.trim()).filter(Boolean);
      steps.push({ id: s.id, description: $(`p-${i}-desc`).value, tool: $(`p-${i}-tool`).value.trim(), args, depends_on: deps });
    });
    return { steps };
  }
  const changed = (p) => JSON.stringify(p.steps) !== JSON.stringify(plan.steps.map((s) => ({ id: s.id, description: s.description || "", tool: s.tool, args: s.args || {}, depends_on: s.depends_on || [] })));

  function markParam(param) {
    const m = param && param.match(/^plan\.steps\[(\d+)\]\.(\w+)(?:\.(\w+))?/);
    if (!m) return;
    const input = m[2] === "tool" ? $(`p-${m[1]}-tool`) : m[2] === "depends_on" ? $(`p-${m[1]}-deps`)
      : (m[3] && $(`p-${m[1]}-arg-${m[3]}`)) || form.querySelector(`[data-step="${m[1]}"] [data-arg]`) || $(`p-${m[1]}-extra`);
    if (input) { input.setAttribute("aria-invalid", "true"); input.focus(); }
  }
  /** Checks the edited plan on the server; the plan when it can run, else null (the problems shown). */
  async function check() {
    for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    let p;
    try { p = edited(); } catch (e) { result.replaceChildren(h("p", { class: "error-text" }, e.message)); return null; }
    try {
      await api("POST", `/v1/runs/${id}/check`, { plan: p });
      result.replaceChildren(h("p", { class: "ok-text" }, "The plan is valid."));
      return p;
    } catch (e) {
      result.replaceChildren(h("p", { class: "error-text", id: "check-error" }, e.message));
      markParam(e.param);
      return null;
    }
  }
  async function approve() {
    const p = await check();
    if (!p) return;
    const failed = await act("Approve", "POST", `/v1/runs/${id}/approve`, changed(p) ? { plan: p } : {});
    if (failed) { result.replaceChildren(h("p", { class: "error-text" }, failed.message)); markParam(failed.param); }
  }
  /** Rejecting ends the run, nothing run (edits are dropped). */
  async function reject() {
    const failed = await act("Reject", "POST", `/v1/runs/${id}/reject`, {});
    if (failed) result.replaceChildren(h("p", { class: "error-text" }, failed.message));
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); approve(); });
  form.append(h("h3", { id: "editor-title" }, `Plan v${plan.version} waits for your decision`),
    h("p", { class: "hint" }, "Change a step's fields to edit the plan; it is checked against the run's tools before it is sent."),
    ...fields, result,
    h("div", { class: "controls" },
      h("button", { type: "submit", id: "approve" }, "Approve"),
      h("button", { type: "button", class: "secondary", id: "check", onclick: () => check() }, "Check plan"),
      h("button", { type: "button", class: "danger", id: "reject", onclick: () => reject() }, "Reject")));
  return form;
}

// ---------------------------------------------------------------- benchmark results

/** The runs of the server's --bench-results directory, or one run: its chart, summary and records. */
async function benchView(view, name) {
  if (!name) {
    const list = await api("GET", "/v1/bench");
    const rows = (list.data || []).map((r) => h("tr", {}, h("td", {}, h("a", { href: `#/bench/${r.name}` }, r.name)),
      h("td", {}, r.suite || ""), h("td", {}, [r.summary ? "summary" : "", r.samples ? "records" : "", r.chart ? "chart" : ""].filter(Boolean).join(", "))));
    view.append(h("h2", {}, "Benchmark results"),
      rows.length ? h("table", { class: "bench" }, h("thead", {}, h("tr", {}, ["Run", "Suite", "Has"].map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, rows))
        : h("p", {}, "No benchmark runs in the results directory."));
    return;
  }
  const run = await api("GET", `/v1/bench/${name}`);
  view.append(h("h2", {}, `Benchmark ${name}`), h("p", {}, h("a", { href: "#/bench" }, "all benchmark runs")));
  if (run.chart) {
    // Shown as an image from a blob (an <img> runs no script in an SVG; the CSP allows blob: images only).
    const url = URL.createObjectURL(new Blob([run.chart], { type: "image/svg+xml" }));
    view.append(h("h3", {}, "Chart"), h("img", { src: url, alt: `Quality against latency of the pairs in ${name}`, class: "chart" }));
  }
  if (run.markdown) view.append(h("h3", {}, "Summary"), h("pre", { id: "bench-summary" }, run.markdown));
  if (run.summary) view.append(h("details", {}, h("summary", {}, "summary.json"), h("pre", {}, JSON.stringify(run.summary, null, 2))));
  const records = h("div", { id: "bench-samples" });
  view.append(h("h3", {}, "Records"), records);
  async function page(offset) {
    const got = await api("GET", `/v1/bench/${name}/samples?offset=${offset}&limit=50`);
    const label = (r, i) => {
      const score = r.score === undefined ? "" : ` · score ${JSON.stringify(r.score)}`;
      return `#${offset + i + 1} ${r.sample || r.id || ""}${score}${r.error ? " · error" : ""}`;
    };
    const nav = h("div", { class: "controls" },
      h("button", { type: "button", class: "secondary", disabled: offset === 0, onclick: () => page(Math.max(0, offset - 50)) }, "Earlier"),
      h("span", { class: "hint" }, `${got.total ? offset + 1 : 0}–${offset + got.data.length} of ${got.total}`),
      h("button", { type: "button", class: "secondary", disabled: offset + got.data.length >= got.total, onclick: () => page(offset + 50) }, "Later"));
    records.replaceChildren(nav, h("ul", { class: "samples" }, got.data.map((r, i) =>
      h("li", {}, h("details", {}, h("summary", {}, label(r, i)), h("pre", {}, JSON.stringify(r, null, 2)))))));
  }
  await page(0);
}

// ---------------------------------------------------------------- start

function init() {
  const input = $("api-key");
  input.value = sessionStorage.getItem(KEY) || "";
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (key) sessionStorage.setItem(KEY, key); else sessionStorage.removeItem(KEY);
    notice(key ? "The key is kept for this browser session." : "No key.");
    route();
  });
  window.addEventListener("hashchange", route);
  route();
}
init();
