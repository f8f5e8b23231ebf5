package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// egressIDPrefix prefixes an egress record's id in the API.
const egressIDPrefix = "egr_"

// egressRecord is one record of GET /v1/computer-egress and
// /v1/computers/{id}/egress: one connection, refusal or DNS question of
// an internet computer (docs/network.md), never payloads.
type egressRecord struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	ComputerID string `json:"computer_id"`
	KeyID      string `json:"key_id"`
	Protocol   string `json:"protocol"`
	Host       string `json:"host"`
	Address    string `json:"address"`
	Port       int    `json:"port"`
	Verdict    string `json:"verdict"`
	Rule       string `json:"rule"`
	Error      string `json:"error,omitempty"`
	BytesSent  int64  `json:"bytes_sent"`
	BytesRecv  int64  `json:"bytes_received"`
	OpenedAt   int64  `json:"opened_at"`
	ClosedAt   int64  `json:"closed_at"`
	DurationMS int64  `json:"duration_ms"`
}

func egressOf(r store.EgressRecord) egressRecord {
	return egressRecord{ID: egressIDPrefix + strconv.FormatInt(r.ID, 10), Object: "computer.egress",
		ComputerID: r.ComputerID, KeyID: r.KeyID, Protocol: r.Proto, Host: r.Name, Address: r.Addr, Port: r.Port,
		Verdict: r.Verdict, Rule: r.Rule, Error: r.Error, BytesSent: r.Sent, BytesRecv: r.Received,
		OpenedAt: r.OpenedAt.Unix(), ClosedAt: r.ClosedAt.Unix(), DurationMS: r.ClosedAt.Sub(r.OpenedAt).Milliseconds()}
}

// computerEgress lists one computer's records (404 for another
// organisation's computer).
func (a *API) computerEgress(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id := r.PathValue("id")
	if _, err := a.comp.Get(r.Context(), p, id); err != nil {
		return err
	}
	return a.listEgress(w, r, p, id)
}

// orgEgress lists the organisation's records.
func (a *API) orgEgress(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	return a.listEgress(w, r, p, "")
}

// listEgress answers a page of records, oldest first: host (a name or an
// address), opened_after and opened_before (Unix seconds), limit (1 to
// 1000, default 100) and after (the last id of the previous page).
func (a *API) listEgress(w http.ResponseWriter, r *http.Request, p governance.Principal, computerID string) error {
	if err := computer.Allowed(p); err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.EgressFilter{OrgID: p.Org.ID, ComputerID: computerID, Host: strings.ToLower(q.Get("host")), Limit: 100}
	var err error
	if f.OpenedAfter, err = timeParam(r, "opened_after"); err != nil {
		return err
	}
	if f.OpenedBefore, err = timeParam(r, "opened_before"); err != nil {
		return err
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > 1000 {
			return withParam("limit", fmt.Errorf("%w: limit must be 1 to 1000", errBadRequest))
		}
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(v, egressIDPrefix), 10, 64)
		if err != nil || !strings.HasPrefix(v, egressIDPrefix) || n < 0 {
			return withParam("after", fmt.Errorf("%w: after must be a record id (%s…)", errBadRequest, egressIDPrefix))
		}
		f.After = n
	}
	want := f.Limit
	f.Limit++ // one more tells whether there is a next page
	recs, err := a.st.Egress().List(r.Context(), f)
	if err != nil {
		return err
	}
	more := len(recs) > want
	recs = recs[:min(len(recs), want)]
	page := map[string]any{"object": "list", "data": []egressRecord{}, "has_more": more}
	data := make([]egressRecord, len(recs))
	for i, rec := range recs {
		data[i] = egressOf(rec)
	}
	if len(data) > 0 {
		page["data"], page["first_id"], page["last_id"] = data, data[0].ID, data[len(data)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
