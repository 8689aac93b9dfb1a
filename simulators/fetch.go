package simulators

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrNoMushroomData is wrapped by the errors of ResolveMushroom and
// FetchMushroom when no valid copy of the mushroom file was found.
var ErrNoMushroomData = errors.New("no valid " + MushroomFile)

// MushroomSearchPath lists, in order, where ResolveMushroom looks when it
// is given no explicit path and $REFINERY_DATA is unset. Relative
// entries are relative to the working directory: ./data/ (where
// `refinery data` puts the file) and ../shared/data/mushroom/ (the
// shared copy beside the project).
var MushroomSearchPath = []string{"data", sharedMushroomDir}

// sharedMushroomDir is the shared copy's directory, relative to the
// project root.
var sharedMushroomDir = filepath.Join("..", "shared", "data", "mushroom")

// ResolveMushroom returns the path of a mushroom file whose sha256 is
// MushroomSHA256. It looks, in order, at
//
//  1. explicit (the --data flag), if not "";
//  2. else $REFINERY_DATA, if set;
//  3. else each directory of MushroomSearchPath, taking the first that
//     holds a valid file.
//
// An explicit path or $REFINERY_DATA is either the file itself or a
// directory holding MushroomFile; when given, it is the only place
// looked at, so that a bad path is reported rather than silently
// replaced. The error is one line naming every path tried, what was
// wrong with it, and the expected checksum.
func ResolveMushroom(explicit string) (string, error) {
	return resolveMushroom(explicit, os.Getenv("REFINERY_DATA"), MushroomSearchPath)
}

func resolveMushroom(explicit, env string, search []string) (string, error) {
	var candidates []string
	switch {
	case explicit != "":
		candidates = []string{mushroomPathIn(explicit)}
	case env != "":
		candidates = []string{mushroomPathIn(env)}
	default:
		for _, dir := range search {
			candidates = append(candidates, filepath.Join(dir, MushroomFile))
		}
	}
	var tried []string
	for _, p := range candidates {
		err := checkMushroomFile(p)
		if err == nil {
			return p, nil
		}
		tried = append(tried, p+": "+err.Error())
	}
	return "", fmt.Errorf("mushroom data: %w (sha256 %s): tried %s; run 'refinery data' or pass --data PATH",
		ErrNoMushroomData, MushroomSHA256, strings.Join(tried, "; "))
}

// mushroomPathIn returns p itself unless p is a directory, in which case
// it returns p/MushroomFile.
func mushroomPathIn(p string) string {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return filepath.Join(p, MushroomFile)
	}
	return p
}

// checkMushroomFile reads the file at p and checks its sha256. Its error
// does not repeat the path.
func checkMushroomFile(p string) error {
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("not found")
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	return checkMushroom(b)
}

// Fetched says where FetchMushroom put the mushroom file and where it
// came from.
type Fetched struct {
	// Path is dir/MushroomFile.
	Path string
	// From is the source it was copied or downloaded from, "" if a
	// valid file was already there.
	From string
}

// DefaultMushroomSources are FetchMushroom's sources when it is given
// none: the shared copy beside the project, then the canonical zip.
var DefaultMushroomSources = []string{sharedMushroomDir, MushroomURL}

// maxDownload bounds what FetchMushroom reads from a URL or a zip entry;
// the zip is about 35 kB and the data file 374 kB.
const maxDownload = 16 << 20

// FetchMushroom makes sure dir/MushroomFile exists with the right sha256.
// If it already does, nothing is done. Otherwise the sources are tried
// in order (DefaultMushroomSources if none are given) until one yields a
// valid file:
//
//   - an http:// or https:// URL is downloaded; if the body is a zip
//     archive, its MushroomFile entry is extracted, otherwise the body
//     is taken as the file itself;
//   - anything else is a local path: the file itself or a directory
//     holding MushroomFile.
//
// The sha256 is checked before anything is written, and the file is
// written atomically (a temporary file in dir, then a rename), so dir
// never holds a partial or corrupt copy. dir is created if needed. The
// error names every source tried and why it failed, on one line.
func FetchMushroom(ctx context.Context, dir string, sources ...string) (Fetched, error) {
	dst := filepath.Join(dir, MushroomFile)
	if checkMushroomFile(dst) == nil {
		return Fetched{Path: dst}, nil
	}
	if len(sources) == 0 {
		sources = DefaultMushroomSources
	}
	var tried []string
	for _, src := range sources {
		b, err := readMushroomSource(ctx, src)
		if err == nil {
			err = checkMushroom(b)
		}
		if err != nil {
			if ctx.Err() != nil {
				return Fetched{}, fmt.Errorf("fetch mushroom data: %w", ctx.Err())
			}
			tried = append(tried, src+": "+err.Error())
			continue
		}
		if err := writeAtomic(dst, b); err != nil {
			return Fetched{}, fmt.Errorf("fetch mushroom data: %w", err)
		}
		return Fetched{Path: dst, From: src}, nil
	}
	return Fetched{}, fmt.Errorf("fetch mushroom data: %w (sha256 %s): tried %s",
		ErrNoMushroomData, MushroomSHA256, strings.Join(tried, "; "))
}

// readMushroomSource returns the bytes of the mushroom file from one
// source, unchecked.
func readMushroomSource(ctx context.Context, src string) ([]byte, error) {
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		p := mushroomPathIn(src)
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s not found", p)
		}
		return b, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	body, err := readLimited(resp.Body)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(body, []byte("PK\x03\x04")) {
		return body, nil
	}
	return unzipMushroom(body)
}

// unzipMushroom returns the MushroomFile entry of the zip archive b.
func unzipMushroom(b []byte) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("zip: %w", err)
	}
	for _, f := range zr.File {
		if path.Base(f.Name) != MushroomFile {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("zip entry %s: %w", f.Name, err)
		}
		defer rc.Close()
		data, err := readLimited(rc)
		if err != nil {
			return nil, fmt.Errorf("zip entry %s: %w", f.Name, err)
		}
		return data, nil
	}
	return nil, fmt.Errorf("zip holds no %s", MushroomFile)
}

func readLimited(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDownload+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDownload {
		return nil, fmt.Errorf("larger than %d bytes", maxDownload)
	}
	return b, nil
}

// writeAtomic writes b to dst through a temporary file in the same
// directory and a rename.
func writeAtomic(dst string, b []byte) (err error) {
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}
