// The client on React Native, as far as Node can play it (test/react-native-env.ts, imported
// first: no crypto.randomUUID, a fetch that cannot stream, xhr2 as XMLHttpRequest, FormData that
// takes { uri, name, type }), against the server at MARKETPLACE_URL (tests/api/test_client.py
// runs it): idempotency keys from crypto.getRandomValues or an injected generator, an upload of
// device files the server receives byte for byte, live updates over XMLHttpRequest that resume
// after the connection is cut with nothing lost or repeated; and what holds on every platform:
// a password change or an account's deletion never retried, list filters as the server reads
// them, `data` never undefined and bodies required where the route requires them (tsc).
import { fetchCalls } from "./react-native-env.js";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { MarketplaceError, createMarketplaceClient, events, randomKey, type StreamEvent } from "../src/index.js";

const baseUrl = process.env.MARKETPLACE_URL ?? "http://localhost:8080";
const examples = resolve(process.env.MARKETPLACE_EXAMPLES ?? "examples");
const unique = () => `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;

async function customer(options: { idempotencyKey?: () => string } = {}) {
  const state: { token?: string } = {};
  const api = createMarketplaceClient({ baseUrl, token: () => state.token, ...options });
  const password = "correct-horse-1";
  const email = `rn-${unique()}@example.com`;
  const { data } = await api.POST("/auth/register", {
    body: { email, password, name: "Rae Native", address: "350 5th Ave, New York, NY", zip: "10001" },
  });
  state.token = data.token; // `data` is the answer: no check, no cast
  return { api, state, email, password, id: data.user.id };
}

test("the React Native-like environment is what it says", () => {
  assert.equal(typeof (globalThis.crypto as { randomUUID?: unknown }).randomUUID, "undefined");
  assert.equal(typeof (globalThis as { TextDecoderStream?: unknown }).TextDecoderStream, "undefined");
  assert.equal(typeof (globalThis as { XMLHttpRequest?: unknown }).XMLHttpRequest, "function");
});

test("idempotency keys from crypto.getRandomValues, or from the app's own generator", async () => {
  const key = randomKey();
  assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.notEqual(randomKey(), key);
  const { api } = await customer(); // a POST: its key was made with getRandomValues
  const { data: job } = await api.POST("/jobs", { body: { service: "lawncare", isAsap: true } });
  assert.equal(job.status, "PENDING");

  // without getRandomValues either: an injected generator, else a clear error before sending
  const getRandomValues = globalThis.crypto.getRandomValues;
  Object.defineProperty(globalThis.crypto, "getRandomValues", { value: undefined, configurable: true, writable: true });
  try {
    let n = 0;
    const keys: string[] = [];
    const injected = await customer({ idempotencyKey: () => (keys.push(`app-key-${unique()}-${n++}`), keys.at(-1)!) });
    await injected.api.POST("/jobs", { body: { service: "lawncare", isAsap: true } });
    assert.equal(keys.length, 2); // the registration's and the job's
    const before = fetchCalls;
    const bare = createMarketplaceClient({ baseUrl });
    await assert.rejects(
      bare.POST("/auth/login", { body: { email: "x@example.com", password: "x" } }),
      /crypto\.getRandomValues.*idempotencyKey/,
    );
    assert.equal(fetchCalls, before); // nothing was sent
  } finally {
    Object.defineProperty(globalThis.crypto, "getRandomValues", { value: getRandomValues, configurable: true, writable: true });
  }
});

test("uploads take React Native's { uri, name, type } files", async () => {
  const { api, state } = await customer();
  const { data: job } = await api.POST("/jobs", { body: { service: "lawncare", isAsap: true } });
  const photo = { uri: pathToFileURL(join(examples, "lawn-before.jpg")).href, name: "lawn.jpg", type: "image/jpeg" };
  const { data } = await api.POST("/jobs/{id}/images", { params: { path: { id: job.id } }, body: { images: [photo] } });
  assert.equal(data.images.length, 1);
  // the server has the very bytes of the file
  const stored = await fetch(data.images[0]!, { headers: { Authorization: `Bearer ${state.token}` } });
  assert.equal(stored.status, 200);
  assert.deepEqual(Buffer.from(await stored.arrayBuffer()), await readFile(join(examples, "lawn-before.jpg")));
});

test("events() reads the stream with XMLHttpRequest and resumes after a cut, nothing lost or twice", async () => {
  const { api, state } = await customer();
  const controller = new AbortController();
  let opens = 0;
  let opened = () => {};
  const it = events({
    baseUrl, token: state.token!, signal: controller.signal, maxConnectionBytes: 64,
    onOpen: () => (opens++, opened()),
  });
  const seen: StreamEvent[] = [];
  const reading = (async () => {
    for await (const ev of it) {
      seen.push(ev);
      if (seen.filter((e) => e.event === "job.created").length === 4) return;
    }
  })();
  await new Promise<void>((r) => (opened = r));
  // each event is more than 64 characters: every one ends its connection, the next resumes it
  const posted: string[] = [];
  for (let i = 0; i < 4; i++) posted.push((await api.POST("/jobs", { body: { service: "lawncare", isAsap: true } })).data.id);
  await reading;
  controller.abort();
  const jobs = seen.flatMap((e) => (e.event === "job.created" ? [e] : []));
  assert.deepEqual(jobs.map((e) => e.data.id), posted);
  const ids = jobs.map((e) => Number((e as { id?: string }).id));
  assert.deepEqual([...ids].sort((a, b) => a - b), ids);
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(opens >= 2, `connections: ${opens}`);
});

test("a password change or an account's deletion is never retried; other requests are", async () => {
  const { email, password } = await customer();
  // a fetch whose answers are lost: the request reaches the server, its answer never comes back
  let sent = 0;
  const lossy = async (request: Request) => {
    sent++;
    await fetch(request);
    throw new TypeError("network error: the answer was lost");
  };
  const state: { token?: string } = {};
  const plain = createMarketplaceClient({ baseUrl, token: () => state.token });
  state.token = (await plain.POST("/auth/login", { body: { email, password } })).data.token;
  const lost = createMarketplaceClient({ baseUrl, token: () => state.token, fetch: lossy, maxRetryDelayMs: 10 });
  await assert.rejects(
    lost.POST("/auth/change-password", { body: { currentPassword: password, newPassword: "correct-horse-9" } }),
    /answer was lost/,
  );
  assert.equal(sent, 1); // tried once: it did change the password
  sent = 0;
  await assert.rejects(lost.POST("/jobs", { body: { service: "lawncare", isAsap: true } }), /answer was lost/);
  assert.equal(sent, 3); // a job's POST is retried (its Idempotency-Key makes that safe)
  state.token = (await plain.POST("/auth/login", { body: { email, password: "correct-horse-9" } })).data.token;
  sent = 0;
  await assert.rejects(lost.DELETE("/users/me", { body: { password: "correct-horse-9" } }), /answer was lost/);
  assert.equal(sent, 1);
});

test("list filters are sent as the server reads them", async () => {
  const { api, state } = await customer();
  const { data: a } = await api.POST("/jobs", { body: { service: "lawncare", isAsap: true } });
  const { data: b } = await api.POST("/jobs", { body: { service: "lawncare", isAsap: true } });
  await api.POST("/jobs/{id}/cancel", { params: { path: { id: b.id } } });
  const both = (await api.GET("/jobs", { params: { query: { status: ["PENDING", "CANCELLED"] } } })).data.jobs;
  const pending = (await api.GET("/jobs", { params: { query: { status: ["PENDING"] } } })).data.jobs;
  assert.deepEqual(both.map((j) => [j.id, j.status]), [[b.id, "CANCELLED"], [a.id, "PENDING"]]); // newest first
  assert.deepEqual(pending.map((j) => j.id), [a.id]);
  // the bracket form some libraries write is refused, not half-read
  const r = await fetch(`${baseUrl}/jobs?status[]=PENDING`, { headers: { Authorization: `Bearer ${state.token}` } });
  assert.equal(r.status, 400);
});

// ---- types only (tsc compiles this file first: these lines fail the build if they drift)
export async function typesOnly(api: ReturnType<typeof createMarketplaceClient>): Promise<string> {
  // @ts-expect-error: POST /auth/login requires its body
  await api.POST("/auth/login");
  const me = await api.GET("/users/me");
  const email: string = me.data.email; // data is never undefined
  try {
    await api.DELETE("/users/me", { body: { password: "p" } });
  } catch (e) {
    if (e instanceof MarketplaceError && e.is("account_busy")) return "busy";
  }
  return email;
}
