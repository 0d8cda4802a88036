package daggerexec

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"dagger.io/dagger"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/internal/ocitar"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
)

// Paths inside the build container.
const (
	srcDir    = "/src"
	buildDir  = "/build"
	patchDir  = "/patches"
	ccacheDir = "/ccache"
	platform  = dagger.Platform("linux/amd64")
)

// state is what the steps share: the container being defined and where outputs go.
type state struct {
	plan     *pipeline.Plan
	opts     Options
	dag      *dagger.Client
	ctr      *dagger.Container
	export   string
	out      string
	artifact string
	// patchExecs maps a patch exec's command line to the patch, to name it in errors.
	patchExecs map[string]string
	// develRef and develDigest name the devel image the build runs in (develDigest "" when
	// unknown); develRef is empty when it is the plan's.
	develRef, develDigest string
	// sourceTree is the content hash of a plain-directory source, whose commit nothing checks.
	sourceTree string
	// cuda is the CUDA toolchain found in the devel image, for CUDA plans.
	cuda *pipeline.CUDAToolchain
}

// provenance says where the build's inputs differed from the plan's.
func (s *state) provenance() []pipeline.ProvenanceOption {
	opts := []pipeline.ProvenanceOption{pipeline.WithPatchFiles(s.opts.Series)}
	if s.develRef != "" {
		opts = append(opts, pipeline.WithDevelImage(s.develRef, s.develDigest))
	}
	if s.sourceTree != "" {
		opts = append(opts, pipeline.WithUnverifiedSource(s.plan, s.sourceTree))
	}
	if s.cuda != nil {
		opts = append(opts, pipeline.WithCUDAToolchain(s.cuda))
	}
	return opts
}

// develSubstituted reports whether the build runs in another devel image than the plan's.
func (s *state) develSubstituted() bool {
	return s.develRef != "" && pipeline.DevelSubstituted(s.plan, s.develDigest)
}

// lazySteps only define the build's container: the engine runs them when the export asks for
// the result, so their own times say nothing and are logged at debug level; the export's time
// is the build's.
var lazySteps = map[string]bool{"devel image": true, "apt packages": true, "environment": true, "patches": true, "configure": true, "build": true, "build wheel": true}

func logged[S any](log *slog.Logger, steps []pipeline.Step[S]) []pipeline.Step[S] {
	out := make([]pipeline.Step[S], len(steps))
	for i, st := range steps {
		if lazySteps[st.Name()] {
			out[i] = pipeline.LoggedDebug(log, st)
		} else {
			out[i] = pipeline.Logged(log, st)
		}
	}
	return out
}

func steps() []pipeline.Step[*state] {
	return []pipeline.Step[*state]{
		pipeline.StepFunc("devel image", develImage),
		pipeline.StepFunc("apt packages", aptPackages),
		pipeline.StepFunc("cuda toolkit", cudaToolkit),
		pipeline.StepFunc("environment", environment),
		pipeline.StepFunc("source", source),
		pipeline.StepFunc("patches", applyPatches),
		pipeline.StepFunc("configure", configure),
		pipeline.StepFunc("build", build),
		pipeline.StepFunc("export", export),
		pipeline.StepFunc("list what the build read", listReads),
		pipeline.StepFunc("write artifacts", writeArtifacts),
	}
}

