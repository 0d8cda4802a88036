package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/internal/progress/progresstest"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/patches"
)

// bundleInputs are the files a test bundles: tiny models from the gguf writer and an
// artifact directory written by the artifacts package from real ELF files of this system
// (/bin/true stands in for llama-server where it is not run; libz is a real library).
type bundleInputs struct {
	Dir, Artifacts, Model, Draft, OtherVocab, MTPOtherArch, NotGGUF, Truncated string
}

const testPlanHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func writeTestArtifacts(t testing.TB, out, target string, files []artifacts.InputFile) string {
	t.Helper()
	return writeTestArtifactsWithPatches(t, out, target, files, []artifacts.Patch{{Name: "0001-test.patch", SHA256: strings.Repeat("e", 64)}})
}

func writeTestArtifactsWithPatches(t testing.TB, out, target string, files []artifacts.InputFile, series []artifacts.Patch) string {
	t.Helper()
	dir, err := artifacts.Write(out, artifacts.Input{
		Target:   target,
		PlanHash: testPlanHash,
		Files:    files,
		Provenance: artifacts.Provenance{
			Materials: artifacts.Materials{
				Source:  artifacts.Source{URL: "https://github.com/ggml-org/llama.cpp", Commit: "1425386fd996511e1f3295e7366c38289a92a271"},
				Patches: series,
				Images: []artifacts.Image{
					{Role: "devel", Ref: "ubuntu:24.04@sha256:" + strings.Repeat("a", 64), Digest: "sha256:" + strings.Repeat("a", 64)},
					{Role: "runtime", Ref: "ubuntu:24.04@sha256:" + strings.Repeat("b", 64), Digest: "sha256:" + strings.Repeat("b", 64)},
				},
			},
			// The plan as far as a bundle checks it: its target and hash.
			Plan:    json.RawMessage(`{"schemaVersion": 2, "target": "` + target + `", "hash": "` + testPlanHash + `"}`),
			Builder: artifacts.Builder{Name: "llbuild", Version: "test", Executor: "host"},
		},
	})
	if err != nil {
		t.Fatalf("writing artifacts: %v", err)
	}
	return dir
}

func systemLib(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib64/libz.so.1"} {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
	}
	llamatest.Unavailable(t, "no libz.so.1 on this system to stand in for a server library")
	return ""
}

