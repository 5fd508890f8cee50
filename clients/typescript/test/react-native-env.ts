// A React Native-like Node, for test/react-native.test.ts (imported first, so the client meets
// only this): what Hermes and React Native lack or do otherwise, in Node's place.
// - crypto.randomUUID is missing (Hermes): the client's keys come from crypto.getRandomValues
//   (react-native-get-random-values), or from an injected generator;
// - fetch buffers the whole body and has no streamed `body`, and there is no TextDecoderStream:
//   events() must read the stream with XMLHttpRequest;
// - XMLHttpRequest is the npm package xhr2, made to fill responseText as the answer arrives
//   (React Native's does, with its incremental events; xhr2 only at the end);
// - FormData takes a file on the device as `{ uri, name, type }`: React Native reads the file at
//   uri when it sends the form; here a file:// uri is read from the disk, as it would.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

type Globals = Record<string, unknown>;
const g = globalThis as unknown as Globals;

// crypto.randomUUID: gone (crypto.getRandomValues stays; a test removes it too)
Object.defineProperty(globalThis.crypto, "randomUUID", { value: undefined, configurable: true, writable: true });

// fetch: answers once the body is complete, without a stream
const nodeFetch = globalThis.fetch;
const NULL_BODY = new Set([101, 204, 205, 304]);
export let fetchCalls = 0;
g.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
  fetchCalls++;
  const answer = await nodeFetch(input, init);
  const bytes = await answer.arrayBuffer();
  const buffered = new Response(NULL_BODY.has(answer.status) ? null : bytes, {
    status: answer.status,
    statusText: answer.statusText,
    headers: answer.headers,
  });
  Object.defineProperty(buffered, "body", { value: undefined }); // as React Native's
  return buffered;
};
delete g.TextDecoderStream;

// XMLHttpRequest: xhr2, with responseText as it comes
interface Xhr2Internals {
  _response: unknown;
  responseText: string;
  _onHttpResponseData(response: unknown, data: Uint8Array): unknown;
}
const Xhr2 = createRequire(import.meta.url)("xhr2") as new () => Xhr2Internals;
class IncrementalXhr extends Xhr2 {
  private decoder = new TextDecoder();
  private soFar = "";
  override _onHttpResponseData(response: unknown, data: Uint8Array): unknown {
    if (this._response === response) {
      this.soFar += this.decoder.decode(data, { stream: true });
      this.responseText = this.soFar;
    }
    return super._onHttpResponseData(response, data);
  }
}
g.XMLHttpRequest = IncrementalXhr;

// FormData: { uri, name, type } is a file on the device
class DeviceFormData extends FormData {
  override append(name: string, value: string | Blob, filename?: string): void {
    const v = value as unknown as { uri?: unknown; name?: unknown; type?: unknown };
    if (typeof v === "object" && v !== null && typeof v.uri === "string" && typeof v.name === "string" &&
        typeof v.type === "string") {
      const bytes = readFileSync(fileURLToPath(v.uri));
      super.append(name, new Blob([bytes], { type: v.type }), v.name);
      return;
    }
    if (typeof value === "object" && value !== null && !(value instanceof Blob))
      throw new TypeError("FormData.append: not a Blob nor a { uri, name, type } file"); // no "[object Object]"
    if (filename === undefined) super.append(name, value);
    else super.append(name, value as Blob, filename);
  }
}
g.FormData = DeviceFormData;
