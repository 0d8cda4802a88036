package bench

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llbuild/llbuild/manifest"
)

// A CUDA run records the most GPU memory its server used, from nvidia-smi's compute processes
// (the fake query here stands for nvidia-smi on a GPU machine: 5 fields, "N MiB"), sampled
// from ready to the last row; the table shows it.
func TestRunsRecordTheirPeakGPUMemory(t *testing.T) {
	cuda := func(m *manifest.Manifest) { m.Target = manifest.Target{Name: "h200", Backend: "cuda"} }
	fake := &fakeLlama{flipAt: -1}
	start := func(ctx context.Context, b *Bundle, env []string, log io.Writer) (server, error) {
		return &fakeServer{ts: httptest.NewServer(fake.handler()), fakePID: 4100}, nil
	}
	var calls atomic.Int32
	smi := func(context.Context) ([]computeApp, error) {
		used := "1024 MiB"
		if calls.Add(1) > 1 {
			used = "8612 MiB" // the KV cache and the graphs, once it works
		}
		return parseComputeApps("4100, 00000000:18:00.0, NVIDIA H200, GPU-aaaa, " + used + "\n999, 00000000:18:00.0, NVIDIA H200, GPU-aaaa, 50000 MiB\n")
	}
	defer func(d time.Duration) { gpuMemoryEvery = d }(gpuMemoryEvery)
	gpuMemoryEvery = time.Millisecond
	res, err := Run(context.Background(), []*Bundle{testBundle(cuda)}, Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), Rounds: 1, start: start, computeApps: smi})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	// another process's 50000 MiB on the same GPU is not the server's
	if got := r.Server.GPUMemoryMiB; got != 1024 && got != 8612 {
		t.Fatalf("GPUMemoryMiB = %d, want the server's own (1024 at ready, 8612 later)", got)
	}
	saved, err := os.ReadFile(filepath.Join(r.Dir, "record.json"))
	if err != nil || !strings.Contains(string(saved), `"gpuMemoryMiB": `) {
		t.Errorf("record.json lacks gpuMemoryMiB (%v)", err)
	}
	var table strings.Builder
	if err := res.WriteTable(&table); err != nil || !strings.Contains(table.String(), "GPU memory") || !strings.Contains(table.String(), " GiB") {
		t.Errorf("table:\n%s\nwant a GPU memory column", table.String())
	}
}

// The sampler keeps the peak over its samples, not the last one, and a failed sample is skipped.
func TestGPUMemorySamplerKeepsThePeak(t *testing.T) {
	defer func(d time.Duration) { gpuMemoryEvery = d }(gpuMemoryEvery)
	gpuMemoryEvery = time.Millisecond
	var calls atomic.Int32
	seq := []string{"2000 MiB", "[N/A]", "9000 MiB", "3000 MiB"}
	o := &Options{computeApps: func(context.Context) ([]computeApp, error) {
		i := int(calls.Add(1)) - 1
		if i == 1 {
			return nil, io.ErrUnexpectedEOF
		}
		return parseComputeApps("77, 00000000:18:00.0, NVIDIA H200, GPU-aaaa, " + seq[min(i, len(seq)-1)] + "\n")
	}}
	b := testBundle(func(m *manifest.Manifest) { m.Target = manifest.Target{Name: "h200", Backend: "cuda"} })
	stop := o.sampleGPUMemory(context.Background(), b, 77, 100)
	for calls.Load() < 6 {
		time.Sleep(time.Millisecond)
	}
	if got := stop(); got != 9000 {
		t.Errorf("peak %d, want 9000", got)
	}
	cpu := testBundle()
	if got := o.sampleGPUMemory(context.Background(), cpu, 77, 0)(); got != 0 {
		t.Errorf("a CPU bundle's peak %d, want 0 (not sampled)", got)
	}
}