func newBundleInputs(t testing.TB) bundleInputs {
	t.Helper()
	dir := t.TempDir()
	in := bundleInputs{Dir: dir}
	lib := systemLib(t)
	libLink := filepath.Join(dir, "libz.so.1")
	if err := os.Symlink(filepath.Base(lib), libLink); err != nil {
		t.Fatal(err)
	}
	// the patch the build applied, kept in the artifacts as a build keeps it
	patch := filepath.Join(dir, "0001-test.patch")
	patchData := []byte("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	if err := os.WriteFile(patch, patchData, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(patchData)
	in.Artifacts = writeTestArtifactsWithPatches(t, filepath.Join(dir, "artifacts"), "cpu-v3", []artifacts.InputFile{
		{Path: "bin/llama-server", From: "/bin/true", Kind: artifacts.KindExecutable},
		{Path: "bin/" + filepath.Base(lib), From: lib, Kind: artifacts.KindLibrary},
		{Path: "bin/libz.so.1", From: libLink, Kind: artifacts.KindLibrary},
		{Path: "patches/0001-test.patch", From: patch, Kind: artifacts.KindPatch},
	}, []artifacts.Patch{{Name: "0001-test.patch", SHA256: hex.EncodeToString(sum[:])}})
	write := func(name string, o gguf.TinyOptions) string {
		p := filepath.Join(dir, name)
		if err := gguf.WriteTinyLlamaFile(p, o); err != nil {
			t.Fatal(err)
		}
		return p
	}
	in.Model = write("tiny.gguf", gguf.DefaultTiny())
	in.Draft = write("tiny-draft.gguf", gguf.DraftTiny())
	in.OtherVocab = write("other-vocab.gguf", gguf.OtherVocabTiny())
	// An MTP draft for another architecture: the draft's vocabulary with a
	// gemma4-assistant architecture.
	b, err := gguf.TinyLlama(gguf.DraftTiny())
	if err != nil {
		t.Fatal(err)
	}
	b.Set("general.architecture", gguf.String("gemma4-assistant"))
	in.MTPOtherArch = filepath.Join(dir, "gemma4-assistant.gguf")
	f, err := os.Create(in.MTPOtherArch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	in.NotGGUF = filepath.Join(dir, "not.gguf")
	os.WriteFile(in.NotGGUF, []byte("this is not a model\n"), 0o644)
	whole, _ := os.ReadFile(in.Model)
	in.Truncated = filepath.Join(dir, "truncated.gguf")
	os.WriteFile(in.Truncated, whole[:len(whole)/2], 0o644)
	return in
}

func (in bundleInputs) args(extra ...string) []string {
	return append([]string{"bundle", "--target", "cpu-v3", "--artifacts", in.Artifacts, "--model", in.Model, "--quiet"}, extra...)
}

// entries lists what is under dir, for "nothing was left behind" checks.
func entries(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

func TestBundleIsDeterministicAndVerifies(t *testing.T) {
	in := newBundleInputs(t)
	out := t.TempDir()
	var manifests [][]byte
	for i, name := range []string{"a", "b"} {
		dir := filepath.Join(out, name)
		args := in.args("--draft", in.Draft, "-o", dir, "--archive", filepath.Join(out, name+".tar.zst"),
			"--ctx-size", "1024", "--batch-size", "1024", "--ubatch-size", "1024", "--threads", "8", "--poll", "100",
			"--spec-draft-n-max", "7", "--spec-draft-n-min", "2", "--spec-draft-p-min", "0.12", "--spec-draft-threads", "32",
			"--env", "GGML_SYCL_ENABLE_VMM=0")
		if i == 1 {
			args = append(args, "--link")
		}
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("bundle exit %d: %s", code, stderr)
		}
		// The test artifacts name a made-up plan: bundling warns and goes on.
		if !strings.Contains(stderr, "built from another plan") || !strings.Contains(stderr, "built=0123456789ab") {
			t.Errorf("stderr lacks the stale-plan warning:\n%s", stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, manifest.FileName))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if want := bytesHex(sum[:]) + "  " + dir + "\n" + bytesHex(sum[:]) + "  " + filepath.Join(out, name+".tar.zst") + "\n"; stdout != want {
			t.Errorf("stdout %q, want the manifest's sha256 and each path written:\n%s", stdout, want)
		}
		manifests = append(manifests, b)
		if i == 0 {
			// --json: the same in one object
			jd := filepath.Join(t.TempDir(), "json")
			code, js, stderr := runCLI(t, append(in.args("--draft", in.Draft, "-o", jd, "--ctx-size", "1024", "--batch-size", "1024", "--ubatch-size", "1024", "--threads", "8", "--poll", "100",
				"--spec-draft-n-max", "7", "--spec-draft-n-min", "2", "--spec-draft-p-min", "0.12", "--spec-draft-threads", "32", "--env", "GGML_SYCL_ENABLE_VMM=0"), "--json")...)
			var got struct {
				ManifestSHA256, Dir, Target string
				Files                       int
			}
			if err := json.Unmarshal([]byte(js), &got); code != 0 || err != nil || got.ManifestSHA256 != bytesHex(sum[:]) || got.Dir != jd || got.Files == 0 || got.Target == "" {
				t.Errorf("bundle --json: exit %d, %v, %+v; want the manifest's sha256 %s, the directory, its files and target\n%s", code, err, got, bytesHex(sum[:]), stderr)
			}
		}
		if code, stdout, stderr := runCLI(t, "verify", dir); code != 0 {
			t.Errorf("verify %s: exit %d\n%s%s", dir, code, stdout, stderr)
		}
		if code, stdout, stderr := runCLI(t, "verify", filepath.Join(out, name+".tar.zst")); code != 0 {
			t.Errorf("verify archive: exit %d\n%s%s", code, stdout, stderr)
		}
	}
	if !bytes.Equal(manifests[0], manifests[1]) {
		t.Errorf("two bundles of the same inputs have different manifests:\n%s\n%s", manifests[0], manifests[1])
	}
	// --link hard-linked the model (same filesystem) instead of copying it.
	src, _ := os.Stat(in.Model)
	copied, _ := os.Stat(filepath.Join(out, "a", "models", "tiny.gguf"))
	linked, _ := os.Stat(filepath.Join(out, "b", "models", "tiny.gguf"))
	if os.SameFile(src, copied) || !os.SameFile(src, linked) {
		t.Errorf("model: copied bundle shares the source's inode %v, linked bundle %v; want false, true", os.SameFile(src, copied), os.SameFile(src, linked))
	}
	a, _ := os.ReadFile(filepath.Join(out, "a.tar.zst"))
	b, _ := os.ReadFile(filepath.Join(out, "b.tar.zst"))
	if !bytes.Equal(a, b) {
		t.Error("two archives of the same inputs differ")
	}

	m, err := manifest.Load(filepath.Join(out, "a"))
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{"--model", "models/tiny.gguf", "--model-draft", "models/tiny-draft.gguf", "--spec-type", "draft-simple",
		"--spec-draft-n-max", "7", "--spec-draft-n-min", "2", "--spec-draft-p-min", "0.12", "--spec-draft-threads", "32",
		"--ctx-size", "1024", "--batch-size", "1024", "--ubatch-size", "1024", "--threads", "8", "--poll", "100",
		"--cache-ram", "0", "--ctx-checkpoints", "0"}
	if got := strings.Join(m.Server.Args, " "); got != strings.Join(wantArgs, " ") {
		t.Errorf("server args = %s\nwant %s", got, strings.Join(wantArgs, " "))
	}
	if m.Server.Env["GGML_SYCL_ENABLE_VMM"] != "0" || m.Target.Name != "cpu-v3" || m.Build.PlanHash != testPlanHash ||
		m.Build.Source.Commit != "1425386fd996511e1f3295e7366c38289a92a271" || len(m.Build.Patches) != 1 || len(m.Build.Images) != 2 {
		t.Errorf("manifest lacks env, target or provenance: %+v %+v", m.Server.Env, m.Build)
	}
	if m.Models.Draft == nil || m.Models.Draft.GGUF.VocabSize != m.Models.Model.GGUF.VocabSize || m.Models.Model.GGUF.Architecture != "llama" {
		t.Errorf("models = %+v", m.Models)
	}
	if len(m.Target.Host.CPU.Features) == 0 {
		t.Error("target host features missing")
	}
	var kinds []string
	for _, f := range m.Files {
		kinds = append(kinds, f.Path+":"+f.Kind)
	}
	lib := filepath.Base(systemLib(t))
	want := []string{"bin/llama-server:executable", "lib/libz.so.1:library", "lib/" + lib + ":library", "models/tiny-draft.gguf:draft", "models/tiny.gguf:model", "patches/0001-test.patch:patch"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("files = %v, want %v", kinds, want)
	}
	if fi, err := os.Stat(filepath.Join(out, "a", "bin", "llama-server")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("bin/llama-server is not executable: %v %v", fi.Mode(), err)
	}
	// Only the bundles and archives are left: no temporary directories.
	if got := strings.Join(entries(t, out), " "); got != "a a.tar.zst b b.tar.zst" {
		t.Errorf("output directory holds %s", got)
	}
}

func bytesHex(b []byte) string {
	const digits = "0123456789abcdef"
	s := make([]byte, 0, 2*len(b))
	for _, c := range b {
		s = append(s, digits[c>>4], digits[c&15])
	}
	return string(s)
}

func TestArchiveIsDeterministicWithFixedModesOwnersAndTimes(t *testing.T) {
	in := newBundleInputs(t)
	out := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1784810751")
	for _, name := range []string{"x.tar.gz", "y.tar.gz"} {
		if code, _, stderr := runCLI(t, in.args("--archive", filepath.Join(out, name))...); code != 0 {
			t.Fatalf("bundle exit %d: %s", code, stderr)
		}
	}
	x, _ := os.ReadFile(filepath.Join(out, "x.tar.gz"))
	y, _ := os.ReadFile(filepath.Join(out, "y.tar.gz"))
	if !bytes.Equal(x, y) {
		t.Fatal("two .tar.gz archives of the same inputs differ")
	}
	if got := strings.Join(entries(t, out), " "); got != "x.tar.gz y.tar.gz" {
		t.Errorf("an archive-only bundle left %s", got)
	}
	zr, err := gzip.NewReader(bytes.NewReader(x))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header records name %q time %v", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || h.ModTime.Unix() != 1784810751 {
			t.Errorf("%s: uid %d gid %d %q %q mtime %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		wantMode := int64(0o644)
		switch {
		case h.Typeflag == tar.TypeDir || h.Name == "bin/llama-server":
			wantMode = 0o755
		case h.Typeflag == tar.TypeSymlink:
			wantMode = 0o777
		}
		if h.Mode != wantMode {
			t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, wantMode)
		}
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("entries not sorted: %s before %s", names[i-1], names[i])
		}
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if code, _, stderr := runCLI(t, in.args("--archive", filepath.Join(out, "z.tar.gz"))...); code != 2 || !strings.Contains(stderr, "SOURCE_DATE_EPOCH") {
		t.Errorf("malformed SOURCE_DATE_EPOCH: exit %d %s, want 2 naming it", code, stderr)
	}
}

func TestBundleRefusesBadInputBeforeWriting(t *testing.T) {
	in := newBundleInputs(t)
	wrongTarget := writeTestArtifacts(t, filepath.Join(in.Dir, "other"), "h200", []artifacts.InputFile{
		{Path: "bin/llama-server", From: "/bin/true", Kind: artifacts.KindExecutable},
	})
	noServer := writeTestArtifacts(t, filepath.Join(in.Dir, "noserver"), "cpu-v3", []artifacts.InputFile{
		{Path: "bin/llama-cli", From: "/bin/true", Kind: artifacts.KindExecutable},
	})
	tampered := writeTestArtifacts(t, filepath.Join(in.Dir, "tampered"), "cpu-v3", []artifacts.InputFile{
		{Path: "bin/llama-server", From: "/bin/true", Kind: artifacts.KindExecutable},
	})
	os.WriteFile(filepath.Join(tampered, "bin/llama-server"), []byte("#!/bin/sh\n"), 0o755)
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"non-GGUF model", []string{"bundle", "--target", "cpu-v3", "--artifacts", in.Artifacts, "--model", in.NotGGUF}, 1, []string{in.NotGGUF, "not a GGUF file"}},
		{"truncated model", []string{"bundle", "--target", "cpu-v3", "--artifacts", in.Artifacts, "--model", in.Truncated}, 1, []string{in.Truncated, "truncated"}},
		{"missing model", []string{"bundle", "--target", "cpu-v3", "--artifacts", in.Artifacts, "--model", filepath.Join(in.Dir, "nope.gguf")}, exitUsage, []string{"nope.gguf", "no such file"}},
		{"draft of another vocabulary", in.args("--draft", in.OtherVocab), 1, []string{in.OtherVocab, "does not fit", "vocabulary of"}},
		{"MTP draft of another architecture", in.args("--draft", in.MTPOtherArch), 1, []string{in.MTPOtherArch, "an MTP draft for gemma4", "the model is llama"}},
		{"artifacts of another target", []string{"bundle", "--target", "cpu-v3", "--artifacts", wrongTarget, "--model", in.Model}, 1, []string{wrongTarget, "built for target h200, not cpu-v3"}},
		{"artifacts without llama-server", []string{"bundle", "--target", "cpu-v3", "--artifacts", noServer, "--model", in.Model}, 1, []string{"no llama-server executable"}},
		{"tampered artifacts", []string{"bundle", "--target", "cpu-v3", "--artifacts", tampered, "--model", in.Model}, 1, []string{"bin/llama-server has size"}},
		{"server arg outside the bundle", in.args("--server-arg", "--lora", "--server-arg", "/tmp/x.gguf"), 1, []string{"--lora", "absolute"}},
		{"draft knob without a draft", in.args("--spec-draft-n-max", "7"), 2, []string{"--spec-draft-n-max needs --draft"}},
		{"negative context", in.args("--ctx-size", "-5"), 2, []string{"--ctx-size -5: llama-server takes 0 to 2147483647"}},
		{"context past 32 bits", in.args("--ctx-size", "99999999999999"), 2, []string{"--ctx-size 99999999999999"}},
		{"layers below all", in.args("--n-gpu-layers", "-3"), 2, []string{"--n-gpu-layers -3: llama-server takes -2 to"}},
		{"empty batches", in.args("--batch-size", "0"), 2, []string{"--batch-size 0: llama-server takes 1 to"}},
		{"no slots", in.args("--parallel", "0"), 2, []string{"--parallel 0: llama-server takes -1 (its own choice) or 1 to"}},
		// recorded in every bundle: past 32 bits llama-server stopped at start ("stoi") after
		// verify and preflight said ok
		{"checkpoints past 32 bits", in.args("--ctx-checkpoints", "99999999999"), 2, []string{"--ctx-checkpoints 99999999999: llama-server takes 0 to 2147483647"}},
		{"negative checkpoints", in.args("--ctx-checkpoints", "-1"), 2, []string{"--ctx-checkpoints -1"}},
		{"cache past 32 bits", in.args("--cache-ram", "99999999999"), 2, []string{"--cache-ram 99999999999: llama-server takes -1 (no limit) or 0 to"}},
		{"cache below no limit", in.args("--cache-ram", "-5"), 2, []string{"--cache-ram -5"}},
		{"no target", []string{"bundle", "--artifacts", in.Artifacts, "--model", in.Model}, 2, []string{"no target given"}},
		{"bad archive name", in.args("--archive", filepath.Join(in.Dir, "x.zip")), 2, []string{".tar.zst or .tar.gz"}},
		{"archive named as the directory", in.args("--archive", "SAME"), 2, []string{"-o and --archive both name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			args := append(append([]string(nil), tt.args...), "-o", filepath.Join(out, "bundle"))
			for i, a := range args {
				if a == "SAME" { // -o and --archive alike
					args[i], args[len(args)-1] = filepath.Join(out, "b.tar.zst"), filepath.Join(out, "b.tar.zst")
				}
			}
			code, _, stderr := runCLI(t, args...)
			t.Logf("exit %d: %s", code, stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if e := entries(t, out); len(e) != 0 {
				t.Errorf("a refused bundle left %v behind", e)
			}
		})
	}
}

