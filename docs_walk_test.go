package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/targets"
)

// TestDocsWalk runs the documents' command lines that read a llama.cpp repository, a campaign's
// log, a lab's records or a bundle, as a user would after the document's earlier lines, each
// fenced block in a world of its own made of real things. HOME holds llama.cpp.git and llama.cpp
// (upstream's history from ../shared, master and origin/master at a commit after the pin,
// upstreamChild's, where the pinned series applies, so that recipe bump moves the pin as the
// documents show; and the release tag b10573 where llbuild counts that build number; also as
// ./llama.cpp.git),
// src/llama.cpp-b7000 (the pinned tree) and refreshed/ (the series, refreshed for origin/master:
// the pinned one applies there). The working directory holds copies of recipes/ and patches/
// (recipe bump rewrites them); camp/bisect.log, edited.log and h200-part3.log (the H200
// campaign's logs in benchmarks/); lab/week49 and lab/gemma4-q8 (an H200 A/B's records);
// olares-one.new.json (olares-one's plan at origin/master); the bundles the documents bench,
// verify, preflight and serve (bundle/, old/, new/, v2/, v3/, record/, today/, b-old/, b-new/, and
// bundle.tar.zst and new.tar.zst: Debian sid's llama-server with a tiny model), vision/ (the
// series build with a tiny model and vision projector) and photo.json (messages with a PNG),
// chat.json and key.txt; bundles/before
// and bundles/after (stand-in server files, plans a CMake argument and CFLAGS apart);
// out/ with h200 artifacts of stand-in files at out/h200/3708fd884f2d, the provisioned series
// build at out/cpu-v3/<hash>, sid's llama-server as olares-one's artifacts and two wheels
// (rtx3090, cpu-v3); image.tar and new.oci.tar (images of the series build, the second as
// olares-one's with CUDA 13.1's NVIDIA_REQUIRE_CUDA); m.gguf and d.gguf, and the Gemma 4 pair's
// names as tiny models; mybox.yaml (target detect of this machine); and
// pipeline/ (the fixture tree of the demonstration build). Paths under /tmp/ go to the world's
// own tmp/, a bench line's protocol is shrunk where it leaves it to --mode (smallProtocol), a
// serve line's --addr gives way to a free port (walkServe), <hash> (or a path's *)
// is the one build in the world the path names. A "> FILE" after a line keeps its output for a
// later line (plan --json > old.json, then plan diff old.json h200); what a block's bundle lines
// write is not in its world before them; a build line that cannot run here but whose --out a
// later line reads leaves there what builtStandIn makes; LABEL stands for the lab's promoted run. Lines that need a GPU, an
// engine, a registry or another placeholder are left to TestDocsCommandLinesMatchTheCLI and the
// commands' own tests.
func TestDocsWalk(t *testing.T) {
	mirror := upstreamMirror(t)
	master := upstreamChild(t, mirror)
	for _, ref := range []string{"refs/remotes/origin/master", "refs/heads/master"} { // HEAD too
		if out, err := exec.Command("git", "-C", mirror, "update-ref", ref, master).CombinedOutput(); err != nil {
			t.Fatalf("%s in the mirror: %v\n%s", ref, err, out)
		}
	}
	// upstream's release tag that docs/plan.md resolves, which the shallow mirror lacks: b10573,
	// 14 first-parent commits before the pin (b10587), as llbuild counts build numbers
	if out, err := exec.Command("git", "-C", mirror, "update-ref", "refs/tags/b10573", "3f545becc~14").CombinedOutput(); err != nil {
		t.Fatalf("tagging b10573: %v\n%s", err, out)
	}
	tree := enginetest.LlamaSource(t)
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// the plan a pin moved to origin/master would have (the pinned series applies there)
	newPlan := filepath.Join(t.TempDir(), "olares-one.new.json")
	code, stdout, stderr := runCLI(t, "plan", "--target", "olares-one", "--source", mirror, "--ref", "origin/master", "--json")
	if code != exitOK {
		t.Fatalf("olares-one's plan at origin/master: exit %d\n%s", code, stderr)
	}
	if err := os.WriteFile(newPlan, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}

	bundles := docsBundles(t)
	ran, left := 0, 0
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(filepath.Join(repo, file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		block := fencedBlocks(lines)
		worlds := map[int]string{}    // a fenced block's world, made when its first walkable line comes
		written := map[int][]string{} // what a block's bundle lines write: not in its world before them
		built := map[int][][]string{} // build lines that cannot run whose output a later line reads
		cmds := docCommands(string(text))
		for i, c := range cmds {
			if walkable(c.args) && c.args[0] == "bundle" {
				written[block[c.line-1]] = append(written[block[c.line-1]], flagValue(c.args, "-o"), flagValue(c.args, "--archive"))
			}
			if out := flagValue(c.args, "--out"); c.args[0] == "build" && !walkable(c.args) && out != "" && slices.ContainsFunc(cmds[i+1:], func(d docCommand) bool {
				return block[d.line-1] == block[c.line-1] && walkable(d.args) && slices.ContainsFunc(d.args, func(a string) bool { return strings.HasPrefix(a, out+"/") })
			}) {
				built[block[c.line-1]] = append(built[block[c.line-1]], c.args)
			}
		}
		for _, c := range cmds {
			if !walkable(c.args) {
				continue
			}
			dir, ok := worlds[block[c.line-1]]
			if !ok {
				dir = docsWorld(t, repo, mirror, tree, newPlan, bundles)
				for _, w := range written[block[c.line-1]] {
					if w != "" {
						if err := os.RemoveAll(filepath.Join(dir, w)); err != nil {
							t.Fatal(err)
						}
					}
				}
				for _, b := range built[block[c.line-1]] {
					builtStandIn(t, dir, b)
				}
				worlds[block[c.line-1]] = dir
			}
			args, out := walkArgs(c, lines[c.line-1], dir)
			if plan := len(args) > 1 && args[0] == "plan" && args[1] == "diff"; plan && !operandsExist(args[2:], dir) ||
				args[0] == "bundle" && !operandsExist([]string{flagValue(args, "--artifacts")}, dir) ||
				args[0] == "preflight" && !operandsExist([]string{flagValue(args, "--binary"), flagValue(args, "--target-file")}, dir) {
				left++
				t.Logf("%s:%d: left out (an operand or artifacts the world has not): %s", file, c.line, c.text)
				continue
			}
			if args[0] == "serve" {
				walkServe(t, dir, args)
				t.Logf("%s:%d: %s: served a completion", file, c.line, c.text)
				ran++
				continue
			}
			code, stdout, stderr := runIn(t, dir, args)
			t.Logf("%s:%d: %s: exit %d", file, c.line, c.text, code)
			if code != exitOK {
				t.Errorf("%s:%d: %s: exit %d\n%s%s", file, c.line, c.text, code, stdout, stderr)
				continue
			}
			if out != "" {
				if err := os.WriteFile(filepath.Join(dir, out), []byte(stdout), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ran++
		}
	}
	t.Logf("walked %d command lines of README.md and docs/ (%d plan diff and bundle lines left out)", ran, left)
	if ran < 45 {
		t.Errorf("walked %d command lines, want the documents' repository, campaign, lab, bundle and bench lines (45 or more): the selection is broken", ran)
	}
}

// walkable: the lines TestDocsWalk runs: what reads a repository, a campaign's log, a lab's
// records or a bundle, the plans a plan diff line after them reads, and benches on this CPU.
func walkable(args []string) bool {
	for _, a := range args {
		if strings.ContainsAny(strings.ReplaceAll(strings.ReplaceAll(a, "<hash>", ""), "/*", ""), "<*") {
			return false
		}
	}
	if len(args) < 2 {
		return false
	}
	switch args[0] + " " + args[1] {
	case "patches status", "recipe bump", "bisect log", "bisect replay", "bench report", "plan diff":
		return true
	}
	switch {
	case args[0] == "verify", args[0] == "preflight" && slices.Contains(args, "--bundle"),
		// the CPU check of a build's files, and the driver question of an image archive
		args[0] == "preflight" && slices.Contains(args, "--binary"),
		args[0] == "preflight" && slices.Contains(args, "--image-archive") && slices.Contains(args, "--driver-only"),
		args[0] == "bundle" && strings.HasPrefix(flagValue(args, "--image"), "oci-archive:"),
		args[0] == "wheel" && slices.Contains(args, "--print-plan"),
		// the demonstration build of the fixture tree (seconds), and bundles of artifacts the
		// world has
		args[0] == "build" && slices.Contains(args, "pipeline/testdata/fakellama"),
		args[0] == "bundle" && slices.Contains(args, "--artifacts"),
		// benches of the world's bundles on this machine's CPU (not of four GPUs, not a sweep)
		args[0] == "bench" && !slices.Contains(args, "--gpus") && !slices.Contains(args, "--sweep"),
		args[0] == "serve", args[0] == "index":
		return true
	}
	// a plan kept in a file for a plan diff (plan ... --json > old.json), and one of a commit
	// resolved in a local mirror
	return args[0] == "plan" && slices.Contains(args, "--json") && (slices.Contains(args, "--recipe") || slices.Contains(args, "--source"))
}

var redirect = regexp.MustCompile(`(?:^|[^2])>\s*([^\s#;|&]+)`)

// walkArgs: the line's arguments with ~ at the world's HOME and LABEL the lab's promoted run,
// and the file its output is redirected to, if any.
func walkArgs(c docCommand, raw, dir string) ([]string, string) {
	args := make([]string, len(c.args))
	for i, a := range c.args {
		switch {
		case strings.HasPrefix(a, "~/"):
			a = filepath.Join(dir, "home", a[2:])
		case strings.HasPrefix(a, "/tmp/"): // the world's own, not the machine's
			a = filepath.Join(dir, a)
		case a == "LABEL" && i > 0 && c.args[i-1] == "--leaderboard":
			a = promotedLabel(filepath.Join(dir, c.args[i-2]))
		case strings.Contains(a, "<hash>"), strings.Contains(a, "/*"): // the one build in the world the path names
			if m, _ := filepath.Glob(filepath.Join(dir, strings.ReplaceAll(a, "<hash>", "*"))); len(m) == 1 {
				a, _ = filepath.Rel(dir, m[0])
			}
		}
		args[i] = a
	}
	if len(args) > 1 && args[0] == "bench" && args[1] != "report" {
		args = smallProtocol(args)
	}
	out := ""
	if m := redirect.FindStringSubmatch(raw); m != nil {
		out = m[1]
	}
	return args, out
}

// smallProtocol shrinks a bench line's protocol where the line leaves it to --mode (2 canaries,
// 2 rows of 32 tokens): its bundles, mode, rounds and campaign are as documented, and a tiny
// model's figures mean nothing anyway, but the documents' full-mode A/Bs over the judge's rounds
// would otherwise cost CI minutes of canaries.
func smallProtocol(args []string) []string {
	for _, f := range []struct{ flag, value string }{{"--canaries", "2"}, {"--rows", "2"}, {"--generate", "32"}} {
		if !slices.ContainsFunc(args, func(a string) bool { return a == f.flag || strings.HasPrefix(a, f.flag+"=") }) {
			args = append(args, f.flag, f.value)
		}
	}
	return args
}

// promotedLabel is the label of a lab's promoted run ("" when it has none).
func promotedLabel(lab string) string {
	b, err := os.ReadFile(filepath.Join(lab, "records.json"))
	if err != nil {
		return ""
	}
	var r struct {
		Runs []struct{ Label, Decision string }
	}
	if json.Unmarshal(b, &r) != nil {
		return ""
	}
	for _, run := range r.Runs {
		if run.Decision == "promoted" {
			return run.Label
		}
	}
	return ""
}

// operandsExist: every operand of a plan diff line is a target or a file in the world.
func operandsExist(args []string, dir string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if _, err := targets.Load(a); err == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, a)); err != nil {
			return false
		}
	}
	return true
}

