// Package blob stores opaque byte objects by key: uploaded files and
// artifacts. Dir is the local-directory implementation; the Store interface
// is small enough for an S3-style backend. It may import only the
// standard library.
package blob