func TestBundleMTPDraftRunsAsDraftMTP(t *testing.T) {
	in := newBundleInputs(t)
	b, err := gguf.TinyLlama(gguf.DraftTiny())
	if err != nil {
		t.Fatal(err)
	}
	b.Set("general.architecture", gguf.String("llama-assistant"))
	p := filepath.Join(in.Dir, "llama-assistant.gguf")
	f, _ := os.Create(p)
	b.WriteTo(f)
	f.Close()
	out := filepath.Join(t.TempDir(), "b")
	if code, _, stderr := runCLI(t, in.args("--draft", p, "-o", out)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m, err := manifest.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Server.Args, " "); !strings.Contains(got, "--model-draft models/llama-assistant.gguf --spec-type draft-mtp") {
		t.Errorf("args = %s, want the MTP draft run as draft-mtp", got)
	}
}

func TestBundleOutputIsReplacedOnlyWithForce(t *testing.T) {
	in := newBundleInputs(t)
	parent := t.TempDir()
	out := filepath.Join(parent, "bundle")
	neighbour := filepath.Join(parent, "keep.txt")
	os.WriteFile(neighbour, []byte("keep"), 0o644)
	os.Mkdir(out, 0o755)
	os.WriteFile(filepath.Join(out, "old-file"), []byte("old"), 0o644)

	code, _, stderr := runCLI(t, in.args("-o", out)...)
	if code != 2 || !strings.Contains(stderr, "exists; use --force") {
		t.Errorf("existing output without --force: exit %d %s, want 2 and a hint", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "old-file")); err != nil {
		t.Errorf("refused bundle touched the existing output: %v", err)
	}
	if code, _, stderr := runCLI(t, in.args("-o", out, "--force")...); code != 0 {
		t.Fatalf("--force: exit %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "old-file")); err == nil {
		t.Error("--force kept a file of the old output")
	}
	if b, err := os.ReadFile(neighbour); err != nil || string(b) != "keep" {
		t.Errorf("--force touched a file beside the output: %q %v", b, err)
	}
	if got := strings.Join(entries(t, parent), " "); got != "bundle keep.txt" {
		t.Errorf("parent holds %s after --force", got)
	}
	if ps := manifest.Verify(out); len(ps) != 0 {
		t.Errorf("replaced bundle does not verify: %v", ps)
	}
	// An output that holds an input is never replaced (usage: exit 2), and said so before
	// --force is asked for, which would not help.
	for _, force := range [][]string{{"--force"}, nil} {
		code, _, stderr = runCLI(t, append(in.args("-o", in.Dir), force...)...)
		if code != 2 || !strings.Contains(stderr, "holds an input") {
			t.Errorf("%v over the inputs' directory: exit %d %s", force, code, stderr)
		}
	}
	// a file where the directory would go is named for what it is, and kept (exit 2)
	if code, _, stderr := runCLI(t, in.args("-o", neighbour, "--force")...); code != 2 || !strings.Contains(stderr, "exists and is a regular file; --force replaces only a directory") {
		t.Errorf("--force over a file: exit %d %s", code, stderr)
	}
	if b, _ := os.ReadFile(neighbour); string(b) != "keep" {
		t.Errorf("--force over a file changed it: %q", b)
	}
	// without --force too: the advice is not to add --force, which would not help
	if code, _, stderr := runCLI(t, in.args("-o", neighbour)...); code != 2 || !strings.Contains(stderr, "write elsewhere") || strings.Contains(stderr, "use --force") {
		t.Errorf("-o over a file without --force: exit %d %s", code, stderr)
	}
	if _, err := os.Stat(in.Model); err != nil {
		t.Errorf("input removed: %v", err)
	}
}

func TestBundleUnwritableDestinationLeavesNothing(t *testing.T) {
	in := newBundleInputs(t)
	parent := t.TempDir()
	t.Run("parent is a file", func(t *testing.T) {
		file := filepath.Join(parent, "file")
		os.WriteFile(file, nil, 0o644)
		code, _, stderr := runCLI(t, in.args("-o", filepath.Join(file, "bundle"))...)
		if code != 2 || !strings.Contains(stderr, "not a directory") {
			t.Errorf("exit %d %s, want 2 (the path named is no directory) and not a directory", code, stderr)
		}
	})
	t.Run("parent is missing", func(t *testing.T) {
		code, _, stderr := runCLI(t, in.args("-o", filepath.Join(parent, "none", "bundle"))...)
		if code != 2 || !strings.Contains(stderr, "parent directory") || !strings.Contains(stderr, "make it first") {
			t.Errorf("exit %d %s, want 2 and make the parent first", code, stderr)
		}
	})
	t.Run("read-only directory", func(t *testing.T) {
		ro := filepath.Join(parent, "ro")
		os.Mkdir(ro, 0o555)
		if os.Geteuid() == 0 {
			// root ignores mode bits: a read-only bind mount is the real thing.
			if err := exec.Command("mount", "--bind", ro, ro).Run(); err != nil {
				llamatest.Unavailable(t, fmt.Sprintf("running as root and cannot bind-mount to make %s read-only: %v", ro, err))
			}
			t.Cleanup(func() { exec.Command("umount", ro).Run() })
			if err := exec.Command("mount", "-o", "remount,bind,ro", ro).Run(); err != nil {
				llamatest.Unavailable(t, fmt.Sprintf("cannot remount %s read-only: %v", ro, err))
			}
		}
		code, _, stderr := runCLI(t, in.args("-o", filepath.Join(ro, "bundle"))...)
		if code != 1 || !strings.Contains(stderr, "read-only file system") && !strings.Contains(stderr, "permission denied") {
			t.Errorf("exit %d %s, want 1 and a read-only error", code, stderr)
		}
		if e := entries(t, ro); len(e) != 0 {
			t.Errorf("left %v in a read-only directory", e)
		}
	})
	t.Run("full filesystem", func(t *testing.T) {
		full := filepath.Join(parent, "full")
		os.Mkdir(full, 0o755)
		if os.Geteuid() != 0 {
			llamatest.Unavailable(t, "mounting a small tmpfs to fill needs root")
		}
		if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", full).Run(); err != nil {
			llamatest.Unavailable(t, fmt.Sprintf("cannot mount a small tmpfs: %v", err))
		}
		t.Cleanup(func() { exec.Command("umount", full).Run() })
		code, _, stderr := runCLI(t, in.args("-o", filepath.Join(full, "bundle"))...)
		if code != 1 || !strings.Contains(stderr, "no space left") {
			t.Errorf("exit %d %s, want 1 and no space left", code, stderr)
		}
		if e := entries(t, full); len(e) != 0 {
			t.Errorf("left %v on a full filesystem", e)
		}
	})
}

