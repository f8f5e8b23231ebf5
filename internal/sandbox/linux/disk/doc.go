// Package disk gives each sandbox a bounded disk: a sparse ext4 image file
// attached to a loop device and mounted as the sandbox's /workspace. Writes
// inside fail with ENOSPC when the image is full, and the host disk never
// pays for more than the blocks the sandbox actually wrote.
//
// Templates makes images cheaply (one mkfs per size, then hole-preserving
// copies), Attach binds an image to a loop device with autoclear, and
// DetachOrphans cleans up after a crash.
//
// This package is Linux-only and may import only the standard library and
// golang.org/x/sys.
package disk
