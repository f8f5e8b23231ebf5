package tools

import (
	"fmt"
	"strings"
)

// MaxCommandLineBytes bounds what one exec carries on its command line:
// the command (or every argv element) and the env entries (NAME=value),
// each counted with one byte for its terminating NUL, as execve counts
// them. 128 KiB is the kernel's limit on one argument (MAX_ARG_STRLEN),
// and even if every byte needs a six-byte JSON escape the exec request
// stays under the agent's 1 MiB control frame.
const MaxCommandLineBytes = 128 << 10

// CommandSentence is the model's sentence for a command that cannot be
// run as given (a NUL byte, too long), or "".
func CommandSentence(command string) string {
	switch {
	case strings.IndexByte(command, 0) >= 0:
		return "Invalid arguments: command contains a NUL byte, which a command line cannot carry."
	case len(command)+1 > MaxCommandLineBytes:
		return fmt.Sprintf("Invalid arguments: command is %d bytes; the limit is %d. Write a long script to a file and run the file.",
			len(command), MaxCommandLineBytes-1)
	}
	return ""
}