func TestBundleCancelledLeavesNothing(t *testing.T) {
	in := newBundleInputs(t)
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"llbuild"}, in.args("-o", filepath.Join(out, "b"))...), strings.NewReader(""), &stdout, &stderr)
	if code != 130 || !strings.HasSuffix(stderr.String(), "\nllbuild: interrupted\n") {
		t.Errorf("cancelled bundle: exit %d %s, want 130 saying it was interrupted", code, stderr.String())
	}
	if e := entries(t, out); len(e) != 0 {
		t.Errorf("a cancelled bundle left %v", e)
	}
}

func TestVerifyCommand(t *testing.T) {
	in := newBundleInputs(t)
	out := t.TempDir()
	dir := filepath.Join(out, "b")
	if code, _, stderr := runCLI(t, in.args("--draft", in.Draft, "-o", dir, "--archive", filepath.Join(out, "b.tar.gz"))...); code != 0 {
		t.Fatalf("bundle: %s", stderr)
	}
	code, stdout, _ := runCLI(t, "verify", "--json", dir)
	var res struct {
		OK       bool
		Problems []manifest.Problem
	}
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil || !res.OK || len(res.Problems) != 0 {
		t.Errorf("verify --json sound bundle: exit %d %v %s", code, err, stdout)
	}
	// Tamper with the draft: verify names it, one line per problem, exit 1.
	p := filepath.Join(dir, "models/tiny-draft.gguf")
	os.Chmod(p, 0o644)
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1
	os.WriteFile(p, b, 0o644)
	code, stdout, _ = runCLI(t, "verify", dir)
	if code != 1 || !strings.HasPrefix(stdout, "models/tiny-draft.gguf: sha256") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("verify tampered: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "verify", "--json", dir)
	if err := json.Unmarshal([]byte(stdout), &res); code != 1 || err != nil || res.OK || len(res.Problems) != 1 || res.Problems[0].Path != "models/tiny-draft.gguf" {
		t.Errorf("verify --json tampered: exit %d %v %s", code, err, stdout)
	}
	if code, stdout, stderr := runCLI(t, "verify", filepath.Join(out, "b.tar.gz")); code != 0 {
		t.Errorf("verify archive: exit %d %s %s", code, stdout, stderr)
	}
	// The README's form puts --json after the archive, where urfave/cli alone stops parsing flags.
	code, stdout, stderr := runCLI(t, "verify", filepath.Join(out, "b.tar.gz"), "--json")
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil || !res.OK {
		t.Errorf("verify ARCHIVE --json: exit %d %v\n%s%s", code, err, stdout, stderr)
	}
	if code, _, _ := runCLI(t, "verify", filepath.Join(out, "b.tar.gz"), "--bogus"); code != 2 {
		t.Errorf("verify ARCHIVE --bogus: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "verify", filepath.Join(out, "b.tar.gz"), dir); code != 2 {
		t.Errorf("verify with two paths: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "verify"); code != 2 {
		t.Errorf("verify without argument: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "verify", filepath.Join(out, "missing")); code != 2 {
		t.Errorf("verify of a missing path: exit %d, want 2", code)
	}
}

func TestVerifyArchiveRefusesTraversalWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "../../../../tmp/llbuild-evil", Typeflag: tar.TypeReg, Size: 4, Mode: 0o644, ModTime: time.Unix(0, 0)})
	tw.Write([]byte("evil"))
	tw.Close()
	zw.Close()
	archive := filepath.Join(dir, "evil.tar.gz")
	os.WriteFile(archive, buf.Bytes(), 0o644)
	code, stdout, _ := runCLI(t, "verify", archive)
	if code != 1 || !strings.Contains(stdout, "escapes the bundle") || !strings.Contains(stdout, "manifest.json: is missing") {
		t.Errorf("verify traversal archive: exit %d\n%s", code, stdout)
	}
	if _, err := os.Stat("/tmp/llbuild-evil"); err == nil {
		t.Error("verify wrote the traversal entry")
	}
	if got := strings.Join(entries(t, dir), " "); got != "evil.tar.gz" {
		t.Errorf("verify wrote %s", got)
	}
}

func TestVerifyExtractUnpacksOnlySoundArchives(t *testing.T) {
	in := newBundleInputs(t)
	out := t.TempDir()
	archive := filepath.Join(out, "b.tar.zst")
	if code, _, stderr := runCLI(t, in.args("--draft", in.Draft, "--archive", archive)...); code != 0 {
		t.Fatalf("bundle: %s", stderr)
	}
	dest := filepath.Join(out, "unpacked")
	if code, stdout, stderr := runCLI(t, "verify", "--extract", dest, archive); code != 0 {
		t.Fatalf("verify --extract: exit %d %s %s", code, stdout, stderr)
	}
	if ps := manifest.Verify(dest); len(ps) != 0 {
		t.Errorf("extracted bundle does not verify: %v", ps)
	}
	if fi, err := os.Stat(filepath.Join(dest, "bin/llama-server")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/llama-server extracted as %v, %v; want mode 0755", fi.Mode(), err)
	}
	if code, _, stderr := runCLI(t, "verify", "--extract", dest, archive); code != 2 || !strings.Contains(stderr, "use --force") {
		t.Errorf("extract over an existing directory: exit %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "verify", "--extract", dest, "--force", archive); code != 0 {
		t.Errorf("extract --force: exit %d %s", code, stderr)
	}

	// --force replaces a directory that is a bundle's, never what it cannot give back: the
	// directory holding the archive itself (or "." there), a file, the current directory.
	keep := filepath.Join(out, "notes.txt")
	os.WriteFile(keep, []byte("important"), 0o644)
	for _, c := range []struct{ dest, dir, want string }{
		{out, "", "holds the archive"},
		{".", out, "holds the archive"},
		{keep, "", "is not a directory"},
		{filepath.Dir(dest), dest, "holds the archive"},
		{dest, dest, "holds the current directory"},
		{filepath.Join(out, "no", "such", "dir"), "", "does not exist; make it first"},
	} {
		if c.dir != "" {
			t.Chdir(c.dir)
		}
		before := strings.Join(entries(t, out), " ")
		code, _, stderr := runCLI(t, "verify", "--extract", c.dest, "--force", archive)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("--extract %s --force (in %s): exit %d %s; want 2 and %q", c.dest, c.dir, code, stderr, c.want)
		}
		if after := strings.Join(entries(t, out), " "); after != before {
			t.Errorf("--extract %s --force (in %s) changed %s: %s -> %s", c.dest, c.dir, out, before, after)
		}
		if b, err := os.ReadFile(keep); err != nil || string(b) != "important" {
			t.Errorf("--extract %s --force lost %s: %q %v", c.dest, keep, b, err)
		}
	}

	// An archive with a traversal entry: refused, and nothing is written anywhere.
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "lib/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "lib/../../escaped", Typeflag: tar.TypeReg, Size: 4, Mode: 0o644})
	tw.Write([]byte("evil"))
	tw.Close()
	zw.Close()
	evil := filepath.Join(out, "evil.tar.gz")
	os.WriteFile(evil, buf.Bytes(), 0o644)
	before := strings.Join(entries(t, out), " ")
	code, stdout, _ := runCLI(t, "verify", "--extract", filepath.Join(out, "evil"), evil)
	if code != 1 || !strings.Contains(stdout, "escapes the bundle") {
		t.Errorf("verify --extract traversal: exit %d\n%s", code, stdout)
	}
	if after := strings.Join(entries(t, out), " "); after != before {
		t.Errorf("a refused archive changed %s: %s -> %s", out, before, after)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(out), "escaped")); err == nil {
		t.Error("the traversal entry was written")
	}
	if code, _, _ := runCLI(t, "verify", "--extract", filepath.Join(out, "x"), dest); code != 2 {
		t.Errorf("--extract of a directory: exit %d, want 2", code)
	}
}

