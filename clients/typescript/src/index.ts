// The marketplace API's client: openapi-fetch typed by the generated schema (../schema.d.ts),
// with what every app needs on top of it:
// - the bearer token on every request (a string, or a function for one that changes: a login,
//   a password change);
// - retries that are safe: a POST or PATCH carries an Idempotency-Key, made once and sent again
//   on each retry, so a request whose answer was lost is answered again, not done twice; a
//   request is retried after a network error and after 429, 502, 503 and 504 (and a 409 that
//   says when to come back: an earlier attempt with the same key still running), waiting
//   Retry-After when the server gives it;
// - every error answer thrown as a MarketplaceError whose `code` is typed by the document;
// - sessions that last: given the session's refresh token, a request refused 401 invalid_token
//   (an expired or ended token) is refreshed once (POST /auth/refresh) and sent again once, the
//   new pair handed to onTokens;
// - uploads as plain objects: a body with a Blob or File in it (or React Native's `{ uri, name,
//   type }`) is sent as multipart/form-data;
// - what differs between browsers, Node and React Native (idempotency keys without
//   crypto.randomUUID, device files, the requests never retried) is in platform.ts, and the
//   client's type, whose `data` is never undefined, in typed.ts.
import createClient from "openapi-fetch";
import type { components, paths } from "../schema.js";
import { isNativeFile, neverRetried, randomKey } from "./platform.js";
import type { MarketplaceClient } from "./typed.js";

export type { components, operations, paths } from "../schema.js";

/** Every error answer's body. */
export type ErrorBody = components["schemas"]["Error"];
/** The error codes: the document's enum of `code` where it has one, else any string. */
export type ErrorCode = ErrorBody extends { code?: infer C } ? Exclude<C, undefined> : string;

/** An error answer (status 4xx or 5xx), thrown by every call of the client. */
export class MarketplaceError extends Error {
  override readonly name = "MarketplaceError";
  /** The HTTP status. */
  readonly status: number;
  /** What went wrong, for a program: the body's `code`. An error body without one (servers
   * from before every error had a code) has its `error` text here instead. */
  readonly code: ErrorCode;
  /** What went wrong, for a person: the body's `error` (the status text when the body was not
   * the API's). */
  readonly error: string;
  /** The field a validation error is about, when the body names it. */
  readonly field: string | undefined;
  /** The answer's body (undefined when it was not JSON). */
  readonly body: ErrorBody | undefined;
  /** The answer itself (its headers: Retry-After, X-Request-Id). */
  readonly response: Response;

  constructor(response: Response, body: unknown) {
    const parsed = isErrorBody(body) ? body : undefined;
    const text = parsed?.error ?? (response.statusText || `HTTP ${response.status}`);
    super(`${response.status} ${text}`);
    this.status = response.status;
    this.error = text;
    this.code = codeOf(parsed, text);
    const field = parsed && "field" in parsed ? parsed.field : undefined;
    this.field = typeof field === "string" ? field : undefined;
    this.body = parsed;
    this.response = response;
  }

  /** Whether the error has this code (and narrows `code` to it). */
  is<C extends ErrorCode>(code: C): this is MarketplaceError & { readonly code: C } {
    return this.code === code;
  }
}

export interface MarketplaceClientOptions {
  /** The API's address, e.g. "https://api.example.com". */
  baseUrl: string;
  /** The bearer token, or a function answering the current one (none: no Authorization). */
  token?: string | null | (() => string | null | undefined);
  /** How many times a request is tried again (default 2). */
  retries?: number;
  /** The longest wait before a retry, in milliseconds (default 30000). */
  maxRetryDelayMs?: number;
  /** The fetch to send requests with (default globalThis.fetch). */
  fetch?: (request: Request) => Promise<Response>;
  /** Makes a new Idempotency-Key (default crypto.randomUUID, else one made from
   * crypto.getRandomValues: platform.ts). */
  idempotencyKey?: () => string;
  /** The session's refresh token (a login's `refreshToken`), or a function answering the current
   * one. With one, a request answered 401 invalid_token is sent again once after one
   * POST /auth/refresh; the client then uses the new pair (until `token` or `refreshToken` gives
   * another) and hands it to onTokens. */
  refreshToken?: string | null | (() => string | null | undefined);
  /** Called with the new pair after each refresh: keep it (a refresh token works once). */
  onTokens?: (tokens: SessionTokens) => void | Promise<void>;
}

