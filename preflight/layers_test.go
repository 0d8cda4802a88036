package preflight

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestWalkFlattenedAppliesWhiteouts: the newest version of a path wins; a whiteout deletes a
// file below it, an opaque directory its lower contents, and a directory replaced in one layer
// (its whiteout and its new contents together) keeps the new contents.
func TestWalkFlattenedAppliesWhiteouts(t *testing.T) {
	l1 := tarLayer(t, map[string][]byte{"a/1": []byte("old"), "b/2": []byte("old"), "c/3": []byte("old"), "d/4": []byte("old"), "e/5": []byte("old")})
	l2 := tarLayer(t, map[string][]byte{
		"a/.wh.1":        nil,
		"b/.wh..wh..opq": nil,
		"b/6":            []byte("new"),
		".wh.c":          nil,
		"c/7":            []byte("new"),
		"d/4":            []byte("new"),
	})
	got := map[string]string{}
	err := walkFlattened(context.Background(), []v1.Layer{l1, l2}, func(h *tar.Header, r io.Reader) error {
		b, err := io.ReadAll(r)
		got[h.Name] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"b/6": "new", "c/7": "new", "d/4": "new", "e/5": "old"}
	var gs, ws []string
	for k, v := range got {
		gs = append(gs, k+"="+v)
	}
	for k, v := range want {
		ws = append(ws, k+"="+v)
	}
	sort.Strings(gs)
	sort.Strings(ws)
	if strings.Join(gs, " ") != strings.Join(ws, " ") {
		t.Errorf("flattened = %v, want %v", gs, ws)
	}
}

// TestReadImageReadsEachLayerOnceAndSaysSo: ReadImage of an image in a registry fetches each
// layer's blob once (it used to open every blob to probe it, then read them all again) and logs
// that it is reading the layers, and how many MiB, before it does.
func TestReadImageReadsEachLayerOnceAndSaysSo(t *testing.T) {
	img := testImage(t)
	var mu sync.Mutex
	gets := map[string]int{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			mu.Lock()
			gets[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]]++
			mu.Unlock()
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/llbuild/preflight-once:1"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clear(gets)
	mu.Unlock()

	var logs bytes.Buffer
	in, err := ReadImage(context.Background(), ImageSource{Ref: ref, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Binaries) != 2 {
		t.Errorf("ReadImage() = %d binaries, want 2", len(in.Binaries))
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		d, _ := l.Digest()
		if n := gets[d.String()]; n != 1 {
			t.Errorf("layer %d (%s) fetched %d times, want once", i, d, n)
		}
	}
	if s := logs.String(); !strings.Contains(s, "reading the image's layers") || !strings.Contains(s, "MiB=") || !strings.Contains(s, "layers=2") {
		t.Errorf("log = %q, want a line saying it reads the 2 layers, and their MiB", s)
	}
}

// TestReadImageOfALayoutWithoutALayerFails: a layer whose blob is gone is an error naming the
// layer, not an image read in part.
func TestReadImageOfALayoutWithoutALayerFails(t *testing.T) {
	img := testImage(t)
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	d, _ := layers[0].Digest()
	if err := os.Remove(filepath.Join(dir, "blobs", d.Algorithm, d.Hex)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadImage(context.Background(), ImageSource{Archive: dir}); err == nil || !strings.Contains(err.Error(), "layer 0") {
		t.Errorf("ReadImage() of a layout without its first layer = %v, want an error naming layer 0", err)
	}
}