// An archive that holds an entry twice (here a second manifest.json, which a reader could
// take instead of the first) is refused by verify and by --extract alike, each naming the
// archive and the entry, and nothing is written.
func TestVerifyRefusesDuplicateEntries(t *testing.T) {
	in := newBundleInputs(t)
	out := t.TempDir()
	sound := filepath.Join(out, "b.tar.gz")
	if code, _, stderr := runCLI(t, in.args("--archive", sound)...); code != 0 {
		t.Fatalf("bundle: %s", stderr)
	}
	f, err := os.Open(sound)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	var manifestEntry []byte
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if h.Name == manifest.FileName {
			manifestEntry = b
		}
		tw.WriteHeader(h)
		tw.Write(b)
	}
	tw.WriteHeader(&tar.Header{Name: manifest.FileName, Typeflag: tar.TypeReg, Size: int64(len(manifestEntry)), Mode: 0o644})
	tw.Write(manifestEntry)
	tw.Close()
	zw.Close()
	dup := filepath.Join(out, "dup.tar.gz")
	os.WriteFile(dup, buf.Bytes(), 0o644)

	code, stdout, stderr := runCLI(t, "verify", dup)
	if code != 1 || !strings.Contains(stdout, "manifest.json: appears twice in the archive") || !strings.Contains(stderr, dup) {
		t.Errorf("verify %s: exit %d\n%s%s\nwant exit 1 naming manifest.json twice and the archive", dup, code, stdout, stderr)
	}
	before := strings.Join(entries(t, out), " ")
	code, stdout, stderr = runCLI(t, "verify", "--extract", filepath.Join(out, "x"), dup)
	if code != 1 || !strings.Contains(stdout, "manifest.json: appears twice in the archive") || !strings.Contains(stderr, dup) || strings.Contains(stderr, "file exists") {
		t.Errorf("verify --extract %s: exit %d\n%s%s\nwant exit 1 naming the duplicate and the archive", dup, code, stdout, stderr)
	}
	if after := strings.Join(entries(t, out), " "); after != before {
		t.Errorf("a refused archive changed %s: %s -> %s", out, before, after)
	}
	// The unpacking itself, which reads the archive again (it may have changed since it was
	// verified), refuses the duplicate the same way.
	err = manifest.UnpackArchive(context.Background(), dup, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), dup) || !strings.Contains(err.Error(), "manifest.json: appears twice in the archive") {
		t.Errorf("UnpackArchive(%s) = %v, want the archive and the duplicate named", dup, err)
	}
}

