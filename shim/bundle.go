package shim

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path"
	"strings"

	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/patches"
)

// ServeBundle verifies the bundle directory dir against its manifest (every file's size and
// sha256), starts its llama-server with the manifest's arguments and environment (added to this
// process's) and runs the shim with opts until ctx ends; opts' server fields, model name and
// prompt-logprob contract are the bundle's. An address beyond loopback is warned of.
func ServeBundle(ctx context.Context, dir string, opts Options, log *slog.Logger) error {
	if err := manifest.VerifyError(dir, dir); err != nil {
		return err
	}
	m, err := manifest.Load(dir)
	if err != nil {
		return err
	}
	l, err := m.Launch(dir)
	if err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(opts.Addr); host != "localhost" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			log.Warn("listening beyond loopback", "addr", opts.Addr, "api_key", opts.APIKey != "")
		}
	}
	opts.ServerPath, opts.ServerArgs, opts.Env, opts.Dir = l.Path, l.Args, append(os.Environ(), l.Env...), l.Dir
	opts.ModelName = strings.TrimSuffix(path.Base(m.Models.Model.Path), ".gguf")
	if m.Build.Series == patches.SeriesPlain {
		opts.NoPromptLogprobs = "this bundle's llama-server was built with the plain series (upstream plus patch 0001), which keeps no prompt-logprob contract: echo with logprobs needs the scoring series; rebuild with llbuild build --series scoring and bundle that"
	}
	return Run(ctx, opts, log)
}
