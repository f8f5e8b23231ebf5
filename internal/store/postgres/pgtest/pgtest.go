package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL server of a test binary.
type Server struct {
	dir   string // the temporary directory: the cluster (data) and the socket
	cmd   *exec.Cmd
	done  chan struct{}
	log   *os.File
	mu    sync.Mutex // serializes admin, schemas and n
	admin *pgx.Conn  // to the database postgres
	// schemas is connected to the database shared, where Schema makes
	// the tests' schemas.
	schemas *pgx.Conn
	n       int
}

// shared is the database whose schemas the tests get.
const shared = "cubicle_test"

// Main runs a test binary's tests with one server started before them and
// removed after (TestMain: os.Exit(pgtest.Main(m, &srv))). No server is a
// failure, with what to install.
func Main(m *testing.M, srv **Server) int {
	s, err := Start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	*srv = s
	code := m.Run()
	s.Stop()
	return code
}

// binDir finds the directory of initdb and postgres.
func binDir() (string, error) {
	if d := os.Getenv("CUBICLE_POSTGRES_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server (initdb, postgres): run scripts/setup.sh, which installs Debian's postgresql-15, or set CUBICLE_POSTGRES_BIN")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// runAs is the identity the server runs as: the caller's, or nobody's
// when that is root.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("the server refuses to run as root and there is no user nobody: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Start makes a cluster in a new temporary directory and starts its
// server, ready when it returns.
func Start(ctx context.Context) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cubicle-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, done: make(chan struct{})}
	if err := s.start(ctx, bin, cred); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, bin string, cred *syscall.Credential) error {
	if cred != nil {
		if err := os.Chown(s.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	data := filepath.Join(s.dir, "data")
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = s.dir
		cmd.Env = []string{"LC_ALL=C", "PATH=" + bin + ":/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	if out, err := command("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-N", "-E", "UTF8", "--locale=C", "--wal-segsize=1").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	var err error
	if s.log, err = os.Create(filepath.Join(s.dir, "server.log")); err != nil {
		return err
	}
	s.cmd = command("postgres", "-D", data, "-k", s.dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=32MB")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			s.admin = c
			return s.share(ctx)
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(s.log.Name())
			return fmt.Errorf("postgres exited before accepting connections:\n%s", b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.log.Name())
			return fmt.Errorf("postgres did not accept connections within 60 s: %v\n%s", err, b)
		}
	}
}

// URL is the URL of the database db on the server (its unix socket).
func (s *Server) URL(db string) string {
	return "postgres://postgres@/" + db + "?host=" + url.QueryEscape(s.dir) + "&sslmode=disable"
}

// share creates the database shared.
func (s *Server) share(ctx context.Context) error {
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+shared); err != nil {
		return fmt.Errorf("create database %s: %w", shared, err)
	}
	c, err := pgx.Connect(ctx, s.URL(shared))
	s.schemas = c
	return err
}

// NewDatabase creates an empty database and returns its URL. Making one
// copies a template (about a second on a busy host): tests that need no
// database of their own take a Schema.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	name := fmt.Sprintf("cubicle_test_%d", s.n)
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+name+" STRATEGY FILE_COPY"); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.URL(name), nil
}

// NewSchema creates an empty schema in the shared database and returns
// the URL of that database with the schema as its search_path: what a
// store opens there lives in the schema, as apart from other tests' as in
// a database of its own, except for advisory locks (database-wide). It
// takes milliseconds.
func (s *Server) NewSchema(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	name := fmt.Sprintf("test_%d", s.n)
	if _, err := s.schemas.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", fmt.Errorf("create schema %s: %w", name, err)
	}
	return s.URL(shared) + "&search_path=" + name, nil
}

// Schema is NewSchema for one test, failing it on an error.
func (s *Server) Schema(t testing.TB) string {
	t.Helper()
	u, err := s.NewSchema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Database is NewDatabase for one test, failing it on an error.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	u, err := s.NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Stop ends the server at once (SIGQUIT: nothing needs to be kept) and
// removes its directory.
func (s *Server) Stop() {
	for _, c := range []*pgx.Conn{s.admin, s.schemas} {
		if c != nil {
			c.Close(context.Background())
		}
	}
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	}
	if s.log != nil {
		s.log.Close()
	}
	os.RemoveAll(s.dir)
}
