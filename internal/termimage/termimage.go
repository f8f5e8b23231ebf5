package termimage

import (
	"encoding/base64"
	"fmt"
	"io"
	"strings"
)

// Protocol is a way to show an image inline in a terminal.
type Protocol int

const (
	// None: the terminal cannot show images (or stdout is not a terminal).
	None Protocol = iota
	// Kitty is the kitty graphics protocol (APC _G sequences, PNG payload).
	Kitty
	// ITerm2 is iTerm2's inline image protocol (OSC 1337 File=).
	ITerm2
)

func (p Protocol) String() string {
	switch p {
	case Kitty:
		return "kitty"
	case ITerm2:
		return "iterm2"
	}
	return "none"
}

// Detect picks the protocol of the terminal described by the environment
// (getenv is os.Getenv in production). isTTY says whether the output is a
// terminal at all.
func Detect(getenv func(string) string, isTTY bool) Protocol {
	if !isTTY || getenv("TERM") == "dumb" {
		return None
	}
	// A multiplexer passes neither protocol through without configuration,
	// and the outer terminal's variables leak into it.
	if getenv("TMUX") != "" || getenv("STY") != "" || strings.HasPrefix(getenv("TERM"), "screen") {
		return None
	}
	term := getenv("TERM")
	if strings.Contains(term, "kitty") || strings.Contains(term, "ghostty") || getenv("KITTY_WINDOW_ID") != "" {
		return Kitty
	}
	switch getenv("TERM_PROGRAM") {
	case "iTerm.app", "WezTerm":
		return ITerm2
	}
	if getenv("LC_TERMINAL") == "iTerm2" { // iTerm2 sets it, and ssh forwards LC_*
		return ITerm2
	}
	return None
}

// kittyChunk is the largest payload of one kitty escape sequence.
const kittyChunk = 4096

// Write shows png inline with protocol p, followed by a newline so that
// what comes next starts below the image. With None it writes nothing and
// returns an error.
func Write(w io.Writer, p Protocol, png []byte) error {
	data := base64.StdEncoding.EncodeToString(png)
	var b strings.Builder
	switch p {
	case Kitty:
		// f=100: PNG; a=T: transmit and display; q=2: no reply from the
		// terminal. Chunks of 4096 base64 bytes (a multiple of 4), m=1 on all
		// but the last.
		first := true
		for len(data) > 0 || first {
			n := min(len(data), kittyChunk)
			more := 0
			if n < len(data) {
				more = 1
			}
			if first {
				fmt.Fprintf(&b, "\x1b_Gf=100,a=T,q=2,m=%d;%s\x1b\\", more, data[:n])
				first = false
			} else {
				fmt.Fprintf(&b, "\x1b_Gm=%d;%s\x1b\\", more, data[:n])
			}
			data = data[n:]
		}
	case ITerm2:
		fmt.Fprintf(&b, "\x1b]1337;File=inline=1;size=%d;preserveAspectRatio=1:%s\a", len(png), data)
	default:
		return fmt.Errorf("termimage: the terminal cannot show images")
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}
