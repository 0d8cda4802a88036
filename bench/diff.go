package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Differences says what differs between two runs' identities, in the order a reader checks
// "only the build changed": model, draft, llama.cpp commit, patches, plan, llama-server's
// settings, environment, device. Time, mode and labels are left out.
func Differences(a, b Identity) []string {
	var out []string
	same := func(what, x, y string) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %s → %s", what, orNone(x), orNone(y)))
		}
	}
	file := func(f *File) string {
		if f == nil {
			return ""
		}
		return modelName(f.Name) + "@" + shortDigest(f.SHA256)[:12]
	}
	same("model", file(&a.Model), file(&b.Model))
	same("draft", file(a.Draft), file(b.Draft))
	same("llama.cpp", a.LlamaCommit, b.LlamaCommit)
	same("source tree", a.SourceTree, b.SourceTree)
	same("patches", strings.Join(a.Patches, " "), strings.Join(b.Patches, " "))
	same("plan", shortDigest(a.PlanHash)[:12], shortDigest(b.PlanHash)[:12])
	for _, k := range unionKeys(a.Settings, b.Settings) {
		x, okx := a.Settings[k]
		y, oky := b.Settings[k]
		if okx != oky || x != y {
			out = append(out, fmt.Sprintf("%s %s → %s", k, unset(x, okx), unset(y, oky)))
		}
	}
	for _, k := range unionKeys(a.Env, b.Env) {
		x, okx := a.Env[k]
		y, oky := b.Env[k]
		if okx != oky || x != y {
			out = append(out, fmt.Sprintf("%s %s → %s", k, unset(x, okx), unset(y, oky)))
		}
	}
	same("device", a.GPU, b.GPU)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func unset(v string, ok bool) string {
	if !ok {
		return "(unset)"
	}
	if v == "" {
		return `""`
	}
	return v
}

func unionKeys[V any](a, b map[string]V) []string {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return slices.Sorted(maps.Keys(m))
}
