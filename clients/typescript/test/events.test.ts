// The events() helper against the server at MARKETPLACE_URL (tests/api/test_events.py compiles
// this file with tsc and runs it with `node --test`): typed events as they come, a dropped
// connection resumed with Last-Event-ID (the event committed while it was down arrives first),
// a ticket instead of the header, and the parser on its own (WHATWG line endings and fields).
import assert from "node:assert/strict";
import { test } from "node:test";
import createClient from "openapi-fetch";
import { EventStreamParser, events, type StreamEvent } from "../src/events.js";
import type { paths } from "../schema.js";

const baseUrl = process.env.MARKETPLACE_URL ?? "http://localhost:8080";
const api = createClient<paths>({ baseUrl });
const unique = () => `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;

async function customer() {
  const r = await api.POST("/auth/register", {
    body: { email: `ts-events-${unique()}@example.com`, password: "correct-horse-1", name: "Evie", address: "1 Main St",
            zip: "10001" },
  });
  assert.equal(r.response.status, 201);
  assert.ok(r.data);
  return r.data;
}

async function postJob(token: string): Promise<string> {
  const r = await api.POST("/jobs", {
    headers: { Authorization: `Bearer ${token}` },
    body: { service: "lawncare", description: "Mow", preferredAt: "2031-05-01T09:00:00.000Z" },
  });
  assert.equal(r.response.status, 201);
  assert.ok(r.data);
  return r.data.id;
}

/** A promise of the next call of the returned function. */
function signal(): [Promise<void>, () => void] {
  let fire = () => {};
  const p = new Promise<void>((resolve) => (fire = resolve));
  return [p, () => fire()];
}

/** The next event of it for which pick() is true (others are skipped). */
async function next(it: AsyncGenerator<StreamEvent>, pick: (ev: StreamEvent) => boolean): Promise<StreamEvent> {
  for (;;) {
    const { value, done } = await it.next();
    assert.ok(!done, "the stream ended");
    if (pick(value)) return value;
  }
}

test("events() yields typed events and resumes a dropped connection from the last id", async () => {
  const user = await customer();
  const controller = new AbortController();
  // a fetch that lets the test cut the current connection, and hold the reconnect back
  const sentLastEventIds: (string | null)[] = [];
  let cut: AbortController | undefined;
  let gate: Promise<void> = Promise.resolve();
  let openGate = () => {};
  const cuttable: typeof fetch = async (input, init) => {
    await gate;
    cut = new AbortController();
    // the last id goes as the lastEventId parameter (no CORS preflight has to allow it)
    sentLastEventIds.push(new URL(String(input)).searchParams.get("lastEventId"));
    controller.signal.addEventListener("abort", () => cut?.abort(), { once: true });
    return fetch(input, { ...init, signal: cut.signal });
  };
  const [opened, onOpen] = signal();
  const it = events({ baseUrl, token: user.token, fetch: cuttable, signal: controller.signal, onOpen });
  const first = it.next(); // connects
  await opened;
  const jobId = await postJob(user.token);
  const created = (await first).value as StreamEvent;
  assert.equal(created.event, "job.created");
  if (created.event === "job.created") assert.equal(created.data.id, jobId); // data typed as Job
  assert.match(String((created as { id?: string }).id), /^\d+$/);

  // the connection drops; while the app is away another job is posted
  gate = new Promise((resolve) => (openGate = resolve));
  cut?.abort();
  const missed = await postJob(user.token);
  openGate();
  const replayed = await next(it, (ev) => ev.event === "job.created");
  assert.ok(replayed.event === "job.created" && replayed.data.id === missed);
  assert.equal(sentLastEventIds.length, 2);
  assert.equal(sentLastEventIds[0], null);
  assert.ok(Number(sentLastEventIds[1]) >= Number((created as { id?: string }).id));
  controller.abort();
  assert.equal((await it.next()).done, true);
});

test("events() opens the stream with a ticket when there is no token to send", async () => {
  const user = await customer();
  const controller = new AbortController();
  const ticket = async () => {
    const r = await api.POST("/events/ticket", { headers: { Authorization: `Bearer ${user.token}` } });
    assert.equal(r.response.status, 200);
    assert.ok(r.data);
    return r.data.ticket;
  };
  const [opened, onOpen] = signal();
  const it = events({ baseUrl, ticket, signal: controller.signal, onOpen });
  const first = it.next();
  await opened;
  const jobId = await postJob(user.token);
  const ev = (await first).value as StreamEvent;
  assert.ok(ev.event === "job.created" && ev.data.id === jobId);
  controller.abort();
});

test("the parser follows the WHATWG event stream format", () => {
  const p = new EventStreamParser();
  const got = [
    ...p.push("retry: 1500\r\n\r\n: keep-alive\nid: 7\nevent: job.upd"),
    ...p.push("ated\ndata: {\"a\":\r"),
    ...p.push("\ndata: 1}\n\nid: 8\n\nevent: reset\ndata: {}\r\r"),
  ];
  assert.equal(p.retryMs, 1500);
  assert.deepEqual(got, [
    { id: "7", event: "job.updated", data: "{\"a\":\n1}" },
    { event: "reset", data: "{}" },
  ]);
  assert.equal(p.lastEventId, "8"); // a lone id line moves the position
});
