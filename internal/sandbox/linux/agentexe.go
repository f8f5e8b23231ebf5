package linux

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/agentbin"
)

// AgentBinaryArg is the hidden subcommand with which a cubicle binary
// writes the lean agent it carries (agentbin) to its standard output.
const AgentBinaryArg = "agent-binary"

// maxAgentBinary bounds what is read from AgentBinaryArg.
const maxAgentBinary = 256 << 20

// agentExecutable returns what startAgent runs: the lean agent that the
// cubicle binary carries (agentbin), as a file in stateDir/agent named by
// its SHA-256, or the cubicle binary itself when it carries none, or when
// the copy cannot run (a state directory mounted noexec). path is the
// cubicle binary ("": this process's, /proc/self/exe).
func agentExecutable(stateDir, path string) string {
	self := path
	if self == "" {
		self = "/proc/self/exe"
	}
	lean := agentbin.Binary()
	if path != "" {
		lean = carriedAgent(path)
	}
	if len(lean) == 0 {
		return self
	}
	file, err := writeAgent(filepath.Join(stateDir, "agent"), lean)
	if err != nil {
		return self
	}
	return file
}

var carried sync.Map // path → []byte: a binary is asked once per process

// carriedAgent asks the cubicle binary at path for the agent it carries.
func carriedAgent(path string) []byte {
	if b, ok := carried.Load(path); ok {
		return b.([]byte)
	}
	var out bytes.Buffer
	cmd := exec.Command(path, AgentBinaryArg)
	stdout, err := cmd.StdoutPipe()
	if err != nil || cmd.Start() != nil {
		return nil
	}
	_, err = io.Copy(&out, io.LimitReader(stdout, maxAgentBinary))
	if cmd.Wait() != nil || err != nil {
		out.Reset()
	}
	carried.Store(path, out.Bytes())
	return out.Bytes()
}

// writeAgent stores b in dir under its SHA-256 (mode 0500; kept when one
// with that content is there) and checks that it runs.
func writeAgent(dir string, b []byte) (string, error) {
	sum := sha256.Sum256(b)
	file := filepath.Join(dir, hex.EncodeToString(sum[:16]))
	if have, err := os.ReadFile(file); err != nil || !bytes.Equal(have, b) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		tmp, err := os.CreateTemp(dir, ".new-*")
		if err != nil {
			return "", err
		}
		defer os.Remove(tmp.Name())
		_, err = tmp.Write(b)
		if err == nil {
			err = tmp.Chmod(0o500)
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), file)
		}
		if err != nil {
			return "", fmt.Errorf("store the agent: %w", err)
		}
	}
	pruneAgents(dir, filepath.Base(file))
	// Not PID 1, it only says so and exits 2; an error here means it cannot
	// be executed at all.
	if err := exec.Command(file).Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			return "", err
		}
	}
	return file, nil
}

// staleAgent is how long an agent of another version is kept in
// stateDir/agent: a process of that version may still be about to start
// a computer with it.
const staleAgent = 24 * time.Hour

// pruneAgents removes the agents of other versions (and unfinished copies)
// last changed more than staleAgent ago.
func pruneAgents(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.Name() != keep && time.Since(info.ModTime()) > staleAgent {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