// flagValue is the value after flag in args ("" when absent).
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// fencedBlocks numbers each line by the fenced block it is in (0 outside any).
func fencedBlocks(lines []string) []int {
	block := make([]int, len(lines))
	n, in := 0, false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			if in {
				n++
			}
			continue
		}
		if in {
			block[i] = n
		}
	}
	return block
}

// mustRun runs a command of the world's making and fails the test with its output if it fails.
func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// docsWorld makes one fenced block's world (TestDocsWalk says what it holds) and returns its
// working directory; HOME is its home/.
func docsWorld(t *testing.T, repo, mirror, tree, newPlan, bundles string) string {
	t.Helper()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	for _, d := range []string{filepath.Join(home, "src"), filepath.Join(home, "refreshed"), filepath.Join(dir, "camp"), filepath.Join(dir, "lab")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		filepath.Join(dir, "llama.cpp.git"):           mirror,
		filepath.Join(home, "llama.cpp.git"):          mirror,
		filepath.Join(home, "llama.cpp"):              mirror,
		filepath.Join(home, "src", "llama.cpp-b7000"): tree,
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, "cp", "-r", filepath.Join(repo, "recipes"), filepath.Join(repo, "patches"), dir)
	series, err := filepath.Glob(filepath.Join(repo, "patches", "0*.patch"))
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, "cp", append(series, filepath.Join(repo, "patches", "series"), filepath.Join(home, "refreshed"))...)
	h200 := filepath.Join(repo, "benchmarks")
	mustRun(t, "cp", filepath.Join(h200, "h200-bisect-2026-12-04-part4", "ds.log"), filepath.Join(dir, "camp", "bisect.log"))
	mustRun(t, "cp", filepath.Join(h200, "h200-bisect-2026-12-04-part4", "ds.log"), filepath.Join(dir, "edited.log"))
	mustRun(t, "cp", filepath.Join(h200, "h200-bisect-2026-12-04-part3", "ds.log"), filepath.Join(dir, "h200-part3.log"))
	for _, lab := range []string{"week49", "gemma4-q8"} {
		mustRun(t, "tar", "-xzf", filepath.Join(h200, "h200-pin-ab-2026-12-04", "runs-ab-mtp.tgz"), "-C", filepath.Join(dir, "lab"))
		mustRun(t, "mv", filepath.Join(dir, "lab", "runs-ab-mtp"), filepath.Join(dir, "lab", lab))
	}
	mustRun(t, "cp", newPlan, filepath.Join(dir, "olares-one.new.json"))
	made, err := filepath.Glob(filepath.Join(bundles, "*"))
	if err != nil {
		t.Fatal(err)
	}
	// hard links, not copies: every world reads the same bundles (hundreds of MB of servers and
	// libraries), and no line writes into them
	mustRun(t, "cp", append(append([]string{"-al"}, made...), dir)...)
	if err := os.Symlink(filepath.Join(repo, "pipeline"), filepath.Join(dir, "pipeline")); err != nil { // the fixture tree
		t.Fatal(err)
	}
	return dir
}

