package podagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// A pod that agent-sandbox's warm pool starts before any computer claims
// it has no Secret of its own: its init container (`cubicle agent --pod
// --keygen DIR`) makes the pod's key pair in a memory-backed emptyDir the
// agent container mounts, and writes the certificate's fingerprint to its
// termination message, which the kubelet publishes in the pod's status
// (status.initContainerStatuses[KeygenContainer].state.terminated.message).
// The control plane pins what the kubelet published; the key never
// leaves the pod.

// KeygenContainer names the init container; DefaultTerminationLog is the
// kubelet's default terminationMessagePath.
const (
	KeygenContainer       = "keygen"
	DefaultTerminationLog = "/dev/termination-log"
)

// identityValidity bounds the certificate a pod makes for itself (a pod
// lives at most as long as its computer).
const identityValidity = 365 * 24 * time.Hour

// Keygen makes the pod's identity in dir (ServerCert, ServerKey, readable
// by this user only; both must not exist yet) and writes its fingerprint
// to termLog.
func Keygen(dir, termLog string) error {
	id, err := NewIdentity("computer", identityValidity)
	if err != nil {
		return err
	}
	fp, err := id.Fingerprint()
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{ServerKey: id.KeyPEM, ServerCert: id.CertPEM} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
		if err != nil {
			return fmt.Errorf("the pod's identity: %w", err)
		}
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("the pod's identity: %w", err)
		}
	}
	if err := os.WriteFile(termLog, []byte(fp), 0o644); err != nil {
		return fmt.Errorf("publish the fingerprint: %w", err)
	}
	return nil
}

var hexFingerprint = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseFingerprint checks a published fingerprint: 64 lowercase hex
// digits (surrounding space aside).
func ParseFingerprint(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !hexFingerprint.MatchString(s) {
		return "", errors.New("not a SHA-256 fingerprint")
	}
	return s, nil
}