func TestBundleArchiveInsideOutputIsRefused(t *testing.T) {
	in := newBundleInputs(t)
	out := filepath.Join(t.TempDir(), "b")
	code, _, stderr := runCLI(t, in.args("-o", out, "--archive", filepath.Join(out, "b.tar.gz"))...)
	if code != 2 || !strings.Contains(stderr, "inside the bundle directory") {
		t.Errorf("exit %d %s, want 2 and inside the bundle directory", code, stderr)
	}
}

func TestBundleWarnsOfADraftWithAnUnpatchedServer(t *testing.T) {
	in := newBundleInputs(t)
	files := []artifacts.InputFile{{Path: "bin/llama-server", From: "/bin/true", Kind: artifacts.KindExecutable}}
	patched := writeTestArtifactsWithPatches(t, filepath.Join(in.Dir, "patched"), "cpu-v3", files,
		[]artifacts.Patch{{Name: patches.NoDraftWithProbs, SHA256: strings.Repeat("f", 64)}})
	for _, tt := range []struct {
		name, artifacts string
		draft, warn     bool
	}{
		{"a draft with an unpatched server", in.Artifacts, true, true},
		{"a draft with a patched server", patched, true, false},
		{"no draft", in.Artifacts, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"bundle", "--target", "cpu-v3", "--artifacts", tt.artifacts, "--model", in.Model, "--quiet", "-o", filepath.Join(t.TempDir(), "b")}
			if tt.draft {
				args = append(args, "--draft", in.Draft)
			}
			code, _, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("bundle exit %d: %s", code, stderr)
			}
			if got := strings.Contains(stderr, patches.NoDraftWithProbs); got != tt.warn {
				t.Errorf("bundle warned of %s: %v, want %v\n%s", patches.NoDraftWithProbs, got, tt.warn, stderr)
			}
		})
	}
}

