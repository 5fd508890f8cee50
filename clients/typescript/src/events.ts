// Live updates: GET /events as a typed async iterator that reconnects on its own.
//
//   for await (const ev of events({ baseUrl, token })) {
//     switch (ev.event) {
//       case "message.created": show(ev.data.jobId, ev.data.message); break;
//       case "job.updated": refresh(ev.data); break;
//       case "reset": reloadEverything(); break;
//     }
//   }
//
// The stream is read with fetch() where it streams a body (Node 18+ and browsers), else with
// XMLHttpRequest's progress events (React Native, whose fetch does not: xhr.ts), so the token goes
// in the Authorization header; `ticket` instead asks for a single-use ticket before each
// connection (POST /events/ticket). A browser page can also do without this helper: POST
// /events/session, then `new EventSource(url, { withCredentials: true })` (the quickstart).
// Lines are parsed as the WHATWG HTML standard parses an event stream. When the connection
// drops, or the server ends it (`shutdown`: the instance is stopping), the helper waits the
// server's `retry` delay and reconnects with the last id it got (as the `lastEventId` parameter,
// which no CORS preflight has to allow, unlike the Last-Event-ID header), so the events
// missed meanwhile arrive first, in order. It stops after `token.expired` (sign in again) and
// `replaced` (a newer stream of the account took its place), and when `signal` aborts.
import type { components } from "../schema.js";
import { type TextStream, type XhrConstructor, globalXhr, xhrGet } from "./xhr.js";

/** One event of the stream: `id` (absent on control events), `event`, and `data` as JSON. */
export type StreamEvent = components["schemas"]["StreamEvent"];
export type StreamEventName = StreamEvent["event"];

export interface EventsOptions {
  /** The API's base address, e.g. "https://api.example.com". */
  baseUrl: string;
  /** The bearer token, or a function that gives the current one (called for each connection). */
  token?: string | (() => string | Promise<string>);
  /** Without a token: a function that gets a fresh ticket (POST /events/ticket) per connection. */
  ticket?: () => Promise<string>;
  /** Resume after this id (an id the app stored from an earlier stream). */
  lastEventId?: string;
  /** Stops the stream (and any wait before a reconnect). */
  signal?: AbortSignal;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** Milliseconds to wait before a reconnect until the server says otherwise (`retry:`). */
  retryMs?: number;
  /** Called when a connection fails or drops, before the wait. */
  onError?: (error: unknown) => void;
  /** Called when a connection is open: from then on every change reaches it. */
  onOpen?: () => void;
  /** How the stream is read: "fetch" (a streamed body), "xhr" (XMLHttpRequest's progress
   * events), or by default fetch where it streams and XMLHttpRequest elsewhere (React Native). */
  transport?: "fetch" | "xhr";
  /** The XMLHttpRequest to use (default: the global one). */
  XMLHttpRequest?: XhrConstructor;
  /** XMLHttpRequest keeps a connection's whole text: past this many characters (default 1 MiB)
   * the helper reconnects at once from the last id. */
  maxConnectionBytes?: number;
}

/** An event as the stream spelled it: `id` only when its block had an id line. */
export interface RawEvent {
  id?: string;
  event: string;
  data: string;
}

/** Parses the event stream's lines into events, as the WHATWG HTML standard does. */
export class EventStreamParser {
  /** The last event ID: set by every id line, kept across events (what a reconnect sends). */
  lastEventId = "";
  retryMs: number | undefined;
  private pending = "";
  private data: string[] = [];
  private type = "";
  private blockId: string | undefined;
  private sawCr = false;

  /** Feeds decoded text; returns the events it completed. */
  push(text: string): RawEvent[] {
    const out: RawEvent[] = [];
    const buf = this.pending + text;
    this.pending = "";
    let start = 0;
    for (let i = 0; i < buf.length; i++) {
      const ch = buf[i];
      if (ch !== "\n" && ch !== "\r") continue;
      if (ch === "\n" && this.sawCr && i === start) { // the LF of a CRLF split across pushes
        this.sawCr = false;
        start = i + 1;
        continue;
      }
      this.line(buf.slice(start, i), out);
      this.sawCr = ch === "\r";
      if (ch === "\r" && buf[i + 1] === "\n") i++, this.sawCr = false;
      start = i + 1;
    }
    this.pending = buf.slice(start);
    return out;
  }

