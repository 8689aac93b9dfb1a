package api

import (
	"regexp"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/internal/keys"
)

// The OpenAPI document's security is the server's: every operation
// states it; the open ones (security: []) are exactly openRoute's and
// the others name the scope scopeFor gives them, with the 401 and 403
// answers documented.
func TestOpenAPISecurityIsTheServers(t *testing.T) {
	c := newContract(t)
	param := regexp.MustCompile(`\{[a-z_]+\}`)
	for tmpl, item := range c.paths() {
		path := param.ReplaceAllString(tmpl, "x")
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			m := strings.ToUpper(method)
			o := op.(map[string]any)
			sec, ok := o["security"].([]any)
			if !ok {
				t.Errorf("%s %s: no security", m, tmpl)
				continue
			}
			if open := openRoute(path); open != (len(sec) == 0) {
				t.Errorf("%s %s: security %v, but the server's openRoute says open=%v", m, tmpl, sec, open)
				continue
			}
			if len(sec) == 0 {
				continue
			}
			want := scopeFor(m, path)
			for _, req := range sec {
				for scheme, scopes := range req.(map[string]any) {
					if s := scopes.([]any); len(s) != 1 || keys.Scope(s[0].(string)) != want {
						t.Errorf("%s %s: %s scopes %v, the server needs %s", m, tmpl, scheme, s, want)
					}
					if scheme == "dashboardCookie" && want != keys.Read {
						t.Errorf("%s %s: the cookie is documented for a %s route; it is taken for reads only", m, tmpl, want)
					}
				}
			}
			rs := o["responses"].(map[string]any)
			if rs["401"] == nil || rs["403"] == nil {
				t.Errorf("%s %s: a secured operation without its 401 and 403", m, tmpl)
			}
		}
	}
}
