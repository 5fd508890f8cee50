// What differs between the platforms the client runs on (browsers, Node 18+, React Native on
// Hermes), kept apart from the client itself:
// - idempotency keys: crypto.randomUUID where it exists, else a version 4 UUID made from
//   crypto.getRandomValues (React Native with react-native-get-random-values, older browsers),
//   else the app must give `idempotencyKey` (a key that is not random enough is worse than none,
//   so there is no Math.random fallback);
// - files: React Native's FormData takes `{ uri, name, type }` objects for a file on the device
//   (a photo from the camera roll), not Blobs; the upload helper appends them as they are;
// - the requests never retried on their own: those that take a password (a change, a reset) or
//   delete the account. The server ignores their Idempotency-Key (it never keeps a password's
//   request nor its answer), so a retry after a lost answer is done again: it fails, with 401
//   or 400 for a password that already changed, although the first attempt succeeded.

/** A file on the device, as React Native's FormData takes it. */
export interface NativeFile {
  /** Where the file is: `file:///...`, `content://...`, `ph://...` */
  uri: string;
  /** The file's name, e.g. "licence.jpg". */
  name: string;
  /** Its media type, e.g. "image/jpeg". */
  type: string;
}

/** Whether value is a React Native file object `{ uri, name, type }`. */
export function isNativeFile(value: unknown): value is NativeFile {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.uri === "string" && typeof v.name === "string" && typeof v.type === "string";
}

interface CryptoLike {
  randomUUID?: () => string;
  getRandomValues?: <T extends ArrayBufferView | null>(array: T) => T;
}

/** A random version 4 UUID: crypto.randomUUID, else crypto.getRandomValues; throws when neither
 * exists (pass `idempotencyKey` to createMarketplaceClient then). */
export function randomKey(): string {
  const c = (globalThis as { crypto?: CryptoLike }).crypto;
  if (typeof c?.randomUUID === "function") return c.randomUUID();
  if (typeof c?.getRandomValues !== "function")
    throw new Error(
      "no crypto.randomUUID or crypto.getRandomValues here: install react-native-get-random-values, " +
        "or give createMarketplaceClient an idempotencyKey function",
    );
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40; // version 4
  b[8] = (b[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The routes never retried by the client (method, then the path's end after baseUrl's). */
const NEVER_RETRIED: readonly [string, RegExp][] = [
  ["POST", /\/auth\/change-password$/],
  ["POST", /\/auth\/reset-password$/],
  ["POST", /\/auth\/change-email$/],
  ["DELETE", /\/users\/me$/],
  ["DELETE", /\/providers\/me$/],
  ["DELETE", /\/admin\/accounts\/[^/]+$/],
];

/** Whether request is a password change or reset, or an account's deletion: tried once. */
export function neverRetried(request: Request): boolean {
  const path = new URL(request.url).pathname.replace(/\/+$/, "");
  return NEVER_RETRIED.some(([method, route]) => request.method === method && route.test(path));
}
