package termimage

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestDetect(t *testing.T) {
	cases := []struct {
		env  func(string) string
		tty  bool
		want Protocol
	}{
		{env("TERM", "xterm-kitty"), true, Kitty},
		{env("TERM", "xterm-kitty"), false, None},
		{env("TERM", "xterm-256color", "KITTY_WINDOW_ID", "3"), true, Kitty},
		{env("TERM", "xterm-ghostty"), true, Kitty},
		{env("TERM", "xterm-256color", "TERM_PROGRAM", "iTerm.app"), true, ITerm2},
		{env("TERM", "xterm-256color", "TERM_PROGRAM", "WezTerm"), true, ITerm2},
		{env("TERM", "xterm-256color", "LC_TERMINAL", "iTerm2"), true, ITerm2},
		{env("TERM", "xterm-256color"), true, None},
		{env("TERM", "tmux-256color", "KITTY_WINDOW_ID", "3", "TMUX", "/tmp/tmux-0/default,1,0"), true, None},
		{env("TERM", "screen", "TERM_PROGRAM", "iTerm.app"), true, None},
		{env(), true, None},
	}
	for i, c := range cases {
		if got := Detect(c.env, c.tty); got != c.want {
			t.Errorf("case %d: Detect = %v, want %v", i, got, c.want)
		}
	}
}

func TestWriteKittyChunks(t *testing.T) {
	png := bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 1, 2, 3}, 2000) // 14000 bytes: 18668 base64
	var out bytes.Buffer
	if err := Write(&out, Kitty, png); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.HasSuffix(s, "\x1b\\\n") {
		t.Fatalf("no terminator and newline at the end: %q", s[max(0, len(s)-10):])
	}
	seq := regexp.MustCompile("\x1b_G([^;]*);([A-Za-z0-9+/=]*)\x1b\\\\").FindAllStringSubmatch(s, -1)
	if len(seq) != 5 {
		t.Fatalf("%d sequences, want 5", len(seq))
	}
	var data strings.Builder
	for i, m := range seq {
		ctl, chunk := m[1], m[2]
		if i == 0 && ctl != "f=100,a=T,q=2,m=1" {
			t.Errorf("first control data %q", ctl)
		}
		if i > 0 && i < len(seq)-1 && ctl != "m=1" || i == len(seq)-1 && ctl != "m=0" {
			t.Errorf("sequence %d control data %q", i, ctl)
		}
		if len(chunk) > kittyChunk || i < len(seq)-1 && len(chunk)%4 != 0 {
			t.Errorf("sequence %d carries %d bytes", i, len(chunk))
		}
		data.WriteString(chunk)
	}
	got, err := base64.StdEncoding.DecodeString(data.String())
	if err != nil || !bytes.Equal(got, png) {
		t.Fatalf("reassembled payload differs (%v)", err)
	}
}

func TestWriteKittySmallAndITerm2(t *testing.T) {
	var out bytes.Buffer
	Write(&out, Kitty, []byte("abc"))
	if want := "\x1b_Gf=100,a=T,q=2,m=0;YWJj\x1b\\\n"; out.String() != want {
		t.Errorf("kitty: %q, want %q", out.String(), want)
	}
	out.Reset()
	Write(&out, ITerm2, []byte("abc"))
	if want := "\x1b]1337;File=inline=1;size=3;preserveAspectRatio=1:YWJj\a\n"; out.String() != want {
		t.Errorf("iterm2: %q, want %q", out.String(), want)
	}
	out.Reset()
	if err := Write(&out, None, []byte("abc")); err == nil || out.Len() != 0 {
		t.Errorf("None: %v, wrote %q", err, out.String())
	}
}
