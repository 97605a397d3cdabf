package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// openAPIDoc is the part of openapi.yaml the tests read.
type openAPIDoc struct {
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Parameters map[string]openAPIParam `yaml:"parameters"`
	} `yaml:"components"`
}

type openAPIParam struct {
	Ref  string `yaml:"$ref"`
	Name string `yaml:"name"`
	In   string `yaml:"in"`
}

type openAPIOp struct {
	Description string         `yaml:"description"`
	Parameters  []openAPIParam `yaml:"parameters"`
	// Security is nil when the operation inherits the global requirement,
	// and empty when it needs no token.
	Security  *[]map[string][]string `yaml:"security"`
	Responses map[string]yaml.Node   `yaml:"responses"`
}

// openAPIMethods are the keys of a path item that are operations.
var openAPIMethods = map[string]string{
	"get": http.MethodGet, "put": http.MethodPut, "post": http.MethodPost, "delete": http.MethodDelete,
	"options": http.MethodOptions, "head": http.MethodHead, "patch": http.MethodPatch, "trace": http.MethodTrace,
}

// documentedOps parses the embedded document into its operations, keyed
// "METHOD /path", with the path item's parameters prepended to each
// operation's and references to components.parameters resolved.
func documentedOps(t *testing.T) map[string]openAPIOp {
	t.Helper()
	var doc openAPIDoc
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	resolve := func(p openAPIParam) openAPIParam {
		if p.Ref == "" {
			return p
		}
		name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/")
		target, found := doc.Components.Parameters[name]
		if !ok || !found {
			t.Fatalf("openapi.yaml: unresolvable parameter reference %q", p.Ref)
		}
		return target
	}
	ops := map[string]openAPIOp{}
	for path, item := range doc.Paths {
		var shared []openAPIParam
		if node, ok := item["parameters"]; ok {
			if err := node.Decode(&shared); err != nil {
				t.Fatalf("openapi.yaml: %s parameters: %v", path, err)
			}
		}
		for key, node := range item {
			method, ok := openAPIMethods[key]
			if !ok {
				continue
			}
			var op openAPIOp
			if err := node.Decode(&op); err != nil {
				t.Fatalf("openapi.yaml: %s %s: %v", method, path, err)
			}
			op.Parameters = append(slices.Clone(shared), op.Parameters...)
			for i := range op.Parameters {
				op.Parameters[i] = resolve(op.Parameters[i])
			}
			ops[method+" "+path] = op
		}
	}
	if len(ops) == 0 {
		t.Fatal("openapi.yaml documents no operations")
	}
	return ops
}

// TestOpenAPIMatchesRoutes checks that openapi.yaml documents exactly the
// routes of routeTable, both ways. The dashboard's routes (uiRoutes) are
// not API operations and are checked separately.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	ops := documentedOps(t)
	routed := map[string]bool{}
	var missingFromDoc []string
	for _, rt := range routeTable(ScopeNone) {
		key := rt.method + " " + rt.path
		routed[key] = true
		if _, ok := ops[key]; !ok {
			missingFromDoc = append(missingFromDoc, key)
		}
	}
	var missingFromRouter []string
	for key := range ops {
		if !routed[key] {
			missingFromRouter = append(missingFromRouter, key)
		}
	}
	slices.Sort(missingFromRouter)
	if len(missingFromDoc) > 0 {
		t.Errorf("routes missing from openapi.yaml:\n\t%s", strings.Join(missingFromDoc, "\n\t"))
	}
	if len(missingFromRouter) > 0 {
		t.Errorf("operations in openapi.yaml that routeTable does not serve:\n\t%s", strings.Join(missingFromRouter, "\n\t"))
	}
}

// TestUIRoutesOutsideContract checks the dashboard's routes (uiRoutes): they
// are deliberately not API operations, so they must stay out of /v1 and out
// of openapi.yaml, and must not shadow a routeTable route.
func TestUIRoutesOutsideContract(t *testing.T) {
	t.Parallel()
	ops := documentedOps(t)
	for _, pattern := range uiRoutes {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			t.Fatalf("ui route %q: want \"METHOD /path\"", pattern)
		}
		// "/x/" matches everything under /x/; "/x/{$}" only /x/ itself.
		exact, isExact := strings.CutSuffix(path, "{$}")
		subtree := !isExact && strings.HasSuffix(path, "/")
		path = exact
		if strings.HasPrefix(path, "/v1") {
			t.Errorf("ui route %q is under /v1, which is the API's", pattern)
		}
		overlaps := func(p string) bool { return p == path || (subtree && strings.HasPrefix(p, path)) }
		for key := range ops {
			if opMethod, opPath, _ := strings.Cut(key, " "); opMethod == method && overlaps(opPath) {
				t.Errorf("ui route %q overlaps the documented operation %s", pattern, key)
			}
		}
		for _, rt := range routeTable(ScopeNone) {
			if rt.method == method && overlaps(rt.path) {
				t.Errorf("ui route %q overlaps the API route %s %s", pattern, rt.method, rt.path)
			}
		}
	}
}

// TestOpenAPIOperations checks what every documented route must declare:
// the Idempotency-Key header on each POST, and on each operation that
// takes a token a 401 response and its scope in the description.
func TestOpenAPIOperations(t *testing.T) {
	t.Parallel()
	ops := documentedOps(t)
	// With metrics authentication on, every route but the open ones needs
	// a token.
	for _, rt := range routeTable(ScopeRead) {
		key := rt.method + " " + rt.path
		op, ok := ops[key]
		if !ok {
			continue // reported by TestOpenAPIMatchesRoutes
		}
		if rt.method == http.MethodPost && !slices.ContainsFunc(op.Parameters, func(p openAPIParam) bool {
			return p.In == "header" && p.Name == "Idempotency-Key"
		}) {
			t.Errorf("%s: no Idempotency-Key header parameter", key)
		}
		public := op.Security != nil && len(*op.Security) == 0
		if public != (rt.scope == ScopeNone) {
			t.Errorf("%s: documented public=%v (security: []), but the route's scope is %s", key, public, rt.scope)
			continue
		}
		if public {
			continue
		}
		if _, ok := op.Responses["401"]; !ok {
			t.Errorf("%s: takes a token but documents no 401 response", key)
		}
		if want := "Scope: `" + rt.scope.String() + "`"; rt.path != "/metrics" && !strings.Contains(op.Description, want) {
			t.Errorf("%s: description does not say %q", key, want)
		}
	}
}
