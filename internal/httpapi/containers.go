package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// OpenAI's Containers API (/v1/containers) over Cubicle's computers: a
// container is a computer, its id the computer's. OpenAI's shapes, so the
// official SDKs work unmodified (docs/api.md, "OpenAI Containers API").

// defaultContainerMinutes is OpenAI's: a container expires 20 minutes
// after its last activity unless expires_after says otherwise.
const defaultContainerMinutes = 20

// containerBody is the body of POST /v1/containers.
type containerBody struct {
	Name          string         `json:"name"`
	ExpiresAfter  *expiresAfter  `json:"expires_after,omitempty"`
	FileIDs       []string       `json:"file_ids,omitempty"`
	MemoryLimit   string         `json:"memory_limit,omitempty"`
	NetworkPolicy *networkPolicy `json:"network_policy,omitempty"`
	Skills        []any          `json:"skills,omitempty"`
}

// containerView is OpenAI's container object.
type containerView struct {
	ID            string         `json:"id"`
	Object        string         `json:"object"`
	CreatedAt     int64          `json:"created_at"`
	Status        string         `json:"status"`
	Name          string         `json:"name"`
	ExpiresAfter  expiresAfter   `json:"expires_after"`
	LastActiveAt  *int64         `json:"last_active_at,omitempty"`
	MemoryLimit   string         `json:"memory_limit"`
	NetworkPolicy *networkPolicy `json:"network_policy"`
}

// containerOf is a computer as a container: "running" while it lives,
// "expired" once it stopped.
func containerOf(v computer.View) containerView {
	status := "running"
	if v.StoppedAt != nil {
		status = "expired"
	}
	minutes := int(v.Limits.IdleTimeout.Minutes())
	np := networkPolicyOf(v.Limits.NetworkPolicy)
	if np == nil {
		np = &networkPolicy{Type: "disabled"}
	}
	return containerView{ID: v.ID, Object: "container", CreatedAt: v.CreatedAt.Unix(), Status: status, Name: v.Name,
		ExpiresAfter: expiresAfter{Anchor: "last_active_at", Minutes: minutes}, LastActiveAt: unixOf(v.LastActiveAt),
		MemoryLimit: memoryLimitOf(v.Limits.MemoryMB), NetworkPolicy: np}
}

// memoryLimitOf is a computer's memory in OpenAI's form ("1g"), or in
// mebibytes ("512m") when it is none of OpenAI's (the deployment's
// memory is below what was asked).
func memoryLimitOf(mb int64) string {
	if mb%1024 == 0 {
		return strconv.FormatInt(mb/1024, 10) + "g"
	}
	return strconv.FormatInt(mb, 10) + "m"
}

// request is the computer a container body asks for.
func (b containerBody) request() (computer.CreateRequest, error) {
	bad := func(param, format string, args ...any) (computer.CreateRequest, error) {
		return computer.CreateRequest{}, withParam(param, fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...))
	}
	switch {
	case b.Name == "":
		return bad("name", "name is required")
	case len(b.Skills) > 0:
		return bad("skills", "skills are not supported by this server")
	}
	idle := defaultContainerMinutes * 60
	if e := b.ExpiresAfter; e != nil {
		var err error
		if idle, err = e.seconds(); err != nil {
			return computer.CreateRequest{}, err
		}
	}
	req := computer.CreateRequest{Name: b.Name, IdleTimeout: durationOf(idle), NetworkPolicy: b.NetworkPolicy.request()}
	if b.MemoryLimit != "" {
		mb, ok := computer.OpenAIMemoryMB(b.MemoryLimit)
		if !ok {
			return bad("memory_limit", "memory_limit must be one of 1g, 4g, 16g, 64g, got %q", b.MemoryLimit)
		}
		req.MemoryMB = mb // clamped to the deployment's memory, like memory_mb
	}
	return req, nil
}

func (a *API) createContainer(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body containerBody
	if err := decode(r, &body); err != nil {
		return err
	}
	req, err := body.request()
	if err != nil {
		return err
	}
	if len(body.FileIDs) > 0 && a.files == nil {
		return withParam("file_ids", fmt.Errorf("%w: this server keeps no files", errBadRequest))
	}
	v, err := a.comp.Create(r.Context(), p, req)
	if err != nil {
		return err
	}
	if len(body.FileIDs) > 0 {
		if err := a.copyContainerFiles(r, p, v.ID, body.FileIDs); err != nil {
			a.comp.Delete(r.Context(), p, v.ID)
			return err
		}
	}
	writeJSON(w, http.StatusOK, containerOf(v))
	return nil
}

