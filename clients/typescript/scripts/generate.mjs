#!/usr/bin/env node
// Writes the API's types (schema.d.ts) from its OpenAPI document with openapi-typescript, whose
// transform option types every upload (`format: binary`) as `Blob | File` or React Native's
// `{ uri, name, type }`, so a multipart body needs no cast. `make client` runs it on docs/openapi.json; tests/api/test_client.py runs it on
// the served document and compares.
//
// Usage: node scripts/generate.mjs [openapi.json] [schema.d.ts]
import { readFile, writeFile } from "node:fs/promises";
import openapiTS, { COMMENT_HEADER, astToString } from "openapi-typescript";
import ts from "typescript";

const [input = "../../docs/openapi.json", output = "schema.d.ts"] = process.argv.slice(2);
const { factory } = ts;
// React Native's FormData takes a file on the device as { uri, name, type } (platform.ts)
const STRING = factory.createKeywordTypeNode(ts.SyntaxKind.StringKeyword);
const NATIVE_FILE = factory.createTypeLiteralNode(
  ["uri", "name", "type"].map((name) => factory.createPropertySignature(undefined, name, undefined, STRING)),
);
const BLOB_OR_FILE = factory.createUnionTypeNode([
  factory.createTypeReferenceNode("Blob"),
  factory.createTypeReferenceNode("File"),
  NATIVE_FILE,
]);
const NULL = factory.createLiteralTypeNode(factory.createNull());

const document = JSON.parse(await readFile(input, "utf8"));
const ast = await openapiTS(document, {
  transform(schema) {
    if (schema.format !== "binary") return undefined;
    const nullable = schema.nullable || (Array.isArray(schema.type) && schema.type.includes("null"));
    return nullable ? factory.createUnionTypeNode([BLOB_OR_FILE, NULL]) : BLOB_OR_FILE;
  },
});
await writeFile(output, COMMENT_HEADER + astToString(ast));
