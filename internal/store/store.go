package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
)

// Error kinds. ErrConflict (a write that lost a race, handled inside the
// service) is deliberately unclassified: should one reach a client it is a
// server error.
var (
	ErrNotFound = errdefs.New(errdefs.NotFound, "", "not found")
	ErrConflict = errors.New("conflict")
	// ErrSecretsKey: the key that seals organisations' domain secrets at
	// rest is missing, unreadable or not the one a secret was sealed with
	// (an operator must restore it; the message says which file). 503:
	// never the client's fault.
	ErrSecretsKey = errdefs.New(errdefs.Unavailable, "secrets_key_unavailable", "the organisation's domain secrets cannot be unsealed")
)

// Store is everything persisted. Implementations are safe for concurrent use.
type Store interface {
	Orgs() Orgs
	Keys() Keys
	Computers() Computers
	Usage() Usage
	Audit() Audit
	Instances() Instances
	Files() Files
	Artifacts() Artifacts
	Responses() Responses
	Egress() Egress
	OrgSecrets() OrgSecrets
	Volumes() Volumes
	Scripts() Scripts
	Close() error
}

// Script is one of an organisation's own programs, offered to models as
// the tool script__<Name> (internal/scripts).
type Script struct {
	OrgID       string
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's arguments, as given.
	InputSchema json.RawMessage
	// Interpreter is the argv the program's file is appended to.
	Interpreter []string
	// Source is the program ("" from Scripts.List).
	Source string
	// TimeoutSeconds bounds one run below the computer's exec limit (0:
	// that limit).
	TimeoutSeconds int
	// Version counts the script's writes: 1 at Create, +1 at each Replace.
	Version int
	// KeyID is the key that wrote the script last.
	KeyID     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ErrTooMany is a Create past the caller's bound on an organisation's
// rows; deliberately unclassified (the service says what the bound is).
var ErrTooMany = errors.New("too many")

// Scripts stores organisations' scripts, named uniquely per organisation.
type Scripts interface {
	// Create records a script: ErrConflict when the organisation has one
	// of that name, ErrTooMany when it has max already (checked in the
	// same transaction).
	Create(ctx context.Context, s Script, max int) error
	// Get returns the organisation's script; ErrNotFound for none.
	Get(ctx context.Context, orgID, name string) (Script, error)
	// List returns the organisation's scripts by name, without Source.
	List(ctx context.Context, orgID string) ([]Script, error)
	// Replace writes everything of a script but its CreatedAt and
	// increments its Version; it returns the stored script; ErrNotFound
	// for none.
	Replace(ctx context.Context, s Script) (Script, error)
	// Delete removes one; ErrNotFound for none.
	Delete(ctx context.Context, orgID, name string) error
}

// Volume is a named persistent disk of an organisation.
type Volume struct {
	ID        string     `json:"id"`
	OrgID     string     `json:"org_id"`
	KeyID     string     `json:"key_id"`
	Name      string     `json:"name"`
	SizeMB    int64      `json:"size_mb"`
	CreatedAt time.Time  `json:"created_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// Volumes stores volumes' records.
type Volumes interface {
	// Create records a volume; ErrConflict when the organisation has a
	// live volume of that name.
	Create(ctx context.Context, v Volume) error
	// Get returns the live volume of that name; ErrNotFound for none.
	Get(ctx context.Context, orgID, name string) (Volume, error)
	// List returns the organisation's live volumes by name.
	List(ctx context.Context, orgID string) ([]Volume, error)
	// Delete marks a live volume deleted and writes its volume_mb_seconds
	// usage row and volume.deleted event, once; ErrNotFound for none.
	Delete(ctx context.Context, orgID, name string, at time.Time) (Volume, error)
}

// OrgSecret is one of an organisation's domain secrets: the header Name
// set to Value on its internet computers' HTTPS requests to Domain
// ("api.example.com" or "*.example.com").
type OrgSecret struct {
	Domain    string    `json:"domain"`
	Name      string    `json:"name"`
	Value     string    `json:"-"` // never in an answer
	CreatedAt time.Time `json:"-"`
}

// OrgSecrets stores organisations' domain secrets, their values sealed at
// rest (an implementation never writes a value in clear).
type OrgSecrets interface {
	// Set creates or replaces the secret of (org, domain, name); replaced
	// says there was one.
	Set(ctx context.Context, org string, s OrgSecret) (replaced bool, err error)
	// List returns an organisation's secrets, values included, by domain
	// and name; ErrSecretsKey when one cannot be unsealed.
	List(ctx context.Context, org string) ([]OrgSecret, error)
	// Names returns an organisation's secrets without values (it needs no
	// key), by domain and name.
	Names(ctx context.Context, org string) ([]OrgSecret, error)
	// Delete removes one; ErrNotFound when there was none.
	Delete(ctx context.Context, org, domain, name string) error
}

// Instances records that server processes are alive, so a successor can
// tell when a crashed one stopped (and charge its computers up to then),
// and, with several replicas on one database (docs/fleet.md), which one
// owns a computer and where the others reach it.
type Instances interface {
	// Beat renews an instance's lease (recording it at its first beat).
	Beat(ctx context.Context, id string, at time.Time) error
	// LastSeen returns the last beat of an instance, ErrNotFound if none.
	LastSeen(ctx context.Context, id string) (time.Time, error)
	// Advertise records the URL other replicas reach an instance at (and
	// beats it).
	Advertise(ctx context.Context, id, url string, at time.Time) error
	// Owner returns the instance that owns a computer not yet stopped;
	// ErrNotFound when there is no such computer (or its instance never
	// beat).
	Owner(ctx context.Context, computerID string) (Instance, error)
	// OwnerByMetadata is Owner of the computer not yet stopped whose
	// metadata maps key to value (a Kernel Gateway kernel's computer), and
	// that computer's id; ErrNotFound when there is none.
	OwnerByMetadata(ctx context.Context, key, value string) (computerID string, in Instance, err error)
	// OwnerOfResponse returns the instance running a response (its
	// Instance); ErrNotFound when none does.
	OwnerOfResponse(ctx context.Context, responseID string) (Instance, error)
	// OwnerOfKept is Owner of the computer not yet stopped that a
	// response's stored conversation names at its top-level member key (a
	// computer kept for the conversation), and that computer's id;
	// ErrNotFound when there is none.
	OwnerOfKept(ctx context.Context, responseID, key string) (computerID string, in Instance, err error)
	// Lapsed returns the instances whose last beat is before before and
	// that still own running (starting or ready) computers, by id.
	Lapsed(ctx context.Context, before time.Time) ([]Instance, error)
	// Live returns the instances that beat at or after since, by id.
	Live(ctx context.Context, since time.Time) ([]Instance, error)
}

// Instance is a server process as its heartbeats record it.
type Instance struct {
	ID string
	// URL is where other replicas reach it ("": it advertises none).
	URL       string
	StartedAt time.Time
	LastSeen  time.Time
}

// Org is an organisation.
type Org struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	AllowComputer bool   `json:"allow_computer"`
	// ComputerInternet is the switch computer_internet: its computers may
	// have internet where the deployment offers it.
	ComputerInternet bool `json:"computer_internet"`
	// ComputerInternetBulkRows is the switch computer_internet_bulk_rows:
	// datastore rows may be delivered to its computers that reach the
	// internet.
	ComputerInternetBulkRows bool `json:"computer_internet_bulk_rows"`
	// Policy is policy.settings as JSON ({"settings":{…}}), validated by
	// governance before it is stored.
	Policy    json.RawMessage `json:"policy"`
	CreatedAt time.Time       `json:"created_at"`
}

// Key is an API key; only a hash of its secret is stored.
type Key struct {
	ID           string          `json:"id"`
	OrgID        string          `json:"org_id"`
	Name         string          `json:"name"`
	Hash         string          `json:"-"`
	Prefix       string          `json:"prefix"` // first characters of the secret, to recognise it
	Admin        bool            `json:"admin"`
	Capabilities json.RawMessage `json:"capabilities"`
	// Policy is the key's own policy.settings as JSON, as Org.Policy.
	Policy    json.RawMessage `json:"policy"`
	CreatedAt time.Time       `json:"created_at"`
	RevokedAt *time.Time      `json:"revoked_at,omitempty"`
}

// Orgs stores organisations.
type Orgs interface {
	Create(ctx context.Context, o Org) error
	Get(ctx context.Context, id string) (Org, error)
	List(ctx context.Context) ([]Org, error)
	// Update writes an organisation's switches (AllowComputer,
	// ComputerInternet, ComputerInternetBulkRows) and Policy; ErrNotFound if absent.
	Update(ctx context.Context, o Org) error
	Count(ctx context.Context) (int, error)
}

// Keys stores API keys.
type Keys interface {
	Create(ctx context.Context, k Key) error
	Get(ctx context.Context, id string) (Key, error)
	ByHash(ctx context.Context, hash string) (Key, error)
	List(ctx context.Context, orgID string) ([]Key, error)
	Revoke(ctx context.Context, id string, at time.Time) error
	// SetPolicy replaces a key's policy; ErrNotFound if absent.
	SetPolicy(ctx context.Context, id string, policy json.RawMessage) error
}

// Computer states as stored.
const (
	StatusStarting  = "starting"
	StatusReady     = "ready"
	StatusDestroyed = "destroyed"
	// StatusFailed is a computer that ended by itself (its agent died):
	// stopped like a destroyed one, with Computer.Failure saying why.
	StatusFailed = "failed"
	// StatusPaused is a computer stopped with its workspace kept: nothing
	// of it runs, and it can be resumed (Computers.Resume) or stopped.
	StatusPaused = "paused"
)

// Stopped reports whether a computer of that status has ended.
func Stopped(status string) bool { return status == StatusDestroyed || status == StatusFailed }

// Computer is the durable record of one computer.
type Computer struct {
	ID          string          `json:"id"`
	OrgID       string          `json:"org_id"`
	KeyID       string          `json:"key_id"`
	Status      string          `json:"status"`
	CreatedAt   time.Time       `json:"created_at"`
	ReadyAt     *time.Time      `json:"ready_at,omitempty"`
	ExpiresAt   time.Time       `json:"expires_at"`
	DestroyedAt *time.Time      `json:"destroyed_at,omitempty"`
	Limits      json.RawMessage `json:"limits"`
	Metadata    json.RawMessage `json:"metadata"`
	ResponseID  string          `json:"response_id,omitempty"`
	Instance    string          `json:"instance"`          // the server process that owns it
	Failure     string          `json:"failure,omitempty"` // why a failed computer ended
	// Pauses counts the computer's pauses; PausedAt is when the current
	// one began (nil unless paused).
	Pauses   int        `json:"pauses,omitempty"`
	PausedAt *time.Time `json:"paused_at,omitempty"`
}

// ComputerFilter selects computers of one org, ordered by creation (then
// id), newest first when Desc, and one page of them: those after the
// computer After (ErrNotFound unless After is one of those selected), at
// most Limit (0: all). A backend reads only the page's rows (keyset on
// created_at, id: GET /v1/computers does not grow with the org's computers).
type ComputerFilter struct {
	OrgID      string
	AliveOnly  bool
	ResponseID string
	After      string
	Desc       bool
	Limit      int
}

// Stop is what is recorded, atomically and once, when a computer ends:
// its status, one usage row and one audit event.
type Stop struct {
	ComputerID string
	At         time.Time
	Seconds    int64 // whole seconds from ready to gone, rounded up
	Reason     string
	// Failure, when set, records the computer as failed (not destroyed)
	// and says why.
	Failure string
}

// Computers stores computer records.
type Computers interface {
	Create(ctx context.Context, c Computer) error
	MarkReady(ctx context.Context, id string, at time.Time) error
	Get(ctx context.Context, orgID, id string) (Computer, error)
	List(ctx context.Context, f ComputerFilter) ([]Computer, error)
	// Alive lists computers not yet stopped (destroyed or failed), of every
	// org, paused ones included.
	Alive(ctx context.Context) ([]Computer, error)
	// Pause records that a ready computer stopped with its workspace kept:
	// status paused and one usage row for the running period that ended
	// (s.Seconds) with its computer.paused event, in one transaction;
	// ErrConflict unless it was ready.
	Pause(ctx context.Context, s Stop) error
	// Resume records that a paused computer runs again from at, owned by
	// instance, until expiresAt; ErrConflict unless it was paused.
	Resume(ctx context.Context, id string, at time.Time, instance string, expiresAt time.Time) error
	// SetExpiry sets a live computer's expires_at (its lifetime
	// extended); ErrNotFound when it is not alive.
	SetExpiry(ctx context.Context, id string, expiresAt time.Time) error
	// Stop marks a computer destroyed (or failed) and writes its usage row
	// (none for a paused computer: its last period was charged at the
	// pause) and computer.destroyed event in one transaction. It returns ErrConflict
	// if the computer was already stopped, so the rows exist exactly once.
	Stop(ctx context.Context, s Stop) error
}

// UsageRow is one metered quantity.
type UsageRow struct {
	ID         int64     `json:"id"`
	OrgID      string    `json:"org_id"`
	KeyID      string    `json:"key_id"`
	ComputerID string    `json:"computer_id"`
	Kind       string    `json:"kind"`
	Quantity   int64     `json:"quantity"`
	CreatedAt  time.Time `json:"created_at"`
}

// UsageFilter selects usage rows of one org: created in [Since, Until)
// (zero: unbounded), with an id above After, at most Limit (0: 1000) by id.
type UsageFilter struct {
	OrgID        string
	Since, Until time.Time
	After        int64
	Limit        int
}

// Usage reads usage rows (Computers.Stop writes them).
type Usage interface {
	List(ctx context.Context, f UsageFilter) ([]UsageRow, error)
}

// Event is one audit event. Data never holds commands, output or file names.
type Event struct {
	ID         int64           `json:"id"`
	OrgID      string          `json:"org_id"`
	KeyID      string          `json:"key_id"`
	Type       string          `json:"type"`
	ComputerID string          `json:"computer_id,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
}

// EventFilter selects audit events of one org.
type EventFilter struct {
	OrgID        string
	Type         string
	Since, Until time.Time
	After        int64 // only events with a larger id
	Limit        int   // 0: 1000
}

// Audit stores audit events.
type Audit interface {
	Record(ctx context.Context, e Event) error
	List(ctx context.Context, f EventFilter) ([]Event, error)
}

// File is an uploaded file; its bytes live in the blob store.
type File struct {
	ID        string     `json:"id"`
	OrgID     string     `json:"org_id"`
	KeyID     string     `json:"key_id"`
	Filename  string     `json:"filename"`
	Purpose   string     `json:"purpose"`
	Bytes     int64      `json:"bytes"`
	SHA256    string     `json:"sha256"`
	CreatedAt time.Time  `json:"created_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// Files stores file records. Get and List never return deleted files.
type Files interface {
	Create(ctx context.Context, f File) error
	Get(ctx context.Context, orgID, id string) (File, error)
	// List returns the org's files, newest first.
	List(ctx context.Context, orgID string) ([]File, error)
	// Delete marks a file deleted; ErrNotFound if absent or already deleted.
	Delete(ctx context.Context, orgID, id string, at time.Time) error
}

// Artifact is a file a computer exported; its bytes live in the blob store.
type Artifact struct {
	ID         string    `json:"id"`
	OrgID      string    `json:"org_id"`
	KeyID      string    `json:"key_id"`
	ComputerID string    `json:"computer_id"`
	ResponseID string    `json:"response_id"`
	Filename   string    `json:"filename"`
	Bytes      int64     `json:"bytes"`
	SHA256     string    `json:"sha256"`
	CreatedAt  time.Time `json:"created_at"`
}

// ArtifactFilter selects artifacts of one org.
type ArtifactFilter struct {
	OrgID      string
	ComputerID string
	ResponseID string
}

// Artifacts stores artifact records.
type Artifacts interface {
	Create(ctx context.Context, a Artifact) error
	Get(ctx context.Context, orgID, id string) (Artifact, error)
	// List returns matching artifacts, newest first.
	List(ctx context.Context, f ArtifactFilter) ([]Artifact, error)
}

// Response is a stored Responses API response object (the gateway's
// finished response, as JSON).
type Response struct {
	ID        string
	OrgID     string
	KeyID     string
	CreatedAt time.Time
	Body      json.RawMessage
	// Conversation is what a later request continuing this response
	// (previous_response_id) replays, in the gateway's own JSON; nil: none
	// was kept.
	Conversation json.RawMessage
	// Items are the response's output items by id, for item_reference
	// input items of later requests.
	Items map[string]json.RawMessage
	// Instance is the server running the response while it is unfinished
	// (a background run); "" once it ended, and for every other response.
	Instance string
}

// Responses stores response objects, scoped by organisation.
type Responses interface {
	// Put stores r, replacing the body of the same id in the same org.
	Put(ctx context.Context, r Response) error
	// Get returns the org's response; ErrNotFound if absent.
	Get(ctx context.Context, orgID, id string) (Response, error)
	// Delete removes the org's response (and its items); ErrNotFound if
	// absent.
	Delete(ctx context.Context, orgID, id string) error
	// Item returns an output item of one of the org's stored responses;
	// ErrNotFound if absent.
	Item(ctx context.Context, orgID, itemID string) (json.RawMessage, error)
	// List returns up to limit of the org's responses (id, creation time
	// and body) by creation time (then the order they were stored), newest
	// first when desc, those
	// after the response after ("": from the start); ErrNotFound when
	// after is not one of the org's.
	List(ctx context.Context, orgID, after string, limit int, desc bool) ([]Response, error)
	// Unfinished returns, in every organisation, the responses whose
	// body holds "status":"queued" or "status":"in_progress" (a text
	// match, not parsed: the caller reads the body's own status), the
	// background responses a stopped server left running.
	Unfinished(ctx context.Context) ([]Response, error)
	// Orphaned returns the responses whose Instance is set but last beat
	// before before (or never): background runs a server that stopped
	// left unfinished.
	Orphaned(ctx context.Context, before time.Time) ([]Response, error)
}

// EgressRecord is one connection, refusal or DNS question of an internet
// computer (internal/egress's Record with its owner): never payloads.
type EgressRecord struct {
	ID                       int64
	OrgID, KeyID, ComputerID string
	Proto                    string
	Name                     string // "" for an IP literal
	Addr                     string // the address dialed or asked for
	Port                     int
	Verdict, Rule, Error     string
	Sent, Received           int64
	OpenedAt, ClosedAt       time.Time
}

// EgressFilter selects an organisation's egress records, oldest first.
type EgressFilter struct {
	OrgID      string
	ComputerID string // "": every computer of the organisation
	// Host matches Name or Addr exactly.
	Host                      string
	OpenedAfter, OpenedBefore time.Time
	// After is the ID of the last record of the previous page.
	After int64
	Limit int
}

// Egress stores egress records.
type Egress interface {
	// Record stores records (a batch, in one transaction).
	Record(ctx context.Context, recs []EgressRecord) error
	List(ctx context.Context, f EgressFilter) ([]EgressRecord, error)
}
