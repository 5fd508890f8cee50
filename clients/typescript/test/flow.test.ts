// The published client at work: the marketplace's whole flow through createMarketplaceClient,
// against the server at MARKETPLACE_URL (tests/api/test_client.py starts one and runs this file
// with `node --test`). Every request and answer is typed by ../schema.d.ts, uploads included
// (Blob | File): tsc compiles this file first, with no cast anywhere, so a route or a field that
// drifts from the document fails the build of the test.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { MarketplaceError, createMarketplaceClient, type components } from "../src/index.js";

type Job = components["schemas"]["Job"];

const baseUrl = process.env.MARKETPLACE_URL ?? "http://localhost:8080";
const examples = process.env.MARKETPLACE_EXAMPLES ?? "examples";
const unique = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;

async function image(name: string, type = "image/png"): Promise<Blob> {
  return new Blob([await readFile(join(examples, name))], { type });
}

/* A client whose token is the one it was last given (a login, a password change). */
function session() {
  const state: { token?: string } = {};
  const api = createMarketplaceClient({ baseUrl, token: () => state.token });
  return { api, state };
}

/* The error a call threw (it must throw one). */
async function failure(call: () => Promise<unknown>): Promise<MarketplaceError> {
  try {
    await call();
  } catch (error) {
    assert.ok(error instanceof MarketplaceError, String(error));
    return error;
  }
  assert.fail("the call did not fail");
}

