package preflight

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// whiteoutPrefix marks a file a layer deletes from the layers below; opaqueWhiteout, a directory
// whose lower contents it deletes (the OCI image spec's whiteouts).
const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
)

// walkFlattened calls visit for every file of the image's flattened filesystem (the newest
// layer's version of each path, whiteouts applied), reading each layer once, top layer first.
// A layer that cannot be opened or read is an error, never read as empty: a report on the
// files that happened to be there would be wrong.
func walkFlattened(ctx context.Context, layers []v1.Layer, visit func(h *tar.Header, r io.Reader) error) error {
	// seen: paths an upper layer has; hidden: paths an upper layer deleted, or directories it
	// made opaque, with everything lower under them
	seen := map[string]bool{}
	hidden := map[string]bool{}
	for i := len(layers) - 1; i >= 0; i-- {
		l := layers[i]
		// a layer's whiteouts delete from the layers below it, not from itself (a directory
		// replaced is its whiteout and its new contents, in one layer)
		var deleted, opaque []string
		if err := walkLayer(ctx, l, func(h *tar.Header, r io.Reader) error {
			name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
			dir, base := path.Split(name)
			dir = strings.TrimSuffix(dir, "/")
			if base == opaqueWhiteout {
				opaque = append(opaque, dir)
				return nil
			}
			if gone, ok := strings.CutPrefix(base, whiteoutPrefix); ok {
				deleted = append(deleted, path.Join(dir, gone))
				return nil
			}
			if seen[name] || hidden[name] || under(hidden, name) {
				return nil
			}
			seen[name] = true
			return visit(h, r)
		}); err != nil {
			d, _ := l.Digest()
			return fmt.Errorf("layer %d (%s): %w", i, d, err)
		}
		for _, d := range deleted {
			hidden[d] = true
		}
		for _, d := range opaque {
			hidden[d] = true
		}
	}
	return nil
}

// walkLayer reads one layer's tar.
func walkLayer(ctx context.Context, l v1.Layer, visit func(h *tar.Header, r io.Reader) error) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	cr := &countingReader{r: rc}
	tr := tar.NewReader(cr)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := visit(h, tr); err != nil {
			return err
		}
	}
	if cr.n == 0 {
		// a tar ends with two zero blocks at least: no bytes at all is a blob that was not there
		return fmt.Errorf("its blob cannot be read: it holds nothing")
	}
	return nil
}

// under says whether name lies inside one of dirs.
func under(dirs map[string]bool, name string) bool {
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if dirs[d] {
			return true
		}
	}
	return false
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
