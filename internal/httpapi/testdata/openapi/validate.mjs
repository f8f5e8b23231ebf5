// Validates the OpenAPI document on stdin against the OpenAPI
// specification's JSON Schemas (for its version) and resolves every
// $ref; prints {"valid", "version", "errors"} and exits 1 when invalid.
import { Validator } from "@seriousme/openapi-schema-validator";

let text = "";
for await (const chunk of process.stdin) text += chunk;
const validator = new Validator();
const res = await validator.validate(JSON.parse(text));
let errors = res.errors ?? null;
if (res.valid) {
  try {
    validator.resolveRefs();
  } catch (e) {
    res.valid = false;
    errors = String(e);
  }
}
console.log(JSON.stringify({ valid: res.valid, version: validator.version, errors }));
process.exit(res.valid ? 0 : 1);
