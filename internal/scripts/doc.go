// Package scripts is an organisation's own programs offered to models as
// tools ("The same computer also runs your organisation's own programs,
// each offered as a single tool", the seed): each script has a name, a
// description, a JSON Schema of its input and a program (a source text
// and the interpreter that runs it). The organisation's admin key
// registers them (/v1/scripts); each is the tool script__<name> of a turn
// whose key has the computer capability (not necessarily the computer
// system tool). A call validates the model's arguments against the
// schema, writes the program into the turn's computer
// (/workspace/.scripts/<name>), runs it there with the arguments as JSON
// on its standard input and the computer's exec limits, and answers in
// builtin__computer_exec's format (docs/tools.md, "Scripts").
//
// Every bound lives here: a name's characters and length, the sizes of
// the description, the schema and the source, the interpreter's words,
// the scripts of one organisation. A schema is checked as a schema (against
// the meta-schema of its draft, 2020-12 or 07, embedded: metaschemas/)
// once at registration and again at each call (google/jsonschema-go),
// without remote references or recursion and with its $refs' expansion
// bounded, so validating a model's (bounded) arguments is bounded.
//
// It may import internal/store (the scripts' rows), internal/governance
// (the caller, the audit of a registration), internal/tools (a script as
// a tool, the exec format), internal/sandbox (the program written and
// run in the computer), internal/errdefs and the standard library.
package scripts
