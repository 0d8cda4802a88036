package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/llbuild/llbuild/manifest"
)

// reuseProblems says which of a bundle's llama-server settings let a response reuse work
// done for an earlier one: a run of such a bundle is not fresh-response valid, however fast.
// llama-server's defaults at the pinned commit keep an 8192 MiB prompt cache (--cache-ram) and
// 32 context checkpoints per slot (--ctx-checkpoints), so both must be set to 0.
func reuseProblems(s manifest.Settings) []string {
	var out []string
	zero := func(flag, def, what string) {
		v, ok := s.Lookup(flag)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s is not set (llama-server's default %s %s): bundle with %s 0", flag, def, what, flag))
		case strings.TrimSpace(v) != "0":
			out = append(out, fmt.Sprintf("%s %s %s: bundle with %s 0", flag, v, what, flag))
		}
	}
	zero("--cache-ram", "8192 MiB", "keeps a prompt cache across requests")
	zero("--ctx-checkpoints", "32", "restores slots from context checkpoints")
	if v, ok := s.Lookup("--cache-reuse"); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n != 0 {
			out = append(out, fmt.Sprintf("--cache-reuse %s reuses cached chunks of earlier prompts", v))
		}
	}
	if v, ok := s.Lookup("--spec-type"); ok {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); strings.HasPrefix(t, "ngram") {
				out = append(out, fmt.Sprintf("--spec-type %s drafts from earlier text (history speculation)", t))
			}
		}
	}
	for _, f := range []string{"--lookup-cache-static", "--lookup-cache-dynamic"} {
		if _, ok := s.Lookup(f); ok {
			out = append(out, fmt.Sprintf("%s drafts from a lookup cache of earlier text", f))
		}
	}
	return out
}