// copyContainerFiles copies uploaded files into a new container's
// workspace; a file that is not the caller's, or over the limits, fails
// the create (400 naming file_ids).
func (a *API) copyContainerFiles(r *http.Request, p governance.Principal, id string, ids []string) error {
	return a.comp.WithSandbox(r.Context(), p, id, func(sb sandbox.Sandbox) error {
		rep, err := a.files.CopyInputs(r.Context(), p, sb, files.InputsRequest{FileIDs: ids})
		if err != nil {
			return err
		}
		if len(rep.Skipped) > 0 {
			s := rep.Skipped[0]
			return withParam("file_ids", fmt.Errorf("%w: file %s was not copied: %s", errBadRequest, s.ID, s.Reason))
		}
		return nil
	})
}

func (a *API) getContainer(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	v, err := a.comp.Get(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, containerOf(v))
	return nil
}

// listContainers is OpenAI's cursor page of the organisation's
// computers (cursorPage), newest first unless order=asc; ?name= filters.
func (a *API) listContainers(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	all, err := a.comp.List(r.Context(), p, true, "")
	if err != nil {
		return err
	}
	if name := r.URL.Query().Get("name"); name != "" {
		all = slices.DeleteFunc(all, func(v computer.View) bool { return v.Name != name })
	}
	data := make([]containerView, len(all))
	for i, v := range all {
		data[i] = containerOf(v)
	}
	page, err := cursorPage(r, data, func(c containerView) string { return c.ID })
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// cursorPage is OpenAI's cursor page of items (oldest first):
// ?order=asc|desc (default desc), ?after=<id of the item before the
// page>, ?limit=1..100 (default 20); {object, data, first_id, last_id,
// has_more}.
func cursorPage[T any](r *http.Request, items []T, id func(T) string) (map[string]any, error) {
	return page(r, items, id, openAIPage)
}

// listPage is a page of one of Cubicle's own lists, items oldest first in
// a stable order: the same parameters and shape as cursorPage, but
// ?limit=1..1000 (default 1000) and, unless ?order says, oldest first
// (newest first with newestFirst, as the list always was).
func listPage[T any](r *http.Request, items []T, id func(T) string, newestFirst bool) (map[string]any, error) {
	rule := listRule
	rule.desc = newestFirst
	return page(r, items, id, rule)
}

// listRule is the rule of Cubicle's own lists: oldest first, up to 1000.
var listRule = pageRule{defLimit: 1000, maxLimit: 1000}

// pageRule is a list's default and largest page and default order.
type pageRule struct {
	defLimit, maxLimit int
	desc               bool
}

// params reads ?limit and ?order by the rule.
func (rule pageRule) params(r *http.Request) (limit int, desc bool, err error) {
	q := r.URL.Query()
	limit = rule.defLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > rule.maxLimit {
			return 0, false, withParam("limit", fmt.Errorf("%w: limit must be between 1 and %d, got %q", errBadRequest, rule.maxLimit, s))
		}
		limit = n
	}
	switch q.Get("order") {
	case "":
		desc = rule.desc
	case "desc":
		desc = true
	case "asc":
	default:
		return 0, false, withParam("order", fmt.Errorf("%w: order must be asc or desc, got %q", errBadRequest, q.Get("order")))
	}
	return limit, desc, nil
}

// openAIPage is the rule of OpenAI's lists.
var openAIPage = pageRule{defLimit: 20, maxLimit: 100, desc: true}

func page[T any](r *http.Request, items []T, id func(T) string, rule pageRule) (map[string]any, error) {
	limit, desc, err := rule.params(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	if desc {
		items = slices.Clone(items)
		slices.Reverse(items)
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(items, func(x T) bool { return id(x) == after })
		if i < 0 {
			return nil, withParam("after", fmt.Errorf("%w: no %q to list after", errBadRequest, after))
		}
		items = items[i+1:]
	}
	return pageBody(items[:min(limit, len(items))], id, len(items) > limit), nil
}

// pageBody is a cursor page of items: {object, data, first_id, last_id,
// has_more}.
func pageBody[T any](items []T, id func(T) string, more bool) map[string]any {
	page := map[string]any{"object": "list", "data": items, "has_more": more, "first_id": nil, "last_id": nil}
	if len(items) > 0 {
		page["first_id"], page["last_id"] = id(items[0]), id(items[len(items)-1])
	}
	return page
}

func (a *API) deleteContainer(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id := r.PathValue("id")
	// A container that already expired is deleted all the same (OpenAI
	// keeps expired containers until they are deleted).
	if err := a.comp.Delete(r.Context(), p, id); err != nil && !errors.Is(err, computer.ErrGone) {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "container.deleted", "deleted": true})
	return nil
}
