// The events() helper's transport where fetch cannot stream a body (React Native, whose fetch
// answers only once the body is complete): XMLHttpRequest, whose responseText grows while the
// answer arrives (readyState 3, progress events), as React Native's and browsers' do. Each
// connection's text is kept by the XMLHttpRequest for as long as it lasts, so past maxBytes the
// connection is closed and the helper reconnects at once from the last id: nothing is lost and
// the memory stays bounded.

/** An XMLHttpRequest constructor, as React Native and browsers have one (globalThis). */
export type XhrConstructor = new () => XMLHttpRequestLike;

/** The part of XMLHttpRequest the transport uses. */
export interface XMLHttpRequestLike {
  readyState: number;
  status: number;
  responseText: string;
  onreadystatechange: (() => void) | null;
  onprogress: (() => void) | null;
  onerror: (() => void) | null;
  onabort: (() => void) | null;
  onload: (() => void) | null;
  open(method: string, url: string): void;
  setRequestHeader(name: string, value: string): void;
  send(body?: null): void;
  abort(): void;
}

/** One connection: its status, then its text as it comes. */
export interface TextStream {
  status: number;
  /** The text received since the last read; done when the answer ended (or closed). */
  read(): Promise<{ value: string; done: false } | { value: undefined; done: true }>;
  close(): void;
  /** Closed because it passed maxBytes: reconnect at once. */
  readonly cut?: boolean;
}

/** The global XMLHttpRequest, if there is one. */
export function globalXhr(): XhrConstructor | undefined {
  const x = (globalThis as { XMLHttpRequest?: XhrConstructor }).XMLHttpRequest;
  return typeof x === "function" ? x : undefined;
}

/** Opens GET url with headers; resolves once the status is known (rejects on a network error
 * before it). The stream ends by itself past maxBytes. */
export function xhrGet(
  Xhr: XhrConstructor,
  url: string,
  headers: Record<string, string>,
  signal: AbortSignal | undefined,
  maxBytes: number,
): Promise<TextStream> {
  return new Promise((resolve, reject) => {
    const xhr = new Xhr();
    let seen = 0;
    let ended = false;
    let opened = false;
    let failure: Error | undefined;
    let cut = false;
    const chunks: string[] = [];
    let wake: (() => void) | undefined;
    const notify = () => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    const take = () => {
      const text = xhr.responseText ?? "";
      if (text.length > seen) {
        chunks.push(text.slice(seen));
        seen = text.length;
      }
      if (seen >= maxBytes) {
        cut = true; // reconnect from the last id with a fresh buffer
        close();
      }
      notify();
    };
    const close = () => {
      if (ended) return;
      ended = true;
      xhr.abort();
      notify();
    };
    const stream: TextStream = {
      get status() {
        return xhr.status;
      },
      get cut() {
        return cut;
      },
      async read() {
        for (;;) {
          if (chunks.length) return { value: chunks.splice(0).join(""), done: false };
          if (ended) {
            if (failure) throw failure;
            return { value: undefined, done: true };
          }
          await new Promise<void>((r) => (wake = r));
        }
      },
      close,
    };
    const open = () => {
      if (opened) return;
      opened = true;
      resolve(stream);
    };
    xhr.onreadystatechange = () => {
      if (xhr.readyState >= 2) open();
      if (xhr.readyState >= 3) take();
      if (xhr.readyState === 4 && !ended) {
        ended = true;
        notify();
      }
    };
    xhr.onprogress = take;
    xhr.onerror = () => {
      failure = new Error("GET /events: the connection failed");
      if (!opened) reject(failure);
      ended = true;
      notify();
    };
    xhr.onabort = () => {
      ended = true;
      if (!opened) reject(new Error("GET /events: aborted"));
      notify();
    };
    signal?.addEventListener("abort", close, { once: true });
    xhr.open("GET", url);
    for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
    xhr.send(null);
  });
}
