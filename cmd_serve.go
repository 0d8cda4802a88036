package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/preflight"
	"github.com/llbuild/llbuild/shim"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve a bundle: its llama-server behind the OpenAI-compatible completion and logprob contract",
		ArgsUsage: "BUNDLE",
		Description: "Verifies the bundle (a directory, or an archive unpacked into a temporary directory that is\n" +
			"removed when serve stops) against its manifest (every file's size and sha256), starts its\n" +
			"llama-server with the manifest's arguments and environment on a private loopback port, and\n" +
			"serves POST /v1/completions (legacy logprobs, echo with exact prompt logprobs, streaming),\n" +
			"POST /v1/chat/completions, GET /v1/models, GET /health, POST /tokenize, POST /detokenize and\n" +
			"GET /tokenizer_info. llama-server is restarted with backoff if it exits (503 meanwhile).\n" +
			"SIGINT or SIGTERM stops both. Exit status: 0 stopped cleanly, 1 the bundle does not verify\n" +
			"or the address cannot be used, 2 usage, 130 interrupted before it was serving.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "listen on `HOST:PORT` (loopback unless you say otherwise)"},
			&cli.StringFlag{Name: "api-key-file", Usage: "require the API key in `FILE` (Authorization: Bearer KEY) on every endpoint but /health"},
			&cli.StringSliceFlag{Name: "allow-host", Usage: "on loopback, also answer requests addressed to `NAME` (a reverse proxy on this machine that passes its own Host: Caddy's default), and pages of that site (repeatable)"},
		},
		Action: func(c *cli.Context) error {
			o, err := serveOptionsOf(c)
			if err != nil {
				return err
			}
			return runServe(c.Context, o, cmdutil.StreamsOf(c))
		},
	}
}

// serveOptions is the bundle serve serves (a directory or an archive), where, and the key it
// asks for ("" for none).
type serveOptions struct {
	Bundle     string
	Addr       string
	AllowHosts []string
	APIKey     string
}

func serveOptionsOf(c *cli.Context) (serveOptions, error) {
	o := serveOptions{Bundle: c.Args().First(), Addr: c.String("addr"), AllowHosts: c.StringSlice("allow-host")}
	for _, h := range o.AllowHosts {
		if h == "" || strings.ContainsAny(h, ":/ ") {
			return o, cmdutil.Usagef("--allow-host %q: give a host name without port or scheme (llm.example.org)", h)
		}
	}
	if c.NArg() < 1 {
		return o, cmdutil.Usagef("serve takes one BUNDLE (a directory or an archive)")
	}
	if c.NArg() > 1 {
		return o, cmdutil.Usagef("serve takes one BUNDLE (a directory or an archive), got also %q", c.Args().Tail())
	}
	_, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return o, cmdutil.Usagef("--addr %q: %v", o.Addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return o, cmdutil.Usagef("--addr %q: the port must be a number from 0 to 65535 (0: any free port)", o.Addr)
	}
	if f := c.String("api-key-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return o, cmdutil.Usage(fmt.Errorf("reading --api-key-file: %w", err))
		}
		if o.APIKey = strings.TrimSpace(string(b)); o.APIKey == "" {
			return o, cmdutil.Usagef("--api-key-file %s is empty", f)
		}
	}
	return o, nil
}

// runServe verifies the bundle (an archive unpacked into a temporary directory, removed when
// serve stops), starts its llama-server as its manifest says and serves the shim on o.Addr
// until ctx ends.
func runServe(ctx context.Context, o serveOptions, st cmdutil.Streams) error {
	log := st.Log
	dir, cleanup, err := cmdutil.OpenBundle(ctx, o.Bundle)
	if err != nil {
		return err
	}
	defer cleanup()
	s, err := manifest.OpenServing(dir)
	if err != nil {
		return err
	}
	if err := preflight.BackendsLoad(ctx, dir, log); err != nil {
		return err
	}
	opts := shim.Options{ServerPath: s.Path, ServerArgs: s.Args, Env: append(os.Environ(), s.Env...), Dir: s.Dir,
		Addr: o.Addr, APIKey: o.APIKey, AllowHosts: o.AllowHosts, ModelName: s.ModelName, NoPromptLogprobs: s.NoPromptLogprobs}
	shim.WarnBeyondLoopback(log, opts)
	return shim.Run(ctx, opts, log)
}
