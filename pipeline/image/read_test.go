package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/pipeline"
)

// TestImageRecordsItsPlan checks that an assembled image carries its whole plan and that it
// reads back, unchanged, from an OCI archive, an OCI layout and a registry.
func TestImageRecordsItsPlan(t *testing.T) {
	img, p, _ := assemble(t)
	archive := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteOCI(archive, img, "llama-server:cpu-v3"); err != nil {
		t.Fatal(err)
	}
	layoutDir := t.TempDir() + "/"
	if err := WriteOCI(layoutDir, img, ""); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/llbuild/llama-server:cpu-v3"
	if err := Push(context.Background(), img, []string{ref}); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"oci-archive:" + archive, "oci-layout:" + layoutDir, ref} {
		cf, err := ReadConfig(context.Background(), spec)
		if err != nil {
			t.Errorf("ReadConfig(%s) = %v", spec, err)
			continue
		}
		b, err := RecordedPlan(cf)
		if err != nil {
			t.Errorf("RecordedPlan(%s) = %v", spec, err)
			continue
		}
		var got pipeline.Plan
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.JSON(), p.JSON()) {
			t.Errorf("%s: recorded plan\n%s\nwant\n%s", spec, got.JSON(), p.JSON())
		}
	}
}

// TestImageWithOnlyThePlanHash stands for an image an earlier llbuild built: it says what it
// has (the plan hash) and what to do.
func TestImageWithOnlyThePlanHash(t *testing.T) {
	img, p, _ := assemble(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	delete(cf.Config.Labels, LabelPlan)
	old, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "old.tar")
	if err := WriteOCI(archive, old, ""); err != nil {
		t.Fatal(err)
	}
	cf, err = ReadConfig(context.Background(), "oci-archive:"+archive)
	if err != nil {
		t.Fatal(err)
	}
	_, err = RecordedPlan(cf)
	for _, want := range []string{"only its plan's hash " + p.Hash, "llbuild test built it", "provenance.json", "rebuild"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("RecordedPlan(an image without %s) = %v, want an error containing %q", LabelPlan, err, want)
		}
	}
	cf.Config.Labels = nil
	if _, err := RecordedPlan(cf); err == nil || !strings.Contains(err.Error(), "not an image llbuild built") {
		t.Errorf("RecordedPlan(no labels) = %v, want 'not an image llbuild built'", err)
	}
}

// TestAMissingImageIsTheCallersMistake: an image named by a file or directory that is not there,
// in every form Open and ReadConfig take, is an error marked as the caller's (inputerr: the CLI's
// exit 2), and still an fs.ErrNotExist; a registry that cannot be reached is not.
func TestAMissingImageIsTheCallersMistake(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nonexistent")
	for _, spec := range []string{
		"oci-archive:" + missing,
		"oci-layout:" + missing,
		"docker-archive:" + missing,
		missing + ".tar",
		"./nonexistent.tar",
	} {
		t.Run(spec, func(t *testing.T) {
			_, cleanup, err := Open(context.Background(), spec)
			cleanup()
			if err == nil || !inputerr.Is(err) {
				t.Errorf("Open() = %v, want an error marked as the caller's", err)
			}
			if !strings.HasPrefix(spec, "docker-archive:") && !strings.HasSuffix(spec, ".tar") {
				if _, err := ReadConfig(context.Background(), spec); err == nil || !inputerr.Is(err) || !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("ReadConfig() = %v, want a missing file marked as the caller's", err)
				}
			}
		})
	}
	// an empty file (or any tar without index.json) is named as what it is not, not by the
	// temporary directory it was unpacked into
	empty := filepath.Join(t.TempDir(), "empty.tar")
	os.WriteFile(empty, nil, 0o644)
	if _, cleanup, err := Open(context.Background(), "oci-archive:"+empty); !inputerr.Is(err) || !strings.Contains(err.Error(), empty+" is not an OCI archive") || strings.Contains(err.Error(), "llbuild-image-") {
		t.Errorf("Open(an empty oci-archive) = %v, want an inputerr.Error naming the file", err)
	} else {
		cleanup()
	}
	// nothing listens there: the registry's trouble, not the caller's
	_, cleanup, err := Open(context.Background(), "127.0.0.1:1/repo:tag")
	cleanup()
	if err == nil || inputerr.Is(err) {
		t.Errorf("Open() of an unreachable registry = %v, want an error not marked as the caller's", err)
	}
}
