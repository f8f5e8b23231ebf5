package linux

import (
	"encoding/json"
	"fmt"

	"golang.org/x/sys/unix"
)

// The driver and its launcher (launcher.go, launchermain.go) talk over a
// SOCK_SEQPACKET socketpair: one JSON message per packet, descriptors
// beside it (SCM_RIGHTS). Both ends are the same build (the launcher is
// this binary's agent executable), so the messages carry no version.

// launcherFD is the launcher's end of the socket in the launcher.
const launcherFD = 3

// maxLaunchMsg bounds one message; maxLaunchFDs the descriptors beside it
// (the kernel's SCM_MAX_FD is 253).
const (
	maxLaunchMsg = 16 << 10
	maxLaunchFDs = 250
)

// launchRequest asks the launcher to start an agent. Its descriptors are
// the agent's stderr, then what becomes the agent's descriptors 3, 4, ...
type launchRequest struct {
	ID      uint64 `json:"id"`
	Path    string `json:"path"`     // the agent executable
	HostUID uint32 `json:"host_uid"` // the computer's host uid (userMap)
}

// launchReport is what the launcher says: that it is ready (its first
// message), that an agent started (Pid, with its pidfd beside it) or did
// not (Err), or that a started agent was reaped (Exited, with its wait
// status).
type launchReport struct {
	Ready  bool   `json:"ready,omitempty"`
	ID     uint64 `json:"id,omitempty"`
	Pid    int    `json:"pid,omitempty"`
	Err    string `json:"err,omitempty"`
	Exited bool   `json:"exited,omitempty"`
	Status uint32 `json:"status,omitempty"`
}

// encodeLaunch encodes a message and its descriptors for sendmsg.
func encodeLaunch(v any, fds []int) (msg, oob []byte, err error) {
	if len(fds) > maxLaunchFDs {
		return nil, nil, fmt.Errorf("launcher: %d descriptors, at most %d", len(fds), maxLaunchFDs)
	}
	if msg, err = json.Marshal(v); err != nil {
		return nil, nil, err
	}
	if len(msg) > maxLaunchMsg {
		return nil, nil, fmt.Errorf("launcher: message of %d bytes", len(msg))
	}
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	return msg, oob, nil
}

// receivedFDs returns the descriptors that came with a message (received
// close-on-exec); on a malformed or truncated control part it closes what
// it found and says so.
func receivedFDs(oob []byte, flags int) ([]int, error) {
	var fds []int
	msgs, err := unix.ParseSocketControlMessage(oob)
	for _, m := range msgs {
		if got, perr := unix.ParseUnixRights(&m); perr == nil {
			fds = append(fds, got...)
		}
	}
	if err == nil && flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 {
		err = fmt.Errorf("truncated message")
	}
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("launcher: %w", err)
	}
	return fds, nil
}
