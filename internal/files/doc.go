// Package files is the service behind /v1/files and /v1/artifacts: records
// in the store, bytes in the blob store. Files are uploaded by keys with the
// files capability; artifacts are what computers export for keys with the
// artifacts capability. Both belong to an organisation (the key that made
// them is recorded); another organisation's id is simply not found. It
// may import internal/store, internal/blob, internal/governance,
// internal/sandbox (only its Files part: exports and inputs read and write a
// computer's workspace, nothing else), internal/artifact (the Ref an export
// returns), internal/errdefs and internal/log.
package files
