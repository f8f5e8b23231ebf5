// Package disk gives each sandbox a bounded disk: a sparse ext4 image file
// attached to a loop device and mounted as the sandbox's /workspace. Writes
// inside fail with ENOSPC when the image is full. The image's blocks are
// reserved on the host when it is made (fallocate), so a disk that was
// created can always be filled, and never fails with I/O errors because
// the host ran out of space.
//
// Templates makes images cheaply (one mkfs per size, then hole-preserving
// copies whose holes are then allocated), Attach binds an image to a loop device with autoclear, and
// DetachOrphans cleans up after a crash.
//
// This package is Linux-only and may import only the standard library and
// golang.org/x/sys.
package disk