func TestManifestSaysHowPromptLogprobsAreComputed(t *testing.T) {
	in := newBundleInputs(t)
	files := []artifacts.InputFile{{Path: "bin/llama-server", From: "/bin/true", Kind: artifacts.KindExecutable}}
	patched := writeTestArtifactsWithPatches(t, filepath.Join(in.Dir, "patched"), "cpu-v3", files,
		[]artifacts.Patch{{Name: patches.PromptLogprobs, SHA256: strings.Repeat("f", 64)}})
	for _, tt := range []struct {
		name, artifacts, want string
	}{
		{"a server without the prompt-logprobs patch is scored by teacher forcing", in.Artifacts, manifest.PromptLogprobsTeacherForcing},
		{"a server built with the patch scores in one prefill", patched, manifest.PromptLogprobsNative},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			code, _, stderr := runCLI(t, "bundle", "--target", "cpu-v3", "--artifacts", tt.artifacts, "--model", in.Model, "--quiet", "-o", dir)
			if code != 0 {
				t.Fatalf("bundle exit %d: %s", code, stderr)
			}
			m, err := manifest.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if m.Contract.PromptLogprobs != tt.want {
				t.Errorf("contract.promptLogprobs = %q, want %q", m.Contract.PromptLogprobs, tt.want)
			}
			// The patched server offers prompt_logprobs only when started with the option.
			if on := slices.Contains(m.Server.Args, "--prompt-logprobs"); on != (tt.want == manifest.PromptLogprobsNative) {
				t.Errorf("server args %q: --prompt-logprobs given = %v, want it exactly for %s", m.Server.Args, on, manifest.PromptLogprobsNative)
			}
		})
	}
}

// A bundle that promises traffic-independent scores gives llama-server the arguments that keep
// it: without --parallel, llama-server would choose 4 slots and a unified KV cache, overriding
// --no-kv-unified (issue 27, item 1). Arguments that undo it are refused.
func TestTrafficIndependentScoresAreDelivered(t *testing.T) {
	in := newBundleInputs(t)
	files := []artifacts.InputFile{{Path: "bin/llama-server", From: "/bin/true", Kind: artifacts.KindExecutable}}
	series := writeTestArtifactsWithPatches(t, filepath.Join(in.Dir, "series"), "cpu-v3", files, []artifacts.Patch{
		{Name: patches.PromptLogprobs, SHA256: strings.Repeat("f", 64)},
		{Name: patches.PromptLogprobsAlone, SHA256: strings.Repeat("e", 64)},
	})
	bundle := func(extra ...string) (*manifest.Manifest, int, string) {
		dir := filepath.Join(t.TempDir(), "b")
		code, _, stderr := runCLI(t, append([]string{"bundle", "--target", "cpu-v3", "--artifacts", series, "--model", in.Model, "--quiet", "-o", dir}, extra...)...)
		if code != 0 {
			return nil, code, stderr
		}
		m, err := manifest.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return m, code, stderr
	}
	for _, tt := range []struct {
		name     string
		extra    []string
		parallel string
	}{
		{"without --parallel: the 4 slots llama-server would choose, named", nil, "4"},
		{"with --parallel 2", []string{"--parallel", "2"}, "2"},
		// the bundle's own --no-kv-unified and --parallel are arguments, which win over these
		{"the environment asks for a unified cache and automatic slots", []string{"--env", "LLAMA_ARG_KV_UNIFIED=1", "--env", "LLAMA_ARG_N_PARALLEL=-1"}, "4"},
		{"slots given as a server argument", []string{"--server-arg=-np", "--server-arg=3"}, "3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, code, stderr := bundle(tt.extra...)
			if code != 0 {
				t.Fatalf("bundle exit %d: %s", code, stderr)
			}
			s := m.Settings()
			if !m.Contract.ScoresTrafficIndependent {
				t.Fatalf("contract does not promise traffic-independent scores: %+v", m.Contract)
			}
			if v, _ := s.Lookup("--parallel"); v != tt.parallel {
				t.Errorf("--parallel = %q in %q, want %s", v, m.Server.Args, tt.parallel)
			}
			if n := strings.Count(strings.Join(m.Server.Args, " "), "-np ") + strings.Count(strings.Join(m.Server.Args, " "), "--parallel "); n != 1 {
				t.Errorf("server args %q give the slot count %d times, want once", m.Server.Args, n)
			}
			if v, _ := s.Lookup("--kv-unified"); v != "false" {
				t.Errorf("--kv-unified = %q in %q, want false", v, m.Server.Args)
			}
		})
	}
	for _, tt := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"--kv-unified", []string{"--server-arg=--kv-unified"}, "unified KV cache"},
		{"automatic slots", []string{"--server-arg=--parallel", "--server-arg=-1"}, `--parallel "-1"`},
	} {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			_, code, stderr := bundle(tt.extra...)
			if code != 2 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "--scores-traffic-independent=false") {
				t.Errorf("bundle %v: exit %d, %s; want 2 saying %q and the way out", tt.extra, code, stderr, tt.want)
			}
		})
	}
	if _, code, stderr := bundle("--server-arg=--kv-unified", "--scores-traffic-independent=false"); code != 0 {
		t.Errorf("a unified KV cache without the promise: exit %d: %s", code, stderr)
	}
}

