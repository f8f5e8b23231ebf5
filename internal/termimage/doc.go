// Package termimage shows PNG images inline in terminals that can display
// them: the kitty graphics protocol (kitty, Ghostty) and iTerm2's inline
// images (iTerm2, WezTerm). Detect decides from the environment whether the
// terminal on stdout speaks one of them; Write emits an image with it.
//
// Detection is deliberately conservative: a protocol is used only when stdout
// is a terminal and nothing in between (tmux, screen) would swallow or mangle
// the escape sequences. Everything else gets None, and the caller saves the
// image to a file instead. Nothing here reads from the terminal: the kitty
// sequence asks for no answer (q=2), so no reply lands in the caller's stdin.
//
// It may import the standard library only (the caller detects the terminal).
package termimage
