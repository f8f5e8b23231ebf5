package errhttp

import (
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// JupyterBody is jupyter_server's error shape.
type JupyterBody struct {
	Message   string `json:"message"`
	Reason    string `json:"reason"`
	RequestID string `json:"request_id,omitempty"`
}

// jupyterKind is how the Kernel Gateway API reads a kind: jupyter_server
// answers a value over its bound as a bad request.
var jupyterKind = map[errdefs.Kind]errdefs.Kind{
	errdefs.TooLarge: errdefs.InvalidArgument,
}

// jupyterReason is jupyter_server's reason for a kind, whatever the
// error's own code.
var jupyterReason = map[errdefs.Kind]string{
	errdefs.TooLarge:    "invalid_request",
	errdefs.Unavailable: "unavailable",
}

// Jupyter is err's status and body in the Kernel Gateway API.
func Jupyter(r *http.Request, err error) (int, JupyterBody) {
	k, code := errdefs.Of(err)
	reason, forced := jupyterReason[k]
	if to, ok := jupyterKind[k]; ok {
		k = to
	}
	status, def := Status(k)
	switch {
	case forced:
	case code != "":
		reason = code
	default:
		reason = def
	}
	msg := err.Error()
	if status == http.StatusInternalServerError {
		internal(r.Context(), err)
		msg = InternalSentence
	}
	return status, JupyterBody{Message: msg, Reason: reason, RequestID: log.RequestID(r.Context())}
}

// WriteJupyter answers err in jupyter_server's shape, with a token
// challenge on a 401.
func WriteJupyter(w http.ResponseWriter, r *http.Request, err error) {
	status, body := Jupyter(r, err)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `token realm="cubicle"`)
	}
	WriteJSON(w, status, body)
}