// Build defines the plan's container on the engine, runs it, exports the outputs and writes
// the artifacts under out.
func (e *Executor) Build(ctx context.Context, p *pipeline.Plan, out string) (artifact string, err error) {
	out, err = filepath.Abs(out)
	if err != nil {
		return "", err
	}
	log := e.opts.Logger.With("target", p.Target, "plan", p.ShortHash())
	follow := pipeline.NewNinjaProgress(progress.Reporter{Term: e.opts.Progress, Log: log, Every: e.opts.ProgressEvery}, p.Target)
	c, closeSession, err := e.session(ctx, p.Target, follow)
	if err != nil {
		return "", err
	}
	defer closeSession()
	if _, err := os.Stat(out); errors.Is(err, fs.ErrNotExist) {
		// made for this build: a build that fails or is interrupted leaves none behind (Remove
		// takes it only while it is empty, so another build's artifacts stay)
		defer func() {
			if artifact == "" {
				os.Remove(out)
			}
		}()
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	// One export directory per plan, named so that the engine's calls are the same each run.
	exportDir := filepath.Join(out, ".export-"+p.Target+"-"+p.ShortHash())
	if err := os.RemoveAll(exportDir); err != nil {
		return "", err
	}
	if err := os.Mkdir(exportDir, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(exportDir)
	defer os.Remove(exportDir + "-devel.tar")
	defer os.RemoveAll(exportDir + "-src")
	s := &state{plan: p, opts: e.opts, dag: c, export: exportDir, out: out, patchExecs: map[string]string{}}
	log.Info("building", "executor", "dagger", "engine", e.opts.Engine)
	follow.Start()
	defer follow.Stop()
	if err := pipeline.RunSteps(ctx, logged(log, steps()), s); err != nil {
		return "", fmt.Errorf("target %s: %w", p.Target, err)
	}
	return s.artifact, nil
}

func develImage(_ context.Context, s *state) error {
	p := s.plan
	ctr := s.dag.Container(dagger.ContainerOpts{Platform: platform})
	// Provenance names the image the build ran in, by digest, and no host path: an archive
	// or layout by its base name.
	switch d := s.opts.Devel; {
	case strings.HasPrefix(d, "oci-archive:"):
		file := strings.TrimPrefix(d, "oci-archive:")
		m, err := ocitar.IndexManifest(file)
		if err == nil {
			s.develDigest, err = ocitar.OnlyDigest(m)
		}
		if err != nil {
			return fmt.Errorf("--base devel=%s: %w", d, err)
		}
		s.develRef = "oci-archive:" + filepath.Base(file)
		ctr = ctr.Import(s.dag.Host().File(file))
	case strings.HasPrefix(d, "oci-layout:"):
		dir := strings.TrimPrefix(d, "oci-layout:")
		m, err := ocitar.LayoutIndexManifest(dir)
		if err == nil {
			s.develDigest, err = ocitar.OnlyDigest(m)
		}
		if err != nil {
			return fmt.Errorf("--base devel=%s: %w", d, err)
		}
		s.develRef = "oci-layout:" + filepath.Base(filepath.Clean(dir))
		// The engine imports archives: tar the layout for it. The file must outlive the
		// build, as the engine reads it when it evaluates the container.
		f, err := tarLayout(dir, s.export)
		if err != nil {
			return fmt.Errorf("--base devel=%s: %w", d, err)
		}
		ctr = ctr.Import(s.dag.Host().File(f))
	case d != "":
		ref := d
		if p.Images.Devel.Digest != "" && !strings.Contains(ref, "@") {
			ref += "@" + p.Images.Devel.Digest
		}
		s.develRef = ref
		if _, dg, ok := strings.Cut(ref, "@"); ok {
			s.develDigest = dg
		}
		ctr = ctr.From(ref)
	default:
		ctr = ctr.From(p.Images.Devel.Ref)
	}
	s.ctr = ctr.WithEnvVariable("DEBIAN_FRONTEND", "noninteractive")
	return nil
}

// develName names the devel image in messages: the substitute given, else the plan's.
func (s *state) develName() string {
	if s.develRef != "" {
		return s.develRef
	}
	return s.plan.Images.Devel.Ref
}

// cudaToolkit finds, in the devel image, the CUDA compiler that will build and the driver
// stub it links against (pipeline.CUDAProbeScript), and refuses a compiler of another CUDA
// release than the plan's. This runs the image up to here on the engine, before the build.
func cudaToolkit(ctx context.Context, s *state) error {
	if s.plan.CUDA == nil {
		return nil
	}
	where := "the devel image " + s.develName()
	out, err := s.ctr.WithExec([]string{"sh", "-c", pipeline.CUDAProbeScript}).Stdout(ctx)
	if err != nil {
		return s.engineError(err)
	}
	tc, err := pipeline.ParseCUDAProbe(out, where)
	if err != nil {
		return err
	}
	if err := s.plan.CheckToolkit(tc, where); err != nil {
		return err
	}
	if tc.Driver != "" {
		s.opts.Logger.Warn("the devel image has a real CUDA driver library: the link can succeed against it where a driverless one would need the stub; provenance records it", "driver", tc.Driver, "image", s.develName())
	}
	s.opts.Logger.Info("cuda toolkit", "nvcc", tc.NVCC, "release", tc.Release, "stubs", tc.Stubs)
	s.cuda = tc
	return nil
}

// expand replaces the plan's tokens with their places in the container.
func (s *state) expand(v string) string {
	return pipeline.Expand(v, srcDir, s.cuda)
}

// environment sets the plan's build environment.
func environment(_ context.Context, s *state) error {
	ctr := s.ctr
	for _, kv := range pipeline.SortedEnv(s.plan.Env) {
		k, v, _ := strings.Cut(kv, "=")
		ctr = ctr.WithEnvVariable(k, s.expand(v))
	}
	s.ctr = ctr.WithEnvVariable("CCACHE_DIR", ccacheDir)
	return nil
}

// tarLayout writes the OCI layout dir as an OCI archive in tmpDir and returns its path.
func tarLayout(dir, tmpDir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return "", fmt.Errorf("%s is not an OCI layout: %w", dir, err)
	}
	name := filepath.Join(filepath.Dir(tmpDir), filepath.Base(tmpDir)+"-devel.tar")
	f, err := os.Create(name)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(tw, in)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func source(ctx context.Context, s *state) error {
	src := s.plan.Source
	if s.plan.Vendor != nil {
		src = *s.plan.Vendor
	}
	dir, tree, err := s.sourceTreeOf(ctx, s.opts.Source, src)
	if err != nil {
		return err
	}
	if tree != "" {
		if err := pipeline.CheckSourceTree(s.plan, s.opts.Source, tree); err != nil {
			return err
		}
	}
	s.sourceTree = tree
	s.ctr = s.ctr.WithDirectory(srcDir, dir).WithWorkdir(srcDir)
	return nil
}

// sourceTreeOf is src at the plan's commit: fetched by the engine (local empty), from a local
// git repository or mirror, or a local plain directory, whose commit nothing checks; for that
// one it also returns its content hash, which provenance records.
func (s *state) sourceTreeOf(ctx context.Context, local string, src pipeline.Source) (*dagger.Directory, string, error) {
	switch {
	case local == "":
		return s.dag.Git(src.URL).Commit(src.Commit).Tree(), "", nil
	case isGitRepo(ctx, local):
		// A mirror may lack blobs that no build reads (upstream's large vocabulary files, say):
		// the engine's checkout would fail on them, so the commit's tree is archived without them.
		missing, err := gitref.MissingBlobs(ctx, local, src.Commit)
		if err != nil {
			return nil, "", fmt.Errorf("reading %s's tree in %s: %w", src.Commit, local, err)
		}
		if len(missing) == 0 {
			return s.dag.Host().Directory(local).AsGit().Commit(src.Commit).Tree(), "", nil
		}
		s.opts.Logger.Warn("the source lacks some files of the commit; building without them", "commit", src.Commit, "missing", strings.Join(missing, " "))
		tmp := s.export + "-src"
		if err := os.RemoveAll(tmp); err != nil {
			return nil, "", err
		}
		if err := gitref.Archive(ctx, local, src.Commit, tmp, missing); err != nil {
			return nil, "", err
		}
		return s.dag.Host().Directory(tmp), "", nil
	default:
		tree, err := pipeline.TreeHash(local)
		if err != nil {
			return nil, "", err
		}
		s.opts.Logger.Warn("source is a plain directory: its commit cannot be checked against the plan's; provenance records it as unverified, by its tree hash", "source", local, "commit", src.Commit, "tree", tree)
		return s.dag.Host().Directory(local, dagger.HostDirectoryOpts{Exclude: []string{".git"}}), tree, nil
	}
}

// isGitRepo reports whether dir is the top of a git repository with at least one commit.
func isGitRepo(ctx context.Context, dir string) bool {
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	if cmd.Run() != nil {
		return false
	}
	top, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--absolute-git-dir").Output()
	if err != nil {
		return false
	}
	g := strings.TrimSpace(string(top))
	return g == dir || g == filepath.Join(dir, ".git")
}

func applyPatches(_ context.Context, s *state) error {
	byName := map[string]patches.Patch{}
	for _, p := range s.opts.Series {
		byName[p.Name] = p
	}
	// One exec per patch, each checked before it is applied: an exec error then names the
	// patch. A failed exec leaves nothing behind: the container's state is discarded.
	for _, pp := range s.plan.Patches {
		p, ok := byName[pp.Name]
		if !ok {
			return fmt.Errorf("patch %s is in the plan but not in the series given to the executor", pp.Name)
		}
		if p.SHA256 != pp.SHA256 {
			return fmt.Errorf("patch %s has sha256 %s, the plan pins %s", pp.Name, p.SHA256, pp.SHA256)
		}
		file := patchDir + "/" + p.Name
		args := []string{"sh", "-c", `git apply --check --whitespace=nowarn "$1" && git apply --whitespace=nowarn "$1"`, "apply", file}
		s.patchExecs[strings.Join(args, "\x00")] = p.Name
		s.ctr = s.ctr.WithNewFile(file, string(p.Data)).WithExec(args)
	}
	return nil
}

func withEnvScript(p *pipeline.Plan, args []string) []string {
	if p.EnvScript == "" {
		return args
	}
	return append([]string{"bash", "-c", `. "$0" >/dev/null && exec "$@"`, p.EnvScript}, args...)
}

func configure(_ context.Context, s *state) error {
	args := []string{"cmake", "-S", srcDir, "-B", buildDir}
	for _, a := range s.plan.Configure {
		args = append(args, s.expand(a))
	}
	// ccache handles concurrent use itself: the volume is shared between builds.
	s.ctr = s.ctr.
		WithMountedCache(ccacheDir, s.dag.CacheVolume("llbuild-ccache"), dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeShared}).
		WithExec(withEnvScript(s.plan, args))
	return nil
}

func build(_ context.Context, s *state) error {
	args := append([]string{"cmake", "--build", buildDir, "--target"}, s.plan.BuildTargets...)
	s.ctr = s.ctr.WithExec(withEnvScript(s.plan, args))
	return nil
}

func export(ctx context.Context, s *state) error {
	var include []string
	for _, o := range s.plan.Outputs {
		include = append(include, o.Glob)
	}
	outputs := s.dag.Directory().WithDirectory("/", s.ctr.Directory(buildDir), dagger.DirectoryWithDirectoryOpts{Include: include})
	if _, err := outputs.Export(ctx, s.export); err != nil {
		return s.engineError(err)
	}
	return nil
}

// listReads keeps what the build read from the source tree (pipeline.ReadsScript, run in the
// build container) in the reads directory, by plan hash, for Reads: the commits of a bisect
// campaign that change none of it are never built. A build whose ninja cannot list them keeps
// none (its campaign then builds every commit); the build itself does not fail for it.
func listReads(ctx context.Context, s *state) error {
	log := s.opts.Logger.With("target", s.plan.Target, "plan", s.plan.ShortHash())
	if s.opts.ReadsDir == "" {
		return nil
	}
	out, err := s.ctr.WithExec([]string{"sh", "-c", pipeline.ReadsScript, "reads", buildDir}).Stdout(ctx)
	if err != nil {
		log.Debug("what the build read is not known", "err", err)
		return nil
	}
	files, err := pipeline.ParseReads([]byte(out), buildDir, srcDir)
	if err != nil {
		log.Debug("what the build read is not known", "err", err)
		return nil
	}
	if err := os.MkdirAll(s.opts.ReadsDir, 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(readsFile(s.opts.ReadsDir, s.plan), []byte(strings.Join(files, "\n")+"\n"), 0o644)
}

func readsFile(dir string, p *pipeline.Plan) string { return filepath.Join(dir, p.Hash+".txt") }

// Reads lists the files of the source tree that this executor's build of p read, relative to
// the source root, sorted, as its build kept them (listReads): on the machine that built it.
func (e *Executor) Reads(_ context.Context, p *pipeline.Plan) ([]string, error) {
	if e.opts.ReadsDir == "" {
		return nil, fmt.Errorf("no directory for what builds read (no user cache directory)")
	}
	b, err := os.ReadFile(readsFile(e.opts.ReadsDir, p))
	if err != nil {
		return nil, fmt.Errorf("what the build of plan %s read is not known here: %w", p.ShortHash(), err)
	}
	return strings.Fields(string(b)), nil
}

func writeArtifacts(_ context.Context, s *state) error {
	dir, err := pipeline.WriteArtifacts(s.plan, s.export, s.out, s.opts.Builder, s.provenance()...)
	if err != nil {
		return err
	}
	s.artifact = dir
	return nil
}
