package kernel

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
)

// ConnInfo is a Jupyter connection file: where the kernel's sockets listen
// and the key that signs every message.
type ConnInfo struct {
	IP              string `json:"ip"`
	Transport       string `json:"transport"` // "tcp" or "ipc"
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

// NewConnInfo returns connection info for a kernel on ip (e.g. "127.0.0.1")
// with five currently free TCP ports and a random 256-bit key. The ports are
// free when chosen; something else may take one before the kernel binds it,
// in which case the kernel fails to start and the caller retries.
func NewConnInfo(ip string) (ConnInfo, error) {
	var ports [5]int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return ConnInfo{}, fmt.Errorf("kernel: choosing a port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return ConnInfo{}, err
	}
	return ConnInfo{
		IP: ip, Transport: "tcp",
		ShellPort: ports[0], IOPubPort: ports[1], StdinPort: ports[2], ControlPort: ports[3], HBPort: ports[4],
		Key: hex.EncodeToString(key[:]), SignatureScheme: "hmac-sha256",
	}, nil
}

// WriteConnectionFile writes ci as a connection file readable only by its
// owner (the caller chowns it when the kernel runs as another user).
func (ci ConnInfo) WriteConnectionFile(path string) error {
	b, err := json.MarshalIndent(ci, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// ReadConnectionFile reads a connection file (at most 64 KiB).
func ReadConnectionFile(path string) (ConnInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return ConnInfo{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return ConnInfo{}, err
	}
	var ci ConnInfo
	if err := json.Unmarshal(b, &ci); err != nil {
		return ConnInfo{}, fmt.Errorf("kernel: connection file %s: %w", path, err)
	}
	return ci, nil
}

func (ci ConnInfo) validate() error {
	switch ci.Transport {
	case "tcp", "ipc", "":
	default:
		return fmt.Errorf("kernel: unsupported transport %q", ci.Transport)
	}
	switch ci.SignatureScheme {
	case "hmac-sha256", "":
	default:
		return fmt.Errorf("kernel: unsupported signature scheme %q", ci.SignatureScheme)
	}
	if ci.IP == "" {
		return errors.New("kernel: connection info without ip")
	}
	for _, p := range []int{ci.ShellPort, ci.IOPubPort, ci.StdinPort, ci.ControlPort} {
		if p <= 0 || p > 65535 {
			return fmt.Errorf("kernel: invalid port %d", p)
		}
	}
	return nil
}

// addr returns the network and address of one of the kernel's sockets.
// For ipc, ipykernel's socket path is "<ip>-<port>".
func (ci ConnInfo) addr(port int) (network, address string) {
	if ci.Transport == "ipc" {
		return "unix", ci.IP + "-" + strconv.Itoa(port)
	}
	return "tcp", net.JoinHostPort(ci.IP, strconv.Itoa(port))
}
