package targets

import (
	"errors"
	"reflect"
	"testing"
)

// TestLoadDecodesCUDASettings: a loaded CUDA target carries its toolkit, architectures and the
// image's requirement as values; a copy with other architectures is decoded again, and
// settings edited after loading are refused rather than read stale.
func TestLoadDecodesCUDASettings(t *testing.T) {
	tg, err := Load("olares-one")
	if err != nil {
		t.Fatal(err)
	}
	d, err := tg.Build.CUDA.Decoded()
	if err != nil {
		t.Fatalf("Decoded() = %v", err)
	}
	if got, want := d.Toolkit, []int{13, 1, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("Decoded().Toolkit = %v, want %v", got, want)
	}
	if got, want := d.Architectures, []CUDAArch{{SM: 120, Specific: true}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Decoded().Architectures = %+v, want %+v", got, want)
	}
	if got, want := d.RequireCUDA, "cuda>=13.1"; got != want {
		t.Errorf("Decoded().RequireCUDA = %q, want %q", got, want)
	}

	edited := *tg.Build.CUDA
	edited.Toolkit = "13.3.0"
	if _, err := edited.Decoded(); !errors.Is(err, ErrNotDecoded) {
		t.Errorf("Decoded() of settings edited after loading = %v, want ErrNotDecoded", err)
	}
	var none *CUDA
	if _, err := none.Decoded(); !errors.Is(err, ErrNotDecoded) {
		t.Errorf("Decoded() without build.cuda = %v, want ErrNotDecoded", err)
	}

	multi, err := tg.WithCUDAArchitectures([]string{"120", "120-virtual"})
	if err != nil {
		t.Fatal(err)
	}
	md, err := multi.Build.CUDA.Decoded()
	if err != nil {
		t.Fatalf("Decoded() after WithCUDAArchitectures = %v", err)
	}
	if got, want := md.Architectures, []CUDAArch{{SM: 120, Specific: true}, {SM: 120, Specific: true, Virtual: true}}; !reflect.DeepEqual(got, want) {
		t.Errorf("WithCUDAArchitectures().Decoded().Architectures = %+v, want %+v", got, want)
	}
	if _, err := tg.Build.CUDA.Decoded(); err != nil {
		t.Errorf("the original's Decoded() after WithCUDAArchitectures = %v, want it unchanged", err)
	}
	if _, err := tg.WithCUDAArchitectures([]string{"86"}); err == nil {
		t.Errorf("WithCUDAArchitectures(86) on a compute capability 12.0 GPU = nil, want an error")
	}
}
