package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// The key is 32 random bytes, written as 64 hex digits to KeyFile in the
// data directory (mode 0600) the first time a secret is stored. Each value
// is sealed with a fresh nonce and the row's organisation, domain and name
// as additional data (a sealed value moved to another row does not
// unseal), and stored with the id of its key, so a lost or changed key
// file is told apart from a damaged row, and each says what to do
// (store.ErrSecretsKey).

// KeyFile is the file, in the data directory, that holds the key of the
// organisations' domain secrets.
const KeyFile = "secrets.key"

// Sealer holds the key, read (or made) at its first use and kept for the
// life of the process.
type Sealer struct {
	path string
	mu   sync.Mutex
	aead cipher.AEAD
	id   string
}

// New is the sealer of the key file in the directory dir.
func New(dir string) *Sealer {
	return &Sealer{path: filepath.Join(dir, KeyFile)}
}

// Path is the key file's path.
func (s *Sealer) Path() string { return s.path }

// keyID names a key without revealing it.
func keyID(key []byte) string {
	h := sha256.Sum256(append([]byte("cubicle org domain secrets key\x00"), key...))
	return hex.EncodeToString(h[:8])
}

// key returns the cipher and the key's id, reading the key file the first
// time; a missing file is made when create is set, else it is an error.
func (s *Sealer) key(create bool) (cipher.AEAD, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aead != nil {
		return s.aead, s.id, nil
	}
	key, err := s.read()
	if errors.Is(err, fs.ErrNotExist) && create {
		key, err = s.create()
	}
	if err != nil {
		return nil, "", err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, "", err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, "", err
	}
	s.aead, s.id = aead, keyID(key)
	return s.aead, s.id, nil
}

// read reads the key file: an error that wraps fs.ErrNotExist when there
// is none, store.ErrSecretsKey (saying what to do) when it cannot serve.
func (s *Sealer) read() ([]byte, error) {
	fi, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the key file %s is missing: restore it from a backup of the data directory (%w)", store.ErrSecretsKey, s.path, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrSecretsKey, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: the key file %s is not a regular file", store.ErrSecretsKey, s.path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: the key file %s can be read by others (mode %04o): chmod 600 %s", store.ErrSecretsKey, s.path, perm, s.path)
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrSecretsKey, err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%w: the key file %s does not hold a key (64 hex digits): restore it from a backup of the data directory", store.ErrSecretsKey, s.path)
	}
	return key, nil
}

// create makes a new key file (mode 0600), atomically: a process that
// made one first wins, and its key is used.
func (s *Sealer) create() ([]byte, error) {
	key := make([]byte, 32)
	rand.Read(key)
	var r [8]byte
	rand.Read(r[:])
	tmp := s.path + ".tmp-" + hex.EncodeToString(r[:])
	fail := func(err error) ([]byte, error) {
		os.Remove(tmp)
		return nil, fmt.Errorf("%w: create the key file %s: %v", store.ErrSecretsKey, s.path, err)
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fail(err)
	}
	_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	err = os.Link(tmp, s.path)
	os.Remove(tmp)
	if errors.Is(err, fs.ErrExist) {
		return s.read() // another process made it first
	}
	if err != nil {
		return fail(err)
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return key, nil
}

// aad binds a sealed value to its row.
func aad(org, domain, name string) []byte {
	return []byte("org_domain_secrets\x00" + org + "\x00" + domain + "\x00" + name)
}

// Seal seals a row's value with aead (from ForNew).
func Seal(aead cipher.AEAD, org, domain, name, value string) string {
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return base64.StdEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(value), aad(org, domain, name)))
}

// Unseal is a stored row's value, sealed with the key of id kid.
func (s *Sealer) Unseal(org, domain, name, value, kid string) (string, error) {
	aead, id, err := s.key(false)
	if err != nil {
		return "", fmt.Errorf("organisation %s's domain secret %s for %s: %w", org, name, domain, err)
	}
	if kid != id {
		return "", fmt.Errorf("%w: organisation %s's domain secret %s for %s was sealed with key %s, but the key file %s holds key %s: restore the key file it was sealed with, or set the secret again",
			store.ErrSecretsKey, org, name, domain, kid, s.path, id)
	}
	b, err := base64.StdEncoding.DecodeString(value)
	if err == nil && len(b) >= aead.NonceSize() {
		var out []byte
		if out, err = aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], aad(org, domain, name)); err == nil {
			return string(out), nil
		}
	}
	return "", fmt.Errorf("%w: organisation %s's domain secret %s for %s does not unseal with key %s (its row was altered): set the secret again",
		store.ErrSecretsKey, org, name, domain, id)
}

// ForNew is the key to seal a new value with, given how many values the
// database holds sealed (n) and the id of one of their keys (kid): the key
// file's, made now when there is none, unless the database holds values
// sealed with a key (then the file was lost, and a new key would hide
// that: restore it, or delete those secrets first).
func (s *Sealer) ForNew(n int, kid string) (cipher.AEAD, string, error) {
	aead, id, err := s.key(n == 0)
	if err != nil && n > 0 && errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%w: the key file %s is missing, but the database holds %d domain secrets sealed with its key %s: restore the file from a backup of the data directory, or delete those secrets (GET and DELETE /v1/admin/orgs/{id}/domain_secrets, cubicle orgs secrets|secret-rm) and set them again",
			store.ErrSecretsKey, s.path, n, kid)
	}
	return aead, id, err
}
