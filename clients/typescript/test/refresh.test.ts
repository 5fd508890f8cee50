// Sessions that last, in the client (issue 33): with the session's refresh token, a request
// answered 401 invalid_token is refreshed once (POST /auth/refresh) and sent again once, against
// the server at MARKETPLACE_URL (tests/api/test_client.py starts one and runs this file). A token
// the server refuses (a forged one) stands for an expired one, so no clock moves.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MarketplaceError, createMarketplaceClient, type SessionTokens } from "../src/index.js";

const baseUrl = process.env.MARKETPLACE_URL ?? "http://localhost:8080";
const REFUSED = "not.a.token";

/* A new customer's session: its tokens and email. */
async function signUp(name: string): Promise<SessionTokens> {
  const unique = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  const api = createMarketplaceClient({ baseUrl });
  const { data } = await api.POST("/auth/register", {
    body: { email: `ts-refresh-${name}-${unique}@example.com`, password: "correct-horse-1", name: "Refresh TS",
            address: "1 Main St", zip: "10001" },
  });
  assert.ok(data);
  return { token: data.token, refreshToken: data.refreshToken };
}

/* A fetch that counts the requests to each path. */
function counting() {
  const paths: string[] = [];
  const fetchFn = (request: Request) => {
    paths.push(`${request.method} ${new URL(request.url).pathname}`);
    return fetch(request);
  };
  return { paths, fetchFn };
}

test("a refused token is refreshed once, the request sent again, the new pair handed over", async () => {
  const s = await signUp("once");
  const seen: SessionTokens[] = [];
  const { paths, fetchFn } = counting();
  const api = createMarketplaceClient({ baseUrl, token: REFUSED, refreshToken: s.refreshToken, fetch: fetchFn,
                                        onTokens: (t) => { seen.push(t); } });
  const me = await api.GET("/users/me");
  assert.equal(me.response.status, 200);
  assert.equal(seen.length, 1);
  assert.notEqual(seen[0]?.refreshToken, s.refreshToken);
  assert.deepEqual(paths, ["GET /users/me", "POST /auth/refresh", "GET /users/me"]);
  // the client goes on with the new pair: no second refresh
  const again = await api.PATCH("/users/me", { body: { name: "Renamed TS" } });
  assert.equal(again.data?.name, "Renamed TS");
  assert.equal(seen.length, 1);
  assert.equal(paths.length, 4);
  // the pair it handed over is the session's: the old refresh token was used up
  const raw = await fetch(`${baseUrl}/auth/refresh`, { method: "POST", headers: { "Content-Type": "application/json" },
                                                      body: JSON.stringify({ refreshToken: seen[0]?.refreshToken }) });
  assert.equal(raw.status, 200);
});

test("requests refused together share one refresh; a body is sent again whole", async () => {
  const s = await signUp("together");
  const state: { token: string; refreshToken: string } = { token: REFUSED, refreshToken: s.refreshToken };
  let refreshes = 0;
  const api = createMarketplaceClient({
    baseUrl, token: () => state.token, refreshToken: () => state.refreshToken,
    onTokens: (t) => { refreshes++; state.token = t.token; state.refreshToken = t.refreshToken; },
  });
  const answers = await Promise.all([
    api.GET("/users/me"),
    api.GET("/users/me/addresses"),
    api.PATCH("/users/me", { body: { name: "Together TS" } }),
  ]);
  assert.equal(refreshes, 1);
  assert.deepEqual(answers.map((a) => a.response.status), [200, 200, 200]);
  assert.equal(answers[2].data?.name, "Together TS");
  assert.notEqual(state.token, REFUSED);
});

test("a refused refresh throws the request's 401; nothing loops", async () => {
  const { paths, fetchFn } = counting();
  let handed = 0;
  const api = createMarketplaceClient({ baseUrl, token: REFUSED, refreshToken: "0".repeat(64), fetch: fetchFn,
                                        onTokens: () => { handed++; } });
  await assert.rejects(api.GET("/users/me"), (error: unknown) => {
    assert.ok(error instanceof MarketplaceError);
    assert.equal(error.status, 401);
    return true;
  });
  assert.deepEqual(paths, ["GET /users/me", "POST /auth/refresh"]);
  assert.equal(handed, 0);
  // the refresh route's own refusal is never refreshed
  paths.length = 0;
  await assert.rejects(api.POST("/auth/refresh", { body: { refreshToken: "1".repeat(64) } }), (error: unknown) => {
    assert.ok(error instanceof MarketplaceError);
    assert.ok(error.is("invalid_token"));
    return true;
  });
  assert.deepEqual(paths, ["POST /auth/refresh"]);
});

test("without a refresh token, or for another 401, nothing is refreshed", async () => {
  const { paths, fetchFn } = counting();
  const api = createMarketplaceClient({ baseUrl, token: REFUSED, fetch: fetchFn });
  await assert.rejects(api.GET("/users/me"), MarketplaceError);
  assert.deepEqual(paths, ["GET /users/me"]);
  // a wrong login is a 401 too, but not invalid_token
  const s = await signUp("login");
  const counted = counting();
  const withRefresh = createMarketplaceClient({ baseUrl, token: s.token, refreshToken: s.refreshToken,
                                                fetch: counted.fetchFn });
  await assert.rejects(withRefresh.POST("/auth/login", { body: { email: "nobody@example.com", password: "wrong-pass" } }),
                       (error: unknown) => error instanceof MarketplaceError && error.is("invalid_credentials"));
  assert.deepEqual(counted.paths, ["POST /auth/login"]);
});
