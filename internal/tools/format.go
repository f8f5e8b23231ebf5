package tools

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Fixed markers of the answers.
const (
	TruncatedMarker = "[truncated]"
	CutMarker       = "[output cut by the computer]"
)

// CutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func CutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	i := n
	// Back up over continuation bytes to the start of the rune at n.
	for i > 0 && i > n-utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// line appends "\n" unless s is empty or already ends with one.
func line(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// Truncate cuts an answer to max bytes: a cut answer ends with the line
// [truncated] and the whole, marker included, fits in max.
func Truncate(s string, max int) string {
	return truncateKeeping(s, "", max)
}

// truncateKeeping is Truncate with trailer lines (without a final newline)
// that stay at the end of the answer, before [truncated].
func truncateKeeping(body, trailer string, max int) string {
	full := body
	if trailer != "" {
		full = line(body) + trailer
	}
	if len(full) <= max {
		return full
	}
	tail := TruncatedMarker
	if trailer != "" {
		tail = trailer + "\n" + TruncatedMarker
	}
	cut := CutUTF8(body, max-len(tail)-1)
	return line(cut) + tail
}

// FormatExec renders a command's answer:
//
//	exit_code: <n>            (or: timed out after <n> seconds)
//	stdout:
//	<stdout>
//	stderr:
//	<stderr>
//	[output cut by the computer]   (when a stream was cut at the read limit)
//	[truncated]                    (when the answer was cut at max bytes)
func FormatExec(exitCode int, timedOut bool, timeout time.Duration, stdout, stderr string, streamCut bool, max int) string {
	head := fmt.Sprintf("exit_code: %d", exitCode)
	if timedOut {
		head = sandbox.ExecTimedOut(int(timeout / time.Second))
	}
	body := head + "\nstdout:\n" + strings.ToValidUTF8(stdout, "\uFFFD") + "\nstderr:\n" + strings.ToValidUTF8(stderr, "\uFFFD")
	trailer := ""
	if streamCut {
		trailer = CutMarker
	}
	return truncateKeeping(body, trailer, max)
}

// BinarySentence is read_file's answer for a file with a NUL byte.
func BinarySentence(size int64) string {
	return fmt.Sprintf("[binary file: %d bytes; read it again with export to keep it]", size)
}

// OmittedSentence is the export answer for a key without artifacts.
func OmittedSentence(size int64) string {
	return fmt.Sprintf("[binary output omitted: %d bytes]", size)
}