// docsBundles makes what the worlds share once (TestDocsWalk lists it): the bundles, chat.json and photo.json,
// the h200 artifacts and the two ggufs beside them.
func docsBundles(t *testing.T) string {
	t.Helper()
	in := newBundleInputs(t)
	before, after := cpuPlans(t)
	dir := t.TempDir()
	// the bundles the documents bench, and bundle/ that they verify and preflight: Debian sid's
	// llama-server with a tiny model, as the bench tests make them; new also as an archive
	sid := sidArtifacts(t, "cpu-v3")
	for _, name := range []string{"bundle", "old", "new", "v2", "v3", "record", "today", "b-old", "b-new"} {
		args := []string{"bundle", "--target", "cpu-v3", "--artifacts", sid, "--model", in.Model, "--ctx-size", "2048",
			"--threads", "2", "--parallel", "1", "--quiet", "-o", filepath.Join(dir, name)}
		switch name {
		case "bundle", "new":
			args = append(args, "--archive", filepath.Join(dir, name+".tar.zst"))
		}
		if code, _, stderr := runCLI(t, args...); code != exitOK {
			t.Fatalf("bundle %s: exit %d\n%s", name, code, stderr)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "key.txt"), []byte("sk-docs-walk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chat.json"), []byte(`[{"role": "user", "content": "Say something about the weather."}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	// the h200 artifacts docs/bisect.md bundles (out/h200/3708fd884f2d): stand-in server files
	lib := systemLib(t)
	plan, err := resolvePlan("h200", "", "server", false)
	if err != nil {
		t.Fatal(err)
	}
	plan.Hash = "3708fd884f2d" + strings.Repeat("0", 52)
	h200, err := artifacts.Write(filepath.Join(dir, "out"), artifacts.Input{
		Target: "h200", PlanHash: plan.Hash,
		Files: []artifacts.InputFile{
			{Path: "bin/llama-server", From: "/bin/true", Kind: artifacts.KindExecutable},
			{Path: "bin/" + filepath.Base(lib), From: lib, Kind: artifacts.KindLibrary},
		},
		Provenance: pipeline.ProvenanceOf(plan, pipeline.Builder{Version: "test", Executor: "host"}),
	})
	if err != nil || filepath.Base(h200) != "3708fd884f2d" {
		t.Fatalf("h200 artifacts at %s: %v", h200, err)
	}
	// wheels beside them for index out -o index (two variants, cu131 and cpu)
	indexArtifact(t, filepath.Join(dir, "out"), "rtx3090", "0.3.34+cu131.sm86.avx2")
	indexArtifact(t, filepath.Join(dir, "out"), "cpu-v3", "0.3.34+cpu.avx2")
	// what `llbuild build` leaves for the documents' other builds, made of real servers: the
	// series build of the pin for cpu-v3 (provisioned) at out/cpu-v3/<hash>; Debian sid's
	// llama-server as olares-one's artifacts at out/olares-one/<hash> (standing in for an sm_120
	// build, which this machine can neither make nor run); and as images (--image-out), the series
	// build on the runtime stand-in (image.tar) and the series build's files as olares-one's on
	// the runtime stand-in with nvidia/cuda:13.1.1's NVIDIA_REQUIRE_CUDA (new.oci.tar, standing in
	// for the README's sm_120 build of upstream's master).
	series := filepath.Dir(enginetest.PatchedServer(t))
	mustRun(t, "cp", "-al", series, filepath.Join(dir, "out", "cpu-v3"))
	// vision/ and photo.json, which docs/bench.md benches with an image: the series build with
	// the tiny model and a tiny vision projector (bundle --mmproj), one small PNG in the messages
	proj := filepath.Join(t.TempDir(), "tiny-mmproj.gguf")
	if err := gguf.WriteTinyProjectorFile(proj, gguf.DefaultTinyProjector(gguf.DefaultTiny())); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "bundle", "--target", "cpu-v3", "--artifacts", series, "--model", in.Model, "--mmproj", proj,
		"--ctx-size", "2048", "--threads", "2", "--parallel", "1", "--quiet", "-o", filepath.Join(dir, "vision")); code != exitOK {
		t.Fatalf("bundle vision: exit %d\n%s", code, stderr)
	}
	photo, _ := json.Marshal([]any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "What is in this picture?"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": pngDataURL(t)}}}}})
	if err := os.WriteFile(filepath.Join(dir, "photo.json"), photo, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "cp", "-al", filepath.Dir(sidArtifacts(t, "olares-one")), filepath.Join(dir, "out"))
	docsImage(t, filepath.Join(dir, "image.tar"), series, nil)
	docsImage(t, filepath.Join(dir, "new.oci.tar"), asTarget(t, series, "olares-one"),
		[]string{"NVIDIA_REQUIRE_CUDA=cuda>=13.1 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536"})
	// this machine as a target file (docs/targets.md's target detect -o)
	if code, _, stderr := runCLI(t, "target", "detect", "--name", "mybox", "-o", filepath.Join(dir, "mybox.yaml")); code != exitOK {
		t.Fatalf("target detect: exit %d\n%s", code, stderr)
	}
	// the documents' models: m.gguf and d.gguf, and the Gemma 4 pair's names, as the tiny models
	// with a long context (a real one's): the documents bundle them without --ctx-size for
	// targets that serve four slots (h200, olares-one), and bench them
	for name, o := range map[string]gguf.TinyOptions{"m.gguf": gguf.DefaultTiny(), "d.gguf": gguf.DraftTiny(),
		"gemma-4-12b-qat.gguf": gguf.DefaultTiny(), "gemma-4-12b-assistant.gguf": gguf.DraftTiny()} {
		o.Context = 8192
		if err := gguf.WriteTinyLlamaFile(filepath.Join(dir, name), o); err != nil {
			t.Fatal(err)
		}
	}
	for name, p := range map[string]*pipeline.Plan{"before": before, "after": after} {
		if err := os.MkdirAll(filepath.Join(dir, "bundles"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(bundleOf(t, in, p), filepath.Join(dir, "bundles", name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// asTarget writes the artifacts in dir again as target's, with the plan target resolves to now:
// a stand-in for a build this machine cannot make, whose files run here.
func asTarget(t *testing.T, dir, target string) string {
	t.Helper()
	plan, err := resolvePlan(target, "", "server", false)
	if err != nil {
		t.Fatal(err)
	}
	return asPlan(t, dir, t.TempDir(), plan)
}

// asPlan writes the artifacts in dir again under out as the build of plan would leave them
// (out/<target>/<hash>), and returns their directory.
func asPlan(t *testing.T, dir, out string, plan *pipeline.Plan) string {
	t.Helper()
	a, err := artifacts.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []artifacts.InputFile
	for _, f := range a.Manifest.Files {
		files = append(files, artifacts.InputFile{Path: f.Path, From: a.Path(f), Kind: f.Kind})
	}
	got, err := artifacts.Write(out, artifacts.Input{Target: plan.Target, PlanHash: plan.Hash, Files: files,
		Provenance: pipeline.ProvenanceOf(plan, pipeline.Builder{Version: "test", Executor: "host"})})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// builtStandIn puts where a documented build line that cannot run here (`build … --out OUT`)
// would leave its artifacts the provisioned series build's files (which run here) as that line's
// plan: what its line plans with the same target, recipe and series. Later lines of its block
// bundle and bench them.
func builtStandIn(t *testing.T, dir string, args []string) {
	t.Helper()
	plan := []string{"plan", "--json"}
	for _, f := range []string{"-t", "--target", "--target-file", "--recipe", "--series"} {
		if v := flagValue(args, f); v != "" {
			plan = append(plan, f, v)
		}
	}
	code, stdout, stderr := runIn(t, dir, plan)
	if code != exitOK {
		t.Fatalf("%s: exit %d\n%s", strings.Join(plan, " "), code, stderr)
	}
	var p pipeline.Plan
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, flagValue(args, "--out"))
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	asPlan(t, filepath.Dir(enginetest.PatchedServer(t)), out, &p)
}

// docsImage writes an OCI archive of the artifacts in dir assembled on the runtime stand-in, as
// llbuild build --image-out does, with env added to the base's.
func docsImage(t *testing.T, dst, dir string, env []string) {
	t.Helper()
	a, err := artifacts.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base, closeBase, err := image.Open(ctx, "oci-archive:"+enginetest.RuntimeImage(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeBase()
	if len(env) > 0 {
		cf, err := base.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.Config.Env = append(cf.Config.Env, env...)
		if base, err = mutate.ConfigFile(base, cf); err != nil {
			t.Fatal(err)
		}
	}
	img, err := image.Assemble(base, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := image.WriteOCI(dst, img, ""); err != nil {
		t.Fatal(err)
	}
}

// runIn runs llbuild in dir with HOME at its home/, as a user's shell there would.
func runIn(t *testing.T, dir string, args []string) (int, string, string) {
	t.Helper()
	t.Chdir(dir)
	t.Setenv("HOME", filepath.Join(dir, "home"))
	return runCLI(t, args...)
}

// TestDocsBisectOutputIsTheLogs: the H200 campaign docs/bisect.md shows is what llbuild bisect
// log prints of the log it names, byte for byte.
func TestDocsBisectOutputIsTheLogs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("docs", "bisect.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`llbuild bisect log (\\S+)`(?s:.*?)\n```\n((?s:.*?))```").FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("docs/bisect.md shows no campaign after a `llbuild bisect log FILE`")
	}
	code, stdout, stderr := runCLI(t, "bisect", "log", m[1])
	if code != exitOK {
		t.Fatalf("bisect log %s: exit %d\n%s", m[1], code, stderr)
	}
	if stdout != m[2] {
		t.Errorf("docs/bisect.md shows\n%s\nbut bisect log %s prints\n%s", m[2], m[1], stdout)
	}
}

// walkServe runs a documented serve line in the world until one completion has come back
// through it (with the key of the line's --api-key-file, if any), then stops it as SIGTERM does
// and wants exit 0. The line's --addr gives way to a free loopback port.
func walkServe(t *testing.T, dir string, args []string) {
	t.Helper()
	t.Chdir(dir)
	t.Setenv("HOME", filepath.Join(dir, "home"))
	var extra []string
	key := ""
	for i := 2; i < len(args); i++ {
		switch args[i] {
		case "--addr":
			i++
			continue
		case "--api-key-file":
			b, err := os.ReadFile(args[i+1])
			if err != nil {
				t.Fatalf("the line's key file: %v", err)
			}
			key = strings.TrimSpace(string(b))
		}
		extra = append(extra, args[i])
	}
	srv := startServe(t, args[1], extra...)
	if st, body := srv.post(t, key, map[string]any{"prompt": "the quick brown fox", "max_tokens": 4}); st != http.StatusOK || !strings.Contains(string(body), `"choices"`) {
		t.Errorf("serve %s: a completion answered %d: %s", strings.Join(args[1:], " "), st, body)
	}
	if code := srv.stop(t); code != 0 {
		t.Errorf("serve %s exited %d after its context ended, want 0:\n%s", strings.Join(args[1:], " "), code, srv.stderr.String())
	}
}
