package ingress

import (
	"net/http"
	"path"
	"strings"

	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// CleanPaths wraps the routes Register mounts (the mux a process serves):
// a path of the A2A v1.0 HTTP+JSON binding, under /a2a/v1/ or a pool's
// /pools/<pool>/a2a/v1/, that http.ServeMux would redirect to its
// cleaned form (an empty segment, as tasks//pushNotificationConfigs for a
// missing task id, or a "." or ".." one) is answered as the binding
// answers a path none of its routes takes: 404 in its JSON error shape
// (a2av1.NoRoute). ServeMux answered a 307 with an HTML page, to another
// resource of the binding (tasks//pushNotificationConfigs to
// tasks/pushNotificationConfigs), before any handler could answer: the
// mux cleans a path before it matches a pattern, so only a wrapper can.
// Other paths are the mux's.
func CleanPaths(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if uncleanBindingPath(r) {
			a2av1.NoRoute(w)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// uncleanBindingPath reports whether r's path is under the HTTP+JSON
// binding (bare or a pool's) and one http.ServeMux would redirect: not
// its cleaned form (ServeMux's cleanPath: path.Clean keeping a final
// slash, of the escaped path; CONNECT is not cleaned).
func uncleanBindingPath(r *http.Request) bool {
	p := r.URL.EscapedPath()
	if r.Method == http.MethodConnect || !strings.HasPrefix(p, "/") {
		return false
	}
	under := p
	if after, ok := strings.CutPrefix(p, PoolsPath); ok {
		pool, rest, found := strings.Cut(after, "/")
		if !found || pool == "" {
			return false
		}
		under = "/" + rest
	}
	if !strings.HasPrefix(under, A2AV1Path+"/") {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean != p
}
