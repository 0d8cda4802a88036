package shim

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/internal/llamatest"
)

// openAIVersion is the npm openai package the integration test installs.
const openAIVersion = "7"

// TestOfficialOpenAINodeClient installs the npm package openai and runs
// testdata/openai_client.mjs against a shim with an API key.
func TestOfficialOpenAINodeClient(t *testing.T) {
	if testing.Short() {
		t.Skip("installs an npm package; skipped with -short")
	}
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		llamatest.Unavailable(t, "node and npm are needed to run the OpenAI Node client")
	}
	dir := npmCacheDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "openai@"+openAIVersion).CombinedOutput()
		if err != nil {
			llamatest.Unavailable(t, "npm install openai: "+err.Error()+"\n"+string(out))
		}
	}
	script, err := filepath.Abs("testdata/openai_client.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// Node resolves "openai" from the script's directory upwards, so the
	// script runs from a copy beside node_modules.
	run := filepath.Join(dir, "openai_client.mjs")
	data, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(run, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ts := ownShim(t, Options{APIKey: "test-key", ModelName: "tiny"})
	out, err := exec.CommandContext(ctx, node, run, ts.URL+"/v1", "test-key").CombinedOutput()
	if err != nil {
		t.Fatalf("node client: %v\n%s", err, out)
	}
	t.Logf("node client: %s", strings.TrimSpace(string(out)))
	// The same client with a wrong key must fail.
	if out, err := exec.CommandContext(ctx, node, run, ts.URL+"/v1", "wrong-key").CombinedOutput(); err == nil {
		t.Errorf("node client with a wrong API key succeeded: %s", out)
	}
}

func npmCacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "llbuild-test", "npm-openai-"+openAIVersion)
}