test("a customer and a verified provider, from the first quote to the deleted account", async () => {
  const customer = session();
  const registered = await customer.api.POST("/auth/register", {
    body: { email: `ts-customer-${unique}@example.com`, password: "correct-horse-1", name: "Casey TS",
            address: "350 5th Ave, New York, NY", zip: "10001" },
  });
  assert.equal(registered.response.status, 201);
  assert.ok(registered.data);
  customer.state.token = registered.data.token;
  const user = registered.data.user;

  const pro = session();
  const proRegistered = await pro.api.POST("/auth/provider/register", {
    body: { email: `ts-pro-${unique}@example.com`, password: "correct-horse-2", name: "Pat TS",
            serviceZips: ["10001"], services: ["lawncare"] },
  });
  assert.ok(proRegistered.data);
  pro.state.token = proRegistered.data.token;
  const proId = proRegistered.data.provider.id;

  // verification: uploads are plain objects of Blobs, typed Blob | File by the schema
  const withHeadshot = await pro.api.POST("/providers/me/headshots", { body: { headshot: await image("headshot.png") } });
  assert.equal(withHeadshot.data?.headshots.length, 1);
  const licence = await pro.api.POST("/providers/me/id-documents", {
    body: { front: await image("licence-front.png"), back: await image("licence-back.png") },
  });
  assert.equal(licence.data?.idCheckStatus, "pending");

  const card = await customer.api.POST("/payments/payment-method", { body: { paymentMethodId: "pm_card_visa" } });
  assert.equal(card.data?.last4, "4242");

  // a POST whose answer is lost on the way back is sent again with the same Idempotency-Key:
  // the server answers it again instead of posting a second job
  const keys: string[] = [];
  let lose = true;
  const lossy = createMarketplaceClient({
    baseUrl,
    token: () => customer.state.token,
    fetch: async (request) => {
      keys.push(request.headers.get("Idempotency-Key") ?? "");
      const response = await fetch(request);
      if (lose) {
        lose = false;
        throw new TypeError("the connection dropped before the answer arrived");
      }
      return response;
    },
  });
  const posted = await lossy.POST("/jobs", {
    body: { service: "lawncare", description: "Mow the lawn", preferredAt: "2031-05-01T09:00:00.000Z" },
  });
  assert.equal(posted.response.status, 201);
  assert.equal(posted.response.headers.get("Idempotent-Replayed"), "true");
  assert.equal(keys.length, 2);
  assert.ok(keys[0] && keys[0] === keys[1]);
  assert.ok(posted.data);
  const job: Job = posted.data;
  const mine = await customer.api.GET("/jobs");
  assert.deepEqual(mine.data?.jobs.map((j) => j.id), [job.id]);

  const feed = await pro.api.GET("/jobs");
  assert.ok(feed.data?.jobs.some((j) => j.id === job.id && j.quoted === false));
  const quoted = await pro.api.POST("/quotes", { body: { jobId: job.id, amount: 80, note: "Includes edging" } });
  assert.ok(quoted.data);
  assert.equal(quoted.data.totalAmount, 94.4);

  // the customer looks the provider up before accepting: its public profile
  const profile = await customer.api.GET("/providers/{id}/profile", { params: { path: { id: proId } } });
  assert.equal(profile.data?.name, "Pat TS");
  assert.equal(profile.data?.verified, true);

  const accepted = await customer.api.POST("/quotes/{id}/accept", { params: { path: { id: quoted.data.id } } });
  assert.equal(accepted.data?.quote.status, "ACCEPTED");
  const myQuotes = await pro.api.GET("/providers/me/quotes");
  assert.deepEqual(myQuotes.data?.map((q) => [q.id, q.jobStatus]), [[quoted.data.id, "ACCEPTED"]]);

  // a running job blocks the deletion of the account: a typed error by code
  const busy = await failure(() => customer.api.DELETE("/users/me", { body: { password: "correct-horse-1" } }));
  assert.equal(busy.status, 409);
  assert.ok(busy.is("account_busy"));
  assert.equal(busy.code, "account_busy");

  await pro.api.PATCH("/jobs/{id}/status", { params: { path: { id: job.id } }, body: { status: "ON_THE_WAY" } });
  const started = await pro.api.POST("/jobs/{id}/start", {
    params: { path: { id: job.id } }, body: { images: [await image("lawn-before.jpg", "image/jpeg")] },
  });
  assert.equal(started.data?.status, "IN_PROGRESS");
  const completed = await pro.api.POST("/jobs/{id}/complete", {
    params: { path: { id: job.id } }, body: { images: [await image("lawn-after.jpg", "image/jpeg")] },
  });
  assert.equal(completed.data?.status, "COMPLETED");
  assert.equal(completed.data?.afterImages.length, 1);

  const tipped = await customer.api.POST("/jobs/{id}/tip", { params: { path: { id: job.id } }, body: { amount: 5 } });
  assert.equal(tipped.data?.tipAmount, 5);
  const review = await customer.api.POST("/reviews", { body: { jobId: job.id, rating: 5, comment: "Spotless" } });
  assert.equal(review.response.status, 201);

  // messages, threads and their unread counts
  await pro.api.POST("/jobs/{id}/messages", { params: { path: { id: job.id } }, body: { content: "All done!" } });
  const photo = await pro.api.POST("/jobs/{id}/messages/photo", {
    params: { path: { id: job.id } }, body: { photo: await image("lawn-after.jpg", "image/jpeg") },
  });
  assert.ok(photo.data?.content.startsWith("[IMAGE]"));
  const threads = await customer.api.GET("/users/me/threads");
  assert.deepEqual(threads.data?.map((t) => [t.jobId, t.counterpart.name, t.unreadCount]), [[job.id, "Pat TS", 2]]);
  await customer.api.POST("/jobs/{id}/messages/read", { params: { path: { id: job.id } }, body: {} });
  const read = await customer.api.GET("/users/me/threads");
  assert.equal(read.data?.[0]?.unreadCount, 0);

  const notifications = await customer.api.GET("/users/me/notifications");
  const first = notifications.data?.[0];
  assert.ok(first);
  const marked = await customer.api.POST("/users/me/notifications/{id}/read", { params: { path: { id: first.id } } });
  assert.equal(marked.data?.read, true);

  // errors are thrown, typed: their status, code and text
  const missing = await failure(() => customer.api.GET("/jobs/{id}", { params: { path: { id: "cnosuchjob000000000000000" } } }));
  assert.equal(missing.status, 404);
  assert.equal(missing.error, "Job not found");
  assert.equal(typeof missing.code, "string");
  const invalid = await failure(() => customer.api.PATCH("/users/me", { body: { name: "" } }));
  assert.equal(invalid.status, 400);
  assert.equal(invalid.error, "name: must not be empty");

  // the account: its export, a new password, then its deletion
  const exported = await customer.api.GET("/users/me/export");
  assert.deepEqual(exported.data?.jobs.map((j) => j.status), ["COMPLETED"]);
  assert.deepEqual(exported.data?.payments.map((p) => p.kind).sort(), ["job", "tip"]);
  const changed = await customer.api.POST("/auth/change-password", {
    body: { currentPassword: "correct-horse-1", newPassword: "correct-horse-9" },
  });
  assert.ok(changed.data);
  const before = customer.state.token;
  customer.state.token = changed.data.token;
  const oldSession = createMarketplaceClient({ baseUrl, token: before });
  const ended = await failure(() => oldSession.GET("/users/me"));
  assert.equal(ended.status, 401);
  const deleted = await customer.api.DELETE("/users/me", { body: { password: "correct-horse-9" } });
  assert.equal(deleted.response.status, 204);
  const gone = await failure(() => customer.api.GET("/users/me"));
  assert.equal(gone.status, 401);
  const doneJob = await pro.api.GET("/jobs/{id}", { params: { path: { id: job.id } } });
  assert.equal(doneJob.data?.customer?.name, "Deleted account");
  assert.equal(doneJob.data?.payment?.status, "PAID");
  assert.equal(user.name, "Casey TS");

  await pro.api.POST("/auth/logout");
  const loggedOut = await failure(() => pro.api.GET("/providers/me"));
  assert.equal(loggedOut.status, 401);
});
