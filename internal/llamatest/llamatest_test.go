package llamatest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestServerRunsWithSidLibrariesOnly(t *testing.T) {
	b := Server(t)
	if !strings.HasPrefix(b.Version, "version: ") {
		t.Errorf("Version = %q, want a llama-server version line", b.Version)
	}
	for _, p := range Packages {
		if b.Packages[p] == "" {
			t.Errorf("Packages[%q] is empty, want the extracted version", p)
		}
	}
	out, err := exec.Command(b.Path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", b.Path, err, out)
	}
	args := append(append([]string{}, b.Argv[1:]...), "--version")
	out2, err := exec.Command(b.Argv[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("Argv --version: %v\n%s", err, out2)
	}
	if string(out) != string(out2) {
		t.Errorf("wrapper printed %q, Argv printed %q, want the same", out, out2)
	}
	if err := checkClosure(context.Background(), b.Root); err != nil {
		t.Error(err)
	}
}

// TestEnsureConcurrentCallersShareOneSysroot downloads into a fresh cache
// from several goroutines at once: the lock must leave one complete sysroot.
func TestEnsureConcurrentCallersShareOneSysroot(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads the packages again; skipped with -short")
	}
	Server(t) // skip or fail early when the network or apt is missing
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n = 3
	bins := make([]Binary, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bins[i], errs[i] = Ensure(ctx, dir)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Ensure #%d: %v", i, errs[i])
		}
		if bins[i].Root != bins[0].Root || bins[i].Version != bins[0].Version {
			t.Errorf("Ensure #%d = %+v, want %+v", i, bins[i], bins[0])
		}
	}
	leftovers, _ := os.ReadDir(dir)
	for _, e := range leftovers {
		if strings.HasPrefix(e.Name(), "root-") || e.Name() == "apt" {
			t.Errorf("%s left behind in the cache", e.Name())
		}
	}
}

func TestStartReportsTheLogOfAServerThatDies(t *testing.T) {
	b := Server(t)
	_, err := start(t, b, "/nonexistent/model.gguf", nil)
	if err == nil {
		t.Fatal("start() with a missing model succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "exited before becoming healthy") || !strings.Contains(err.Error(), "model.gguf") {
		t.Errorf("start() error = %v, want the exit and the log naming the model", err)
	}
}
