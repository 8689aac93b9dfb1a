package simulators

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFile writes b to dir/name and returns the path.
func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sharedMushroomBytes(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(sharedMushroom(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkOneLine(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want an error containing %q", wants)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", msg, w)
		}
	}
}

func TestResolveMushroomFailuresNameEveryPathAndTheChecksum(t *testing.T) {
	dir := t.TempDir()
	corrupt := writeFile(t, dir, filepath.Join("corrupt", MushroomFile), []byte("not the data\n"))
	missingDir := filepath.Join(dir, "missing")
	tests := []struct {
		name            string
		explicit, env   string
		search          []string
		wants, wantsNot []string
	}{
		{
			name:     "a missing explicit path is reported and nothing else is tried",
			explicit: filepath.Join(dir, "nope.data"), env: corrupt, search: []string{filepath.Dir(corrupt)},
			wants:    []string{filepath.Join(dir, "nope.data") + ": not found", MushroomSHA256},
			wantsNot: []string{"corrupt"},
		},
		{
			name:     "a corrupt explicit file shows both checksums",
			explicit: corrupt,
			wants:    []string{corrupt + ": wrong sha256 ", "want " + MushroomSHA256},
		},
		{
			name:  "REFINERY_DATA as a directory is looked into",
			env:   filepath.Dir(corrupt),
			wants: []string{corrupt + ": wrong sha256"},
		},
		{
			name:   "every directory of the search path is listed in order",
			search: []string{missingDir, filepath.Dir(corrupt)},
			wants: []string{
				"tried " + filepath.Join(missingDir, MushroomFile) + ": not found; " + corrupt + ": wrong sha256",
				"run 'refinery data' or pass --data PATH",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := resolveMushroom(tt.explicit, tt.env, tt.search)
			checkOneLine(t, err, tt.wants...)
			if !errors.Is(err, ErrNoMushroomData) {
				t.Errorf("errors.Is(%v, ErrNoMushroomData) = false", err)
			}
			for _, w := range tt.wantsNot {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q mentions %q, which should not have been tried", err, w)
				}
			}
			if p != "" {
				t.Errorf("path = %q, want \"\"", p)
			}
		})
	}
}

