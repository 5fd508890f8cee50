// The generated types at work: the marketplace's core flow through openapi-fetch, against the
// server at MARKETPLACE_URL (tests/api/test_client.py starts one and runs this file with
// `node --test`). Every request and answer is typed by ../schema.d.ts; tsc compiles this file
// first, so a route or field that drifts from the document fails the build of the test.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import createClient from "openapi-fetch";
import type { components, paths } from "../schema.js";

type Job = components["schemas"]["Job"];

const baseUrl = process.env.MARKETPLACE_URL ?? "http://localhost:8080";
const examples = process.env.MARKETPLACE_EXAMPLES ?? "examples";
const api = createClient<paths>({ baseUrl });
const unique = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/* A multipart body of sample PNGs by field, and the serializer that sends it as it is. */
async function multipart(files: Record<string, string>) {
  const form = new FormData();
  for (const [field, name] of Object.entries(files))
    form.append(field, new Blob([await readFile(join(examples, name))], { type: "image/png" }), name);
  return { body: form as never, bodySerializer: (body: unknown) => body as FormData };
}

test("a customer posts a job, a verified provider quotes it, the customer accepts", async () => {
  const customer = await api.POST("/auth/register", {
    body: { email: `ts-customer-${unique}@example.com`, password: "correct-horse-1", name: "Casey TS",
            address: "350 5th Ave, New York, NY", zip: "10001" },
  });
  assert.equal(customer.response.status, 201);
  assert.ok(customer.data);
  const user = customer.data.user;

  const registered = await api.POST("/auth/provider/register", {
    body: { email: `ts-pro-${unique}@example.com`, password: "correct-horse-2", name: "Pat TS",
            serviceZips: ["10001"], services: ["lawncare"] },
  });
  assert.equal(registered.response.status, 201);
  assert.ok(registered.data);
  const pro = registered.data;

  // verification: a headshot and both sides of the licence (multipart)
  const withHeadshot = await api.POST("/providers/me/headshots", {
    headers: bearer(pro.token), ...await multipart({ headshot: "headshot.png" }),
  });
  assert.equal(withHeadshot.response.status, 200);
  assert.equal(withHeadshot.data?.headshots.length, 1);
  const verified = await api.POST("/providers/me/id-documents", {
    headers: bearer(pro.token), ...await multipart({ front: "licence-front.png", back: "licence-back.png" }),
  });
  assert.equal(verified.response.status, 200);
  assert.equal(verified.data?.idCheckStatus, "pending");

  const posted = await api.POST("/jobs", {
    headers: { ...bearer(customer.data.token), "Idempotency-Key": `ts-job-${unique}` },
    body: { service: "lawncare", description: "Mow the lawn", preferredAt: "2031-05-01T09:00:00.000Z" },
  });
  assert.equal(posted.response.status, 201);
  assert.ok(posted.data);
  const job: Job = posted.data;
  assert.equal(job.status, "PENDING");
  assert.equal(job.customerId, user.id);

  const feed = await api.GET("/jobs", { headers: bearer(pro.token) });
  assert.ok(feed.data?.jobs.some((j) => j.id === job.id && j.quoted === false));

  const quoted = await api.POST("/quotes", {
    headers: bearer(pro.token),
    body: { jobId: job.id, amount: 80, note: "Includes edging" },
  });
  assert.equal(quoted.response.status, 201);
  assert.ok(quoted.data);
  assert.equal(quoted.data.platformFee, 14.4);
  assert.equal(quoted.data.totalAmount, 94.4);

  const accepted = await api.POST("/quotes/{id}/accept", {
    params: { path: { id: quoted.data.id } },
    headers: bearer(customer.data.token),
  });
  assert.equal(accepted.response.status, 200);
  assert.equal(accepted.data?.quote.status, "ACCEPTED");

  const read = await api.GET("/jobs/{id}", {
    params: { path: { id: job.id } },
    headers: bearer(customer.data.token),
  });
  assert.equal(read.response.status, 200);
  assert.ok(read.data);
  assert.equal(read.data.status, "ACCEPTED");
  assert.equal(read.data.providerId, pro.provider.id);
  assert.equal(read.data.provider?.name, "Pat TS");
  assert.deepEqual(read.data.quotes.map((q) => q.status), ["ACCEPTED"]);

  // errors are typed too
  const missing = await api.GET("/jobs/{id}", {
    params: { path: { id: "cnosuchjob000000000000000" } },
    headers: bearer(customer.data.token),
  });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error?.error, "Job not found");
});
