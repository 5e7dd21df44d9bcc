// The MCP Supervisor dashboard: a live table of servers, their strips, an event timeline,
// actions. The page holds no secret: its actions carry the session cookie the login URL
// set (HttpOnly: this script never sees it). The page starts from the state it was
// served with (the JSON block #snapshot: the feed's "hello" as of then), then follows
// the /ws feed. Text from servers is only ever set with textContent or as an attribute
// value, never parsed as HTML; the strips arrive as drawings (element trees, see paint)
// built element by element.
"use strict";

(() => {
  const HEALTH = {
    connected: "green", connecting: "yellow", degraded: "yellow", unverified: "yellow",
    disconnected: "red", failed: "red",
    needs_auth: "yellow", refreshing: "yellow", auth_failed: "red",
    idle: "grey", stopped: "grey", disabled: "grey",
  };
  const GOOD = new Set([
    "mcp.connected", "mcp.health.recovered", "mcp.auth.completed", "mcp.auth.refreshed",
  ]);
  const BAD = new Set([
    "mcp.error", "mcp.local.crashed", "mcp.disconnected", "mcp.health.stale", "mcp.health.down",
    "mcp.auth.failed", "supervisor.child.gave_up", "supervisor.escalated",
    "supervisor.config.rejected",
  ]);
  const WARN = new Set([
    "mcp.connecting", "mcp.auth.started", "supervisor.child.restarted", "bus.dropped",
    "mcp.health.probe_changed",
  ]);
  const KEEP = 300; // events kept per timeline

  const SVG = "http://www.w3.org/2000/svg";
  // What a drawing may contain: these elements, these attributes (no URL, no handler).
  const SVG_TAGS = new Set(["svg", "g", "rect", "line", "circle", "polygon", "path", "text", "title"]);
  const HTML_TAGS = new Set(["div", "span"]);
  const ATTRIBUTE = /^(class|role|aria-label|viewBox|width|height|x|y|x1|y1|x2|y2|cx|cy|r|d|points|fill|fill-opacity|stroke|stroke-width|stroke-opacity|stroke-dasharray|text-anchor|transform|data-(state|action|mark))$/;

  const $ = (id) => document.getElementById(id);
  const tbody = $("servers").tBodies[0];
  const rows = new Map(); // server name -> {tr, cells}
  const strips = new Map(); // server name -> its strip's box
  const timelines = new Map([["*", []]]); // server name or "*" -> events, oldest first
  let servers = [];
  let offset = 0; // server clock minus ours, in ms
  let selected = "*";

  // ---------------------------------------------------------------- formatting

  const now = () => (Date.now() + offset) / 1000;

  function duration(seconds) {
    if (seconds == null || !isFinite(seconds)) return "—";
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return `${seconds}s`;
    const m = Math.floor(seconds / 60), s = seconds % 60;
    if (m < 60) return `${m}m ${s}s`;
    const h = Math.floor(m / 60);
    return h < 48 ? `${h}h ${m % 60}m` : `${Math.floor(h / 24)}d ${h % 24}h`;
  }

  function ms(value) {
    return value == null ? "—" : value < 10 ? value.toFixed(1) : String(Math.round(value));
  }

  function clock(ts) {
    return new Date(ts * 1000 - offset).toLocaleTimeString([], { hour12: false });
  }

  function statusDetail(r) {
    if (r.status === "disconnected" && r.next_retry_at != null) {
      const wait = Math.max(0, r.next_retry_at - now());
      return `retry ${r.retry_attempt + 1} in ${wait.toFixed(wait < 10 ? 1 : 0)}s`;
    }
    if (r.status === "connecting" && r.retry_attempt > 0) return `attempt ${r.retry_attempt + 1}`;
    if (r.status === "unverified") {
      const heard = lastHeard(r);
      return heard == null ? "not heard from yet" : `not heard from for ${duration(now() - heard)}`;
    }
    if (r.status === "needs_auth") return `needs login: mcp-supervisor auth login ${r.server}`;
    if (r.status === "refreshing") return "refreshing its OAuth token";
    if (r.status === "idle") return "not started";
    if (r.status === "disabled") return "not started: disabled in the config";
    return "";
  }

  // When the server last sent anything on its connection, else its last good exchange.
  function lastHeard(r) {
    return r.last_heard != null ? r.last_heard : r.last_ok;
  }

  // "heard 3s ago · ping 2.1 ms": when it was last heard from and its last probe.
  function heardLine(r) {
    const heard = lastHeard(r);
    const parts = [heard == null ? "never heard from" : `heard ${duration(now() - heard)} ago`];
    if (r.probe_method && r.last_probe_ms != null) {
      parts.push(`${r.probe_method} ${ms(r.last_probe_ms)} ms`);
    }
    if (r.probes_missed) parts.push(`${r.probes_missed} of ${r.probes} probes missed`);
    return parts.join(" · ");
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text != null) node.textContent = text;
    return node;
  }

  // ---------------------------------------------------------------- servers table

  function row(name) {
    let entry = rows.get(name);
    if (entry) return entry;
    const tr = el("tr");
    tr.dataset.server = name;
    const cells = {};
    const add = (field, className) => {
      const td = el("td", className);
      td.dataset.field = field;
      tr.append(td);
      cells[field] = td;
      return td;
    };
    const nameCell = add("name");
    cells.nameText = el("span", "name", name);
    cells.type = el("span", "type");
    nameCell.append(cells.nameText, cells.type);
    const statusCell = add("status");
    const wrap = el("div", "status");
    cells.dot = el("span", "dot");
    cells.statusText = el("span", "status-text");
    cells.detail = el("span", "detail");
    wrap.append(cells.dot, cells.statusText, cells.detail);
    statusCell.append(wrap);
    add("tools", "num");
    add("restarts", "num");
    add("calls", "num");
    add("latency", "num");
    add("uptime");
    add("error", "error");
    const actions = add("actions", "actions");
    for (const [action, label] of [["restart", "Restart"], ["stop", "Stop"]]) {
      const button = el("button", "", label);
      button.type = "button";
      button.dataset.action = action;
      button.dataset.server = name;
      button.title = `${label} ${name}`;
      actions.append(button);
    }
    entry = { tr, cells };
    rows.set(name, entry);
    return entry;
  }

  function renderServers() {
    const seen = new Set();
    for (const r of servers) {
      seen.add(r.server);
      const { tr, cells } = row(r.server);
      const health = HEALTH[r.status] || "grey";
      tr.dataset.status = r.status;
      tr.dataset.health = health;
      tr.classList.toggle("selected", selected === r.server);
      cells.dot.dataset.health = health;
      cells.type.textContent = r.type;
      cells.statusText.textContent = r.status;
      cells.detail.textContent = statusDetail(r);
      cells.statusText.title = heardLine(r);
      cells.tools.textContent = r.tool_count == null ? "—" : String(r.tool_count);
      cells.restarts.textContent = String(r.restarts);
      // A tool's own error is not the server failing: counted apart, shown when any.
      const n = r.calls_tool_error || 0;
      const toolErrors = n ? ` (+${n} tool error${n === 1 ? "" : "s"})` : "";
      cells.calls.textContent = `${r.calls_ok} / ${r.calls_failed}${toolErrors}`;
      cells.latency.textContent = `${ms(r.latency_p50_ms)} / ${ms(r.latency_p99_ms)} ms`;
      cells.uptime.textContent =
        r.status === "connected" && r.connected_since != null ? duration(now() - r.connected_since) : "—";
      cells.error.textContent = r.last_error || "";
      cells.error.title = r.last_error || "";
      // A disabled server is not supervised: there is nothing to restart or stop.
      for (const button of tr.querySelectorAll("button")) button.hidden = r.status === "disabled";
      if (tr.parentNode !== tbody || tr !== tbody.children[servers.indexOf(r)]) {
        tbody.append(tr);
      }
    }
    for (const [name, { tr }] of rows) {
      if (!seen.has(name)) { tr.remove(); rows.delete(name); }
    }
    $("empty").hidden = servers.length > 0;
    const connected = servers.filter((r) => r.status === "connected");
    const tools = connected.reduce((n, r) => n + (r.tool_count || 0), 0);
    const disabled = servers.filter((r) => r.status === "disabled").length;
    $("summary").textContent =
      `${servers.length} server${servers.length === 1 ? "" : "s"} configured` +
      `${disabled ? ` (${disabled} disabled)` : ""} · ` +
      `${connected.length} connected · ${tools} tool${tools === 1 ? "" : "s"} available`;
    renderFilters();
  }

  // ---------------------------------------------------------------- timeline

  function eventServer(e) {
    return e.server || e.child || null;
  }

  function addEvents(events) {
    for (const e of events) {
      const keys = ["*"];
      const name = eventServer(e);
      if (name) keys.push(name);
      for (const key of keys) {
        if (!timelines.has(key)) timelines.set(key, []);
        const list = timelines.get(key);
        list.push(e);
        if (list.length > KEEP) list.splice(0, list.length - KEEP);
      }
    }
  }

  function fields(e) {
    const parts = [];
    for (const [key, value] of Object.entries(e)) {
      if (key === "kind" || key === "ts" || key === "server") continue;
      if (value == null) continue;
      let text = Array.isArray(value) ? value.join(", ")
        : typeof value === "number" && !Number.isInteger(value) ? value.toFixed(3)
        : typeof value === "object" ? JSON.stringify(value) : String(value);
      if (text.length > 160) text = text.slice(0, 159) + "…";
      parts.push(`${key}=${text}`);
    }
    return parts.join("  ");
  }

  function renderTimeline() {
    const list = timelines.get(selected) || [];
    const items = [];
    for (let i = list.length - 1; i >= 0; i--) {
      const e = list[i];
      const li = el("li");
      li.dataset.kind = e.kind;
      li.dataset.server = eventServer(e) || "";
      li.dataset.tone = GOOD.has(e.kind) ? "good" : BAD.has(e.kind) ? "bad" : WARN.has(e.kind) ? "warn" : "";
      const detail = fields(e);
      const fieldsNode = el("span", "fields", detail);
      fieldsNode.title = detail;
      li.append(el("span", "time", clock(e.ts)), el("span", "server", eventServer(e) || "—"),
        el("span", "kind", e.kind), fieldsNode);
      items.push(li);
    }
    $("timeline").replaceChildren(...items);
  }

  function renderFilters() {
    const names = ["*", ...servers.map((r) => r.server)];
    const box = $("filters");
    const current = [...box.children].map((b) => b.dataset.filter);
    if (current.join("\n") !== names.join("\n")) {
      box.replaceChildren(...names.map((name) => {
        const button = el("button", "", name === "*" ? "all servers" : name);
        button.type = "button";
        button.dataset.filter = name;
        button.setAttribute("role", "tab");
        return button;
      }));
    }
    for (const b of box.children) b.setAttribute("aria-selected", String(b.dataset.filter === selected));
  }

  function select(name) {
    selected = selected === name ? "*" : name;
    renderServers();
    renderTimeline();
  }

  // ---------------------------------------------------------------- strips

  // A drawing, [tag, {attribute: value}, [child...]] with text children as strings,
  // built as DOM nodes: nothing in it is parsed, anything not allowed is left out.
  function paint(node) {
    if (typeof node === "string") return document.createTextNode(node);
    const [tag, attributes, children] = node;
    const svg = SVG_TAGS.has(tag);
    if (!svg && !HTML_TAGS.has(tag)) return document.createTextNode("");
    const element = svg ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (ATTRIBUTE.test(name)) element.setAttribute(name, String(value));
    }
    for (const child of children) element.append(paint(child));
    return element;
  }

  function renderStrips(drawings) {
    const box = $("strips");
    const names = servers.map((r) => r.server).filter((name) => drawings[name]);
    for (const [name, strip] of strips) {
      if (!names.includes(name)) { strip.remove(); strips.delete(name); }
    }
    names.forEach((name, index) => {
      let strip = strips.get(name);
      if (!strip) {
        strip = el("div", "strip");
        strip.dataset.server = name;
        const title = el("h3", "", name);
        title.append(" ", el("span", "heard"));
        strip.append(title);
        strips.set(name, strip);
      }
      const record = servers.find((r) => r.server === name);
      strip.querySelector(".heard").textContent = record ? heardLine(record) : "";
      const drawing = paint(drawings[name]);
      if (strip.children.length > 1) strip.lastChild.replaceWith(drawing);
      else strip.append(drawing);
      if (box.children[index] !== strip) box.insertBefore(strip, box.children[index] || null);
    });
  }

  function minutes(seconds) {
    const m = seconds / 60;
    return `Last ${Number.isInteger(m) ? m : m.toFixed(1)} minute${m === 1 ? "" : "s"}`;
  }

  // ---------------------------------------------------------------- actions

  function notice(text, kind) {
    const node = $("notice");
    node.textContent = text;
    node.dataset.kind = kind || "";
  }

  async function act(action, name, button) {
    button.disabled = true;
    notice(`${action} ${name}…`);
    try {
      const response = await fetch(`/api/servers/${encodeURIComponent(name)}/${action}`, {
        method: "POST",
        credentials: "same-origin",
        cache: "no-store",
      });
      const body = await response.json().catch(() => ({}));
      if (response.ok) notice(`${name}: ${action} done`);
      else notice(`${name}: ${action} refused (HTTP ${response.status}): ${body.error || ""}`, "error");
    } catch (error) {
      notice(`${name}: ${action} failed: ${error}`, "error");
    } finally {
      button.disabled = false;
    }
  }

  tbody.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button) { act(button.dataset.action, button.dataset.server, button); return; }
    const tr = event.target.closest("tr[data-server]");
    if (tr) select(tr.dataset.server);
  });
  $("filters").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-filter]");
    if (button) { selected = "*"; select(button.dataset.filter); }
  });

  // ---------------------------------------------------------------- feed

  let retry = 500;

  function live(on, text) {
    $("live").dataset.live = String(on);
    $("live-text").textContent = text;
    document.body.dataset.feed = on ? "live" : "offline";
  }

  // One frame: the snapshot, or one from the feed.
  function apply(data) {
    offset = data.ts * 1000 - Date.now();
    if (data.type === "hello") {
      for (const list of timelines.values()) list.length = 0;
    }
    servers = data.servers;
    if (data.events.length) addEvents(data.events);
    renderServers();
    if (data.events.length || data.type === "hello") renderTimeline();
    if (data.legend) $("legend").replaceChildren(paint(data.legend));
    if (data.window) $("strips-title").textContent = minutes(data.window);
    if (data.strips) renderStrips(data.strips);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/ws");
    ws.onopen = () => { retry = 500; live(true, "live"); };
    ws.onmessage = (message) => apply(JSON.parse(message.data));
    ws.onclose = () => {
      live(false, "reconnecting…");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 5000);
    };
  }

  // The first render: the state the page was served with, before any feed.
  const snapshot = JSON.parse($("snapshot").textContent);
  apply(snapshot);
  live(false, `as of ${clock(snapshot.ts)}`);
  document.body.dataset.feed = "snapshot";
  setInterval(() => { if (servers.length) renderServers(); }, 1000);
  connect();
})();