func TestResolveMushroomOrder(t *testing.T) {
	good := sharedMushroomBytes(t)
	dir := t.TempDir()
	explicitFile := writeFile(t, dir, filepath.Join("explicit", "renamed.data"), good)
	envDir := filepath.Dir(writeFile(t, dir, filepath.Join("env", MushroomFile), good))
	corruptDir := filepath.Dir(writeFile(t, dir, filepath.Join("corrupt", MushroomFile), []byte("x")))
	firstDir := filepath.Dir(writeFile(t, dir, filepath.Join("first", MushroomFile), good))
	secondDir := filepath.Dir(writeFile(t, dir, filepath.Join("second", MushroomFile), good))
	tests := []struct {
		name          string
		explicit, env string
		search        []string
		want          string
	}{
		{"an explicit file wins over everything", explicitFile, envDir, []string{firstDir}, explicitFile},
		{"an explicit directory is looked into", envDir, "", nil, filepath.Join(envDir, MushroomFile)},
		{"REFINERY_DATA wins over the search path", "", envDir, []string{firstDir}, filepath.Join(envDir, MushroomFile)},
		{"the first valid directory of the search path wins", "", "", []string{firstDir, secondDir}, filepath.Join(firstDir, MushroomFile)},
		{"a corrupt file in the search path is passed over", "", "", []string{corruptDir, secondDir}, filepath.Join(secondDir, MushroomFile)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveMushroom(tt.explicit, tt.env, tt.search)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("resolveMushroom = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResolveMushroomReadsREFINERYDATAAndTheWorkingDirectory(t *testing.T) {
	good := sharedMushroomBytes(t)
	dir := t.TempDir()
	writeFile(t, dir, filepath.Join("data", MushroomFile), good)
	t.Chdir(dir)

	t.Setenv("REFINERY_DATA", "")
	if got, err := ResolveMushroom(""); err != nil || got != filepath.Join("data", MushroomFile) {
		t.Errorf("ResolveMushroom(\"\") in a directory with data/ = %q, %v; want data/%s", got, err, MushroomFile)
	}
	t.Setenv("REFINERY_DATA", filepath.Join(dir, "elsewhere"))
	_, err := ResolveMushroom("")
	checkOneLine(t, err, filepath.Join(dir, "elsewhere")+": not found")
}

// zipOf returns a zip archive holding the given files.
func zipOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, b := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// serve returns a test server answering every path with body.
func serve(t *testing.T, status int, body []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/static/public/73/mushroom.zip"
}

func TestFetchMushroomDownloadsTheZip(t *testing.T) {
	good := sharedMushroomBytes(t)
	url := serve(t, http.StatusOK, zipOf(t, map[string][]byte{
		"agaricus-lepiota.names": []byte("names"),
		MushroomFile:             good,
	}))
	dir := filepath.Join(t.TempDir(), "data")
	got, err := FetchMushroom(context.Background(), dir, url)
	if err != nil {
		t.Fatal(err)
	}
	want := Fetched{Path: filepath.Join(dir, MushroomFile), From: url}
	if got != want {
		t.Errorf("FetchMushroom = %+v, want %+v", got, want)
	}
	if b, err := os.ReadFile(want.Path); err != nil || !bytes.Equal(b, good) {
		t.Errorf("the fetched file differs from the original (err %v)", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want only %s (no temporary files)", len(entries), MushroomFile)
	}

	// A second fetch finds the file and does nothing.
	got, err = FetchMushroom(context.Background(), dir, "http://127.0.0.1:1/unreachable")
	if err != nil || got.From != "" {
		t.Errorf("second FetchMushroom = %+v, %v; want From \"\" and no error", got, err)
	}
}

func TestFetchMushroomCopiesALocalSourceAndReplacesACorruptFile(t *testing.T) {
	shared := filepath.Dir(sharedMushroom(t))
	dir := t.TempDir()
	writeFile(t, dir, MushroomFile, []byte("corrupt"))
	got, err := FetchMushroom(context.Background(), dir, filepath.Join(dir, "missing"), shared)
	if err != nil {
		t.Fatal(err)
	}
	if got.From != shared {
		t.Errorf("From = %q, want %q", got.From, shared)
	}
	if err := checkMushroomFile(got.Path); err != nil {
		t.Errorf("after the fetch: %v", err)
	}
}

func TestFetchMushroomFailures(t *testing.T) {
	dir := t.TempDir()
	local := writeFile(t, dir, filepath.Join("local", MushroomFile), []byte("not it"))
	tests := []struct {
		name   string
		source string
		wants  []string
	}{
		{"a zip with other content fails the checksum", serve(t, 200, zipOf(t, map[string][]byte{MushroomFile: []byte("e,x\n")})), []string{"wrong sha256", "want " + MushroomSHA256}},
		{"a zip without the data file says so", serve(t, 200, zipOf(t, map[string][]byte{"other.txt": []byte("x")})), []string{"zip holds no " + MushroomFile}},
		{"an HTTP error status is reported", serve(t, http.StatusNotFound, []byte("gone")), []string{"HTTP 404 Not Found"}},
		{"a raw body with other content fails the checksum", serve(t, 200, []byte("hello")), []string{"wrong sha256"}},
		{"a corrupt local copy fails the checksum", filepath.Dir(local), []string{filepath.Dir(local) + ": wrong sha256"}},
		{"a missing local directory is not found", filepath.Join(dir, "nowhere"), []string{"not found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "data")
			_, err := FetchMushroom(context.Background(), out, tt.source)
			checkOneLine(t, err, append(tt.wants, tt.source, MushroomSHA256)...)
			if !errors.Is(err, ErrNoMushroomData) {
				t.Errorf("errors.Is(%v, ErrNoMushroomData) = false", err)
			}
			if _, err := os.Stat(filepath.Join(out, MushroomFile)); err == nil {
				t.Errorf("a failed fetch left %s behind", MushroomFile)
			}
		})
	}
}

func TestFetchMushroomStopsWhenTheContextIsCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	url := serve(t, 200, []byte("x"))
	_, err := FetchMushroom(ctx, t.TempDir(), url, url)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
