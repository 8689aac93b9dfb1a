package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, from this package's directory.
const root = "../.."

// generated are paths the docs name that the tests write, and that a
// fresh clone therefore does not have.
var generated = map[string]string{
	"api/testdata/artifacts": "the browser test's screenshots ($ARTIFACTS_DIR)",
}

var (
	// pathRE matches a path of the repository in prose, code or a
	// command: a top-level directory, a slash and what follows, not
	// part of a longer path or URL.
	pathRE = regexp.MustCompile(`(?:^|[^\w/.$-])((?:api|bandit|bench|cmd|docs|internal|migrations|nn|policy|posterior|simulators|store)/[\w./-]*[\w/])`)
	// linkRE matches the target of a Markdown link or image.
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile("(?m)^#{1,6} +(.+?) *$")
)

// docs returns README.md and docs/*.md, relative to root.
func docs(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		files = append(files, rel)
	}
	return files
}

func exists(rel string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil
}

// TestDocsNameExistingPaths fails when a page names a path of the
// repository (relative to the root) that does not exist.
func TestDocsNameExistingPaths(t *testing.T) {
	n := 0
	defer func() { t.Logf("%d paths checked", n) }()
	for _, f := range docs(t) {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pathRE.FindAllStringSubmatch(string(raw), -1) {
			n++
			p := strings.TrimSuffix(strings.TrimRight(m[1], "."), "/")
			if _, ok := generated[p]; ok || exists(p) {
				continue
			}
			t.Errorf("%s names %s, which does not exist", f, p)
		}
	}
}

// TestDocsLinksResolve fails when a relative link of a page points at a
// file that does not exist, or at an anchor that no heading of the
// target Markdown file makes.
func TestDocsLinksResolve(t *testing.T) {
	n := 0
	defer func() { t.Logf("%d links checked", n) }()
	for _, f := range docs(t) {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(raw), -1) {
			n++
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			rel := f
			if file != "" {
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(f), file))
				if !exists(rel) {
					t.Errorf("%s links %s: %s does not exist", f, target, rel)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			body, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(body))[anchor] {
				t.Errorf("%s links %s: no heading of %s makes the anchor #%s", f, target, rel, anchor)
			}
		}
	}
}

// anchors returns the anchors GitHub makes for the headings of a
// Markdown document: lower case, spaces to hyphens, punctuation other
// than hyphens and underscores dropped, -1, -2, ... on repeats. Headings
// inside fenced code blocks are not headings.
func anchors(doc string) map[string]bool {
	var prose strings.Builder
	for i, part := range strings.Split(doc, "```") {
		if i%2 == 0 {
			prose.WriteString(part)
		}
	}
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(prose.String(), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestAnchors pins the slug rules on headings of these docs.
func TestAnchors(t *testing.T) {
	got := anchors("# A five-minute tour\n## `refinery serve`: the decision service\n## Replicas: several `refinery serve` on one database\n```\n# not a heading\n```\n## Notes\n## Notes\n")
	for _, want := range []string{"a-five-minute-tour", "refinery-serve-the-decision-service", "replicas-several-refinery-serve-on-one-database", "notes", "notes-1"} {
		if !got[want] {
			t.Errorf("anchors: no %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("anchors: a line of a code block made an anchor")
	}
}
