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
// The stream is read with fetch() (Node 18+ and browsers), so the token goes in the
// Authorization header; `ticket` instead asks for a single-use ticket before each connection
// (what a browser's EventSource, which cannot send headers, does with POST /events/ticket).
// Lines are parsed as the WHATWG HTML standard parses an event stream. When the connection
// drops, or the server ends it (`shutdown`: the instance is stopping), the helper waits the
// server's `retry` delay and reconnects with the last id it got as Last-Event-ID, so the events
// missed meanwhile arrive first, in order. It stops after `token.expired` (sign in again) and
// `replaced` (a newer stream of the account took its place), and when `signal` aborts.
import type { components } from "../schema.js";

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

/** The caller's live updates, reconnecting with Last-Event-ID until told to stop. */
export async function* events(opts: EventsOptions): AsyncGenerator<StreamEvent, void, undefined> {
  const fetchFn = opts.fetch ?? fetch;
  let lastEventId = opts.lastEventId ?? "";
  let retryMs = opts.retryMs ?? 2000;
  while (!opts.signal?.aborted) {
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    const url = new URL("/events", opts.baseUrl);
    if (lastEventId) headers["Last-Event-ID"] = lastEventId;
    let stop = false;
    try {
      if (opts.token !== undefined) {
        headers.Authorization = `Bearer ${typeof opts.token === "function" ? await opts.token() : opts.token}`;
      } else if (opts.ticket) {
        url.searchParams.set("ticket", await opts.ticket());
      }
      const response = await fetchFn(url, { headers, signal: opts.signal, cache: "no-store" });
      if (response.status === 401 || response.status === 403) {
        throw Object.assign(new Error(`GET /events answered ${response.status}`), { final: true });
      }
      if (!response.ok || !response.body) throw new Error(`GET /events answered ${response.status}`);
      opts.onOpen?.();
      const parser = new EventStreamParser();
      parser.lastEventId = lastEventId;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const raw of parser.push(value)) {
          const ev = { event: raw.event, data: JSON.parse(raw.data) } as StreamEvent & { id?: string };
          if (raw.id !== undefined) ev.id = lastEventId = raw.id;
          yield ev as StreamEvent;
          if (FINAL.has(raw.event)) stop = true;
        }
        lastEventId = parser.lastEventId; // a lone id line moves it too
        if (parser.retryMs !== undefined) retryMs = parser.retryMs;
        if (stop) {
          await reader.cancel();
          return;
        }
      }
    } catch (error) {
      if (opts.signal?.aborted) return;
      if ((error as { final?: boolean }).final) throw error;
      opts.onError?.(error);
    }
    await sleep(retryMs, opts.signal);
  }
}