/** A session's tokens, as POST /auth/refresh answers them. */
export type SessionTokens = components["schemas"]["SessionTokens"];

export type { MarketplaceClient, PathsWith, Success } from "./typed.js";
export { type NativeFile, isNativeFile, randomKey } from "./platform.js";

export function createMarketplaceClient(options: MarketplaceClientOptions): MarketplaceClient {
  const send = retrying(options);
  const session = sessions(options, send);
  const client = createClient<paths>({
    baseUrl: options.baseUrl,
    fetch: refreshing(options, session, send),
    bodySerializer: serialize,
    // a list filter as the document writes it (style form, not exploded): ?status=A,B
    querySerializer: { array: { style: "form", explode: false } },
  });
  client.use({
    onRequest({ request }) {
      const token = session.token();
      if (token && !request.headers.has("Authorization")) request.headers.set("Authorization", `Bearer ${token}`);
      return request;
    },
    async onResponse({ response }) {
      if (response.ok) return undefined;
      const text = await response.clone().text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      throw new MarketplaceError(response, body);
    },
  });
  return client as unknown as MarketplaceClient; // typed.ts: a call that returns has succeeded
}

// ---- errors

function isErrorBody(body: unknown): body is ErrorBody {
  return typeof body === "object" && body !== null && typeof (body as { error?: unknown }).error === "string";
}

function codeOf(body: ErrorBody | undefined, text: string): ErrorCode {
  const code: unknown = body && "code" in body ? body.code : undefined;
  return (typeof code === "string" ? code : text) as ErrorCode;
}

// ---- retries

const RETRIED = new Set([429, 502, 503, 504]);

function retryable(response: Response): boolean {
  return RETRIED.has(response.status) || (response.status === 409 && response.headers.has("Retry-After"));
}

function delayOf(response: Response | undefined, attempt: number, max: number): number {
  const after = Number(response?.headers.get("Retry-After"));
  const ms = Number.isFinite(after) && after >= 0 ? after * 1000 : 200 * 2 ** attempt;
  return Math.min(ms, max);
}

function retrying(options: MarketplaceClientOptions): (request: Request) => Promise<Response> {
  const send = options.fetch ?? ((request: Request) => globalThis.fetch(request));
  const retries = options.retries ?? 2;
  const max = options.maxRetryDelayMs ?? 30000;
  const newKey = options.idempotencyKey ?? randomKey;
  return async (request) => {
    if ((request.method === "POST" || request.method === "PATCH") && !request.headers.has("Idempotency-Key"))
      request.headers.set("Idempotency-Key", newKey());
    const tries = neverRetried(request) ? 0 : retries; // a password's change, an account's deletion
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= tries;
      let response: Response | undefined;
      try {
        response = await send(last ? request : request.clone());
      } catch (error) {
        if (last) throw error;
      }
      if (response && (last || !retryable(response))) return response;
      await response?.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, delayOf(response, attempt, max)));
    }
  };
}

// ---- sessions

type TokenOption = string | null | undefined | (() => string | null | undefined);

function read(value: TokenOption): string | undefined {
  return (typeof value === "function" ? value() : value) ?? undefined;
}

interface Session {
  /** The token to send: the app's, or the pair of the last refresh while the app gives the same. */
  token(): string | undefined;
  /** A token to retry with after `sent` was refused: refreshed once for every request that was
   * refused with it at the same time; undefined when the refresh failed. */
  renewed(sent: string): Promise<string | undefined>;
}

