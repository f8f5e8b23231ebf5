// Package template is Cubicle's store of templates: read-only root
// filesystems, content-addressed and deduplicated, with the defaults of the
// image they came from (env, working directory, user, Python). Templates are
// imported from OCI images (an OCI image layout, as a directory or a tar, a
// `docker save` archive, or a registry) through go-containerregistry, or
// built from a spec file: Debian packages by mmdebstrap (the tar it makes
// is cached in cache/ by the release's digest) or another template, then
// files copied in as a layer of their own, environment variables, and run
// steps: commands run in a build computer on the root so far, whose
// changes (its overlay's upper layer) become a layer each (run.go,
// changes_linux.go; the computer comes from Options.Run, which
// internal/computer's TemplateRunner implements over the sandbox driver).
// Each root also has an EROFS image (erofs_linux.go), the file a
// computer's root is mounted from, with the mount points computers need.
//
// The store lives in <data>/templates (mode 0700, root only):
//
//	lock                     flock: shared by imports, exclusive for GC
//	locks/layer-<hex>        flock: one unpacking per layer at a time
//	locks/root-<hex>         flock: one flattening per root at a time
//	layers/<hex>/tree/       a layer unpacked (hex of its diff_id, the sha256
//	                         of its uncompressed tar), without its whiteouts
//	layers/<hex>/layer.json  the layer's whiteouts, opaque and implicit dirs, counts
//	roots/<hex>/rootfs/      the flattened root a computer binds (hex of the
//	                         OCI chain id of its layers)
//	roots/<hex>/root.json    its layers, size and entry count
//	meta/<name>.json         a template: name, id, root, source, defaults
//	cache/build-<hex>.tar    mmdebstrap's output for a spec (not collected by GC)
//	tmp/                     work in progress, renamed into place when complete
//
// Decision (dedup vs cold start): a computer binds ONE directory, so every
// template has a flattened root, and a computer's start costs one bind mount
// whatever the number of layers (an overlayfs of N layers would cost a mount
// per computer and N lookups per path miss). Each layer is unpacked once;
// a root holds hard links to its layers' files (symbolic links too), so file
// data is stored once however many templates share a layer; only
// directories are made per root. See docs/templates.md.
//
// Untrusted content (every rule is in docs/templates.md): setuid and setgid
// bits are stripped; device nodes and FIFOs are skipped and counted;
// extended attributes (file capabilities included) are dropped; entries
// that leave the root ("../x"), write through a symbolic link, or hard-link
// to anything but an earlier entry of the same layer refuse the import;
// every path is resolved with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)
// and every file is created with O_EXCL|O_NOFOLLOW; symbolic links keep their
// target verbatim (it resolves inside the computer's root at run time) and
// host code opening a path in a root must use RESOLVE_IN_ROOT. Numeric
// owners are kept. Digests are checked: each layer's uncompressed stream
// against its diff_id, the config against the manifest.
//
// Files: template.go (types, errors, names), store.go (paths, metadata,
// list, remove), image.go (import of one image: limits, layers, root),
// source.go (archives, layouts, registries), build.go (specs, mmdebstrap,
// bases), files.go (a build's files as a layer), run.go (run steps),
// gc.go; the Linux parts are
// tree_linux.go (safe creation under a root), unpack_linux.go (a layer's
// tar), flatten_linux.go (a root from layers), lock_linux.go (flock),
// python_linux.go (finding Python and ipykernel in a root), erofs_linux.go
// (mount points and the image), changes_linux.go (a run step's changes as
// a layer tar); other.go refuses elsewhere.
//
// It may import the standard library, golang.org/x/sys/unix and
// github.com/google/go-containerregistry; nothing of Cubicle's. It runs
// two programs: mmdebstrap (build) and mkfs.erofs (images).
package template