  private line(line: string, out: RawEvent[]): void {
    if (line === "") {
      if (this.data.length) {
        const ev: RawEvent = { event: this.type || "message", data: this.data.join("\n") };
        if (this.blockId !== undefined) ev.id = this.blockId;
        out.push(ev);
      }
      this.data = [];
      this.type = "";
      this.blockId = undefined;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.type = value;
    else if (field === "id" && !value.includes("\0")) this.lastEventId = this.blockId = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.retryMs = Number(value);
  }
}

const FINAL: ReadonlySet<string> = new Set(["token.expired", "replaced"]);

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

/** Whether fetch can stream a body here (browsers, Node 18+; not React Native). */
function fetchStreams(): boolean {
  return typeof fetch === "function" && typeof ReadableStream === "function" && typeof TextDecoderStream === "function";
}

/** GET url with fetch, as a text stream; undefined when the answer has no streamed body. */
async function fetchGet(
  fetchFn: typeof fetch,
  url: URL,
  headers: Record<string, string>,
  signal: AbortSignal | undefined,
): Promise<TextStream | undefined> {
  const response = await fetchFn(url, { headers, signal, cache: "no-store" });
  if (!response.body || typeof TextDecoderStream !== "function") {
    if (response.ok) return undefined; // a fetch that buffers: the caller turns to XMLHttpRequest
    return { status: response.status, read: async () => ({ value: undefined, done: true }), close: () => {} };
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  return {
    status: response.status,
    async read() {
      const { value, done } = await reader.read();
      return done ? { value: undefined, done: true } : { value, done: false };
    },
    close: () => void reader.cancel().catch(() => {}),
  };
}

/** The caller's live updates, reconnecting with the last id until told to stop. */
export async function* events(opts: EventsOptions): AsyncGenerator<StreamEvent, void, undefined> {
  const fetchFn = opts.fetch ?? (typeof fetch === "function" ? fetch : undefined);
  const Xhr = opts.XMLHttpRequest ?? globalXhr();
  let useXhr = opts.transport === "xhr" || (opts.transport === undefined && !(opts.fetch || fetchStreams()) && !!Xhr);
  let lastEventId = opts.lastEventId ?? "";
  let retryMs = opts.retryMs ?? 2000;
  while (!opts.signal?.aborted) {
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    const url = new URL("/events", opts.baseUrl);
    if (lastEventId) url.searchParams.set("lastEventId", lastEventId);
    let stop = false;
    let conn: TextStream | undefined;
    try {
      if (opts.token !== undefined) {
        headers.Authorization = `Bearer ${typeof opts.token === "function" ? await opts.token() : opts.token}`;
      } else if (opts.ticket) {
        url.searchParams.set("ticket", await opts.ticket());
      }
      if (useXhr) {
        if (!Xhr) throw Object.assign(new Error("events(): no XMLHttpRequest to read the stream with"), { final: true });
        conn = await xhrGet(Xhr, url.toString(), headers, opts.signal, opts.maxConnectionBytes ?? 1 << 20);
      } else {
        if (!fetchFn) throw Object.assign(new Error("events(): no fetch"), { final: true });
        conn = await fetchGet(fetchFn, url, headers, opts.signal);
        if (!conn) {
          // this fetch buffers the whole body (React Native's): read with XMLHttpRequest from now on
          if (!Xhr || opts.transport === "fetch")
            throw Object.assign(new Error("events(): fetch cannot stream here and there is no XMLHttpRequest"), {
              final: true,
            });
          useXhr = true;
          continue;
        }
      }
      if (conn.status === 401 || conn.status === 403) {
        throw Object.assign(new Error(`GET /events answered ${conn.status}`), { final: true });
      }
      if (conn.status !== 200) throw new Error(`GET /events answered ${conn.status}`);
      opts.onOpen?.();
      const parser = new EventStreamParser();
      parser.lastEventId = lastEventId;
      for (;;) {
        const { value, done } = await conn.read();
        if (done) break;
        for (const raw of parser.push(value)) {
          const ev = { event: raw.event, data: JSON.parse(raw.data) } as StreamEvent & { id?: string };
          if (raw.id !== undefined) ev.id = lastEventId = raw.id;
          yield ev as StreamEvent;
          if (FINAL.has(raw.event)) stop = true;
        }
        lastEventId = parser.lastEventId; // a lone id line moves it too
        if (parser.retryMs !== undefined) retryMs = parser.retryMs;
        if (stop) return;
      }
      if (conn.cut) continue; // the transport's buffer was full: at once, from the last id
    } catch (error) {
      if (opts.signal?.aborted) return;
      if ((error as { final?: boolean }).final) throw error;
      opts.onError?.(error);
    } finally {
      conn?.close();
    }
    await sleep(retryMs, opts.signal);
  }
}
