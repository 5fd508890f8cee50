// The client's type: openapi-fetch's methods, but a call that returns has succeeded (every error
// answer is thrown as a MarketplaceError), so `data` is the success answer, never undefined, and
// a strict program reads `(await api.GET("/users/me")).data.email` without a check or a cast.
// Request bodies are required exactly where the OpenAPI document requires them (a route with a
// required field). Only openapi-fetch's exported types are used, so a consumer needs nothing else.
import type { Client, FetchResponse, MaybeOptionalInit } from "openapi-fetch";
import type { paths } from "../schema.js";

type HttpMethod = "get" | "put" | "post" | "delete" | "patch";
type Media = `${string}/${string}`;

/** The paths that have method M. */
export type PathsWith<M extends HttpMethod> = {
  [P in keyof paths]: paths[P] extends { [K in M]: {} } ? P : never;
}[keyof paths];

type RequiredKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? never : K }[keyof T];
/** The call's options: required when the route has a required parameter or body. */
type InitParam<Init> =
  RequiredKeys<Init> extends never ? [(Init & { [key: string]: unknown })?] : [Init & { [key: string]: unknown }];
type Operation<P, M> = P extends keyof paths ? (M extends keyof paths[P] ? paths[P][M] : never) : never;
type InitOf<P, M> = P extends keyof paths ? (M extends keyof paths[P] ? MaybeOptionalInit<paths[P], M> : never) : never;

/** openapi-fetch's answer to operation O called with I. */
type Answer<O, I> = O extends Record<string | number, any> ? FetchResponse<O, I, Media> : never;
/** What a call resolves to: the success branch of openapi-fetch's answer. */
export type Success<R> = R extends { error?: never } ? R : never;

type Method<M extends HttpMethod> = <P extends PathsWith<M>, I extends InitOf<P, M>>(
  url: P,
  ...init: InitParam<I>
) => Promise<Success<Answer<Operation<P, M>, I>>>;

/** The client: `{ data, response }` for every answer that is a success; errors are thrown. */
export interface MarketplaceClient {
  GET: Method<"get">;
  POST: Method<"post">;
  PUT: Method<"put">;
  PATCH: Method<"patch">;
  DELETE: Method<"delete">;
  /** Registers openapi-fetch middleware. */
  use: Client<paths>["use"];
  /** Unregisters it. */
  eject: Client<paths>["eject"];
}