function sessions(options: MarketplaceClientOptions, send: (request: Request) => Promise<Response>): Session {
  let rotated: { appToken?: string; appRefresh?: string; token: string; refreshToken: string } | undefined;
  let inflight: Promise<string | undefined> | undefined;
  const token = () => {
    const app = read(options.token);
    return rotated && app === rotated.appToken ? rotated.token : app;
  };
  const refreshToken = () => {
    const app = read(options.refreshToken);
    return rotated && app === rotated.appRefresh ? rotated.refreshToken : app;
  };
  async function exchange(): Promise<string | undefined> {
    const presented = refreshToken();
    if (!presented) return undefined;
    const appToken = read(options.token), appRefresh = read(options.refreshToken);
    // sent once: a refresh token works once, so a retry after a lost answer would end the session
    const response = await send(
      new Request(`${options.baseUrl.replace(/\/+$/, "")}/auth/refresh`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ refreshToken: presented }),
      }),
    );
    if (!response.ok) {
      await response.body?.cancel();
      return undefined;
    }
    const pair = (await response.json()) as SessionTokens;
    rotated = { appToken, appRefresh, token: pair.token, refreshToken: pair.refreshToken };
    await options.onTokens?.({ token: pair.token, refreshToken: pair.refreshToken });
    return pair.token;
  }
  return {
    token,
    renewed(sent) {
      const now = token();
      if (now && now !== sent) return Promise.resolve(now); // renewed meanwhile
      inflight ??= exchange().finally(() => {
        inflight = undefined;
      });
      return inflight;
    },
  };
}

/** A 401 that says the token is expired, tampered or ended (RFC 6750's challenge, or the code). */
async function invalidToken(response: Response): Promise<boolean> {
  if (response.status !== 401) return false;
  if ((response.headers.get("WWW-Authenticate") ?? "").includes("invalid_token")) return true;
  try {
    const body: unknown = await response.clone().json();
    return isErrorBody(body) && "code" in body && body.code === "invalid_token";
  } catch {
    return false;
  }
}

function refreshing(
  options: MarketplaceClientOptions,
  session: Session,
  send: (request: Request) => Promise<Response>,
): (request: Request) => Promise<Response> {
  if (options.refreshToken === undefined) return send;
  return async (request) => {
    const sent = request.headers.get("Authorization")?.replace(/^Bearer\s+/i, "");
    if (!sent || new URL(request.url).pathname.endsWith("/auth/refresh")) return send(request);
    const response = await send(request.clone());
    if (!(await invalidToken(response))) return response;
    const token = await session.renewed(sent);
    if (!token) return response;
    await response.body?.cancel();
    request.headers.set("Authorization", `Bearer ${token}`);
    return send(request); // once: whatever it answers is the answer
  };
}

// ---- bodies

function isFile(value: unknown): value is Blob {
  return (typeof Blob !== "undefined" && value instanceof Blob) || isNativeFile(value);
}

/** JSON, or multipart/form-data for a body that holds a Blob or File (its uploads). */
function serialize(body: unknown): string | FormData {
  if (body instanceof FormData) return body;
  if (typeof body !== "object" || body === null || Array.isArray(body)) return JSON.stringify(body);
  const entries = Object.entries(body);
  if (!entries.some(([, v]) => isFile(v) || (Array.isArray(v) && v.some(isFile)))) return JSON.stringify(body);
  const form = new FormData();
  for (const [name, value] of entries)
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item === undefined || item === null) continue;
      if (isNativeFile(item)) form.append(name, item as unknown as Blob); // React Native's FormData takes it as it is
      else if (isFile(item)) form.append(name, item, "name" in item && typeof item.name === "string" ? item.name : name);
      else form.append(name, String(item));
    }
  return form;
}

// Live updates: GET /events as a typed async iterator (events.ts).
export { EventStreamParser, events, type EventsOptions, type StreamEvent, type StreamEventName } from "./events.js";