// The global --quiet keeps only warnings and errors on stderr; results stay on stdout
// (issue 31).
func TestQuietKeepsOnlyResults(t *testing.T) {
	in := newBundleInputs(t)
	dir := filepath.Join(t.TempDir(), "b")
	code, stdout, stderr := runCLI(t, "--quiet", "bundle", "--target", "cpu-v3", "--artifacts", in.Artifacts, "--model", in.Model, "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "level=INFO") || !strings.Contains(stdout, dir) {
		t.Errorf("--quiet: stderr %q, stdout %q; want no info lines and the results", stderr, stdout)
	}
	_, _, loud := runCLI(t, "bundle", "--target", "cpu-v3", "--artifacts", in.Artifacts, "--model", in.Model, "-o", dir+"2")
	if !strings.Contains(loud, "level=INFO") {
		t.Errorf("without --quiet the log has no info lines (the test shows nothing): %q", loud)
	}
}

// On a terminal (runTerm given one: stderr here is a buffer standing in for it) bundling
// draws one line in place, and every log line lands on a line of its own above it; the last
// state stays as a log line. With --quiet there is no line at all.
func TestBundleDrawsOneLineOnATerminal(t *testing.T) {
	in := newBundleInputs(t)
	args := []string{"llbuild", "bundle", "--target", "cpu-v3", "--artifacts", in.Artifacts, "--model", in.Model, "-o", filepath.Join(t.TempDir(), "b")}
	var stdout, stderr bytes.Buffer
	if code := runTerm(context.Background(), args, strings.NewReader(""), &stdout, &stderr, progress.NewTerm(&stderr, 200)); code != 0 {
		t.Fatalf("bundle: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "\rbundling [") {
		t.Errorf("stderr has no progress line drawn in place: %q", stderr.String())
	}
	lines := progresstest.Screen(stderr.String())
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "time=") || strings.Contains(l, "bundling [") {
			t.Errorf("screen line %q is not a log line of its own", l)
		}
	}
	if last := lines[len(lines)-1]; last != "" {
		t.Errorf("the progress line is left on the screen: %q", last)
	}
	if !strings.Contains(stderr.String(), `msg="bundling: copying and hashing" done=`) || !strings.Contains(stderr.String(), "(100%)") {
		t.Errorf("no last log line of the copying and hashing:\n%s", strings.Join(lines, "\n"))
	}
	// bundle's --quiet and the global one
	for _, quiet := range [][]string{append(args[:len(args)-1:len(args)-1], t.TempDir()+"/c", "--quiet"), append([]string{"llbuild", "--quiet"}, args[1:len(args)-1]...)} {
		if quiet[1] == "--quiet" {
			quiet = append(quiet, t.TempDir()+"/d")
		}
		stderr.Reset()
		if code := runTerm(context.Background(), quiet, strings.NewReader(""), &stdout, &stderr, progress.NewTerm(&stderr, 200)); code != 0 || strings.Contains(stderr.String(), "\r") {
			t.Errorf("%q on a terminal: exit %d, stderr %q", quiet, code, stderr.String())
		}
	}
}

// Bundling a large model with a log that is not a terminal says now and then how far the
// copying and hashing got (here every 2 ms instead of 30 s, so that a 51 MB model shows it).
func TestBundleLogsProgressWhenNotATerminal(t *testing.T) {
	in := newBundleInputs(t)
	b, err := gguf.TinyLlama(gguf.DefaultTiny())
	if err != nil {
		t.Fatal(err)
	}
	gguf.PadVocab(b, gguf.DefaultTiny(), 200000)
	big := filepath.Join(in.Dir, "big.gguf")
	if err := b.WriteFile(big); err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { plainProgressEvery = d }(plainProgressEvery)
	plainProgressEvery = 2 * time.Millisecond
	args := []string{"bundle", "--target", "cpu-v3", "--artifacts", in.Artifacts, "--model", big, "-o", filepath.Join(t.TempDir(), "b")}
	code, _, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("bundle: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "bundling: copying and hashing") || !strings.Contains(stderr, " MB (") {
		t.Errorf("stderr has no progress lines:\n%s", stderr)
	}
	// --quiet keeps them out
	args = append(args[:len(args)-1], filepath.Join(t.TempDir(), "c"), "--quiet")
	if code, _, stderr := runCLI(t, args...); code != 0 || strings.Contains(stderr, "bundling: copying") {
		t.Errorf("bundle --quiet: exit %d, progress in stderr:\n%s", code, stderr)
	}
}

// out/latest -> out/cpu-v3/HASH: artifacts named through a link bundle as the directory they
// name (a walk that does not follow links read the link as an empty directory).
func TestBundleTakesArtifactsThroughALink(t *testing.T) {
	in := newBundleInputs(t)
	p, _ := cpuPlans(t)
	art := stubArtifacts(t, p)
	link := filepath.Join(t.TempDir(), "latest")
	if err := os.Symlink(art, link); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if code, _, stderr := runCLI(t, "bundle", "--target", p.Target, "--artifacts", link, "--model", in.Model, "--quiet", "-o", dir); code != 0 {
		t.Fatalf("bundle --artifacts LINK: exit %d\n%s", code, stderr)
	}
	if code, out, stderr := runCLI(t, "verify", dir); code != 0 {
		t.Errorf("the bundle made through a link does not verify: exit %d\n%s%s", code, out, stderr)
	}
}
