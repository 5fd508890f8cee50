#!/usr/bin/env node
// Writes the API's types (schema.d.ts) from its OpenAPI document with openapi-typescript, whose
// transform option types every upload (`format: binary`) as `Blob | File`, so a multipart body
// needs no cast. `make client` runs it on docs/openapi.json; tests/api/test_client.py runs it on
// the served document and compares.
//
// Usage: node scripts/generate.mjs [openapi.json] [schema.d.ts]
import { readFile, writeFile } from "node:fs/promises";
import openapiTS, { COMMENT_HEADER, astToString } from "openapi-typescript";
import ts from "typescript";

const [input = "../../docs/openapi.json", output = "schema.d.ts"] = process.argv.slice(2);
const { factory } = ts;
const BLOB_OR_FILE = factory.createUnionTypeNode([
  factory.createTypeReferenceNode("Blob"),
  factory.createTypeReferenceNode("File"),
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
