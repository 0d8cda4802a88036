package preflight

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/llbuild/llbuild/targets"
)

// An aarch64 build copied to an x86-64 host cannot run at all: that is a certain failure, not
// an unknown, wherever llbuild runs (a 32-bit x86 binary, which may run, and a GPU's code
// object stay unknown).
func TestAForeignArchitectureWouldFail(t *testing.T) {
	data, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		machine uint16
		want    Status
	}{{183, Fail}, {243, Fail}, {3, Unknown}, {190, Unknown}} { // EM_AARCH64, EM_RISCV, EM_386, EM_CUDA
		elfData := bytes.Clone(data)
		binary.LittleEndian.PutUint16(elfData[18:], tc.machine)
		b, err := ReadBinary("bin/llama-server", bytes.NewReader(elfData))
		if err != nil {
			t.Fatal(err)
		}
		r := Check(targets.Host{CPU: targets.CPU{Features: []targets.Feature{targets.AVX2}}}, "rtx3090", Input{Name: "x", Binaries: []*Binary{b}})
		var got *Verdict
		for i, v := range r.Verdicts {
			if v.Check == CheckCPU && v.Subject == "bin/llama-server" {
				got = &r.Verdicts[i]
			}
		}
		if got == nil || got.Status != tc.want {
			t.Errorf("a %s binary: %+v, want %v", b.Machine, got, tc.want)
		}
	}
}
