package jupyter

import (
	"fmt"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// kernelName is the one kernel spec: Debian's ipykernel in a computer.
const kernelName = "python3"

// specModel is the kernelspec model of the Jupyter REST API.
func specModel() map[string]any {
	return map[string]any{
		"name": kernelName,
		"spec": map[string]any{
			"argv":           []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
			"display_name":   "Python 3 (Cubicle)",
			"language":       "python",
			"interrupt_mode": "signal",
			"env":            map[string]string{},
			"metadata":       map[string]any{"debugger": false},
		},
		"resources": map[string]string{},
	}
}

func (s *Server) listSpecs(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"default": kernelName, "kernelspecs": map[string]any{kernelName: specModel()}})
	return nil
}

func (s *Server) getSpec(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if name := r.PathValue("name"); name != kernelName {
		return fmt.Errorf("%w: %.64q", errNoSpec, name)
	}
	writeJSON(w, http.StatusOK, specModel())
	return nil
}

// specResource serves kernel.js, logos...: the spec has none.
func (s *Server) specResource(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	return fmt.Errorf("%w: the kernel spec has no resources", errNoSpec)
}
