package pyterm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/png" // DecodeConfig of saved images
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/termimage"
)

// Renderer prints outputs for a terminal (or a pipe) as they arrive.
type Renderer struct {
	mu        sync.Mutex
	stdout    io.Writer
	stderr    io.Writer
	json      bool
	body      func(computer.PythonResult) any // the JSON of a result
	proto     termimage.Protocol
	saveDir   string
	next      int  // next image number to try
	midLine   bool // stdout does not end with a newline
	midLineEr bool // stderr does not end with a newline
	promptErr bool // the REPL prompts on stderr: stdout is not a terminal
	silent    bool // print no more outputs
}

// silence drops the outputs still to come.
func (r *Renderer) silence() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.silent = true
}

// NewRenderer prints to stdout and stderr as o asks; tty: stdout is a
// terminal (images may show inline, the REPL prompts on stdout).
func NewRenderer(stdout, stderr io.Writer, tty bool, o Options) *Renderer {
	return &Renderer{stdout: stdout, stderr: stderr, json: o.JSON, body: o.Body, saveDir: o.SaveDir, next: 1,
		proto: termimage.Detect(os.Getenv, tty), promptErr: !tty}
}

func (r *Renderer) write(toErr bool, s string) {
	if s == "" {
		return
	}
	if toErr {
		io.WriteString(r.stderr, s)
		r.midLineEr = !strings.HasSuffix(s, "\n")
		return
	}
	io.WriteString(r.stdout, s)
	r.midLine = !strings.HasSuffix(s, "\n")
}

// block writes s on lines of its own.
func (r *Renderer) block(toErr bool, s string) {
	if toErr && r.midLineEr || !toErr && r.midLine {
		r.write(toErr, "\n")
	}
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	r.write(toErr, s)
}

// endLine ends a last line of output that had no newline.
func (r *Renderer) endLine() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.midLine {
		r.write(false, "\n")
	}
	if r.midLineEr {
		r.write(true, "\n")
	}
}

// output prints one streamed output.
func (r *Renderer) output(o kernel.Output) {
	if r.json {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.silent {
		return
	}
	switch o.Type {
	case kernel.OutStream:
		r.write(o.Name == "stderr", o.Text)
	case kernel.OutDisplay, kernel.OutResult, kernel.OutUpdate:
		switch {
		case o.PNG != nil:
			r.image(o)
		case o.Text != "":
			r.block(false, o.Text)
		case o.JSON != nil:
			r.block(false, string(o.JSON))
		}
	case kernel.OutError:
		// IPython's traceback ends with "ename: evalue"; say it if not.
		tb := strings.TrimRight(strings.Join(o.Traceback, "\n"), "\n")
		head := o.EName
		if o.EValue != "" {
			head += ": " + o.EValue
		}
		if !strings.Contains(tb, head) {
			tb = strings.TrimLeft(tb+"\n"+head, "\n")
		}
		r.block(true, tb)
	case kernel.OutInput:
		r.block(true, fmt.Sprintf("[input(%q) is not available here: it got end of file]", o.Text))
	case kernel.OutTruncated:
		r.block(true, o.Text)
	case kernel.OutClear: // a terminal cannot take back what it printed
	}
}

// image shows a PNG inline or saves it with a note.
func (r *Renderer) image(o kernel.Output) {
	if r.proto != termimage.None {
		if r.midLine {
			r.write(false, "\n")
		}
		if termimage.Write(r.stdout, r.proto, o.PNG) == nil {
			r.midLine = false
			return
		}
	}
	path, err := r.save(o.PNG)
	if err != nil {
		r.block(true, fmt.Sprintf("[image (%dx%d) not saved: %v]", o.Width, o.Height, err))
		return
	}
	w, h := o.Width, o.Height
	if w == 0 || h == 0 {
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(o.PNG)); err == nil {
			w, h = cfg.Width, cfg.Height
		}
	}
	r.block(false, fmt.Sprintf("[image saved to %s (%dx%d)]", path, w, h))
}

// save writes png to the first free cubicle-out-<n>.png of the save
// directory; it never overwrites a file.
func (r *Renderer) save(png []byte) (string, error) {
	dir := r.saveDir
	if dir == "" {
		dir = "."
	}
	for ; ; r.next++ {
		name := fmt.Sprintf("cubicle-out-%d.png", r.next)
		path := filepath.Join(dir, name)
		if dir == "." {
			path = "./" + name
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		r.next++
		_, err = f.Write(png)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return "", err
		}
		return path, nil
	}
}

// printJSON prints a result as one line of JSON: Options.Body, the body
// POST /v1/computers/{id}/python answers.
func (r *Renderer) printJSON(res computer.PythonResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	enc := json.NewEncoder(r.stdout)
	enc.SetEscapeHTML(false)
	enc.Encode(r.body(res))
}

// prompt ends any unfinished output line and shows a prompt (on stderr
// when stdout is not the terminal, like Python's).
func (r *Renderer) prompt(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.midLine {
		io.WriteString(r.stdout, "\n")
	}
	if r.midLineEr {
		io.WriteString(r.stderr, "\n")
	}
	w := r.stdout
	if r.promptErr {
		w = r.stderr
	}
	io.WriteString(w, p)
	r.midLine, r.midLineEr = false, false // the user's Enter ends the line
}

// note prints a line of the CLI's own (not of the cell) on a line of its own.
func (r *Renderer) note(toErr bool, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.block(toErr, s)
}
