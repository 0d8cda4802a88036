package preflight

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/preflight/fatbin"
)

// realContainers splits a real .nv_fatbin section into its containers (one per
// translation unit, plus nvcc's kernel-less one) as raw bytes.
func realContainers(t *testing.T, name string) [][]byte {
	t.Helper()
	data, err := os.ReadFile("fatbin/testdata/realbuild/" + name + ".nv_fatbin")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for off := 0; off < len(data); {
		if data[off] == 0 {
			off++
			continue
		}
		end := off + int(binary.LittleEndian.Uint16(data[off+6:])) + int(binary.LittleEndian.Uint64(data[off+8:]))
		out = append(out, data[off:end])
		off = end
	}
	return out
}

// realEntries returns the raw entries (header and payload) of one real container.
func realEntries(t *testing.T, container []byte) [][]byte {
	t.Helper()
	es, err := fatbin.Parse(container)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range es {
		out = append(out, container[e.Offset:e.Offset+e.HeaderSize+e.PayloadSize])
	}
	return out
}

// unreadable makes a copy of a real container whose compressed payloads are no longer zstd
// frames, as a compression preflight cannot read would be.
func unreadable(t *testing.T, c []byte) []byte {
	t.Helper()
	d := append([]byte{}, c...)
	es, err := fatbin.Parse(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if !e.Compressed {
			t.Fatalf("entry %s is not compressed", e.Arch())
		}
		d[e.Offset+e.HeaderSize] ^= 0xff
	}
	return d
}

// container wraps real entries in a fat binary container header as nvcc writes one.
func container(entries ...[]byte) []byte {
	body := bytes.Join(entries, nil)
	h := make([]byte, 16)
	binary.LittleEndian.PutUint32(h, fatbin.Magic)
	binary.LittleEndian.PutUint16(h[4:], 1)
	binary.LittleEndian.PutUint16(h[6:], 16)
	binary.LittleEndian.PutUint64(h[8:], uint64(len(body)))
	return append(h, body...)
}

func libWithFatbin(t *testing.T, containers ...[]byte) *Binary {
	t.Helper()
	return namedLibWithFatbin(t, "libggml-cuda.so", containers...)
}

func namedLibWithFatbin(t *testing.T, soname string, containers ...[]byte) *Binary {
	t.Helper()
	data := buildELF([]byte{0xc3}, bytes.Join(containers, nil), soname, "libcudart.so.13")
	b, err := ReadBinary("lib/"+soname, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKernelsPerBlob: every container with kernels needs code for the GPU; a cubin for it
// in another translation unit's container does not help. The containers are real nvcc 13.0
// output (testdata/realbuild) put together the way a library of several .cu files is.
func TestKernelsPerBlob(t *testing.T) {
	mixed := realContainers(t, "mixed")           // [no kernels: sm_86 sm_90a sm_120a] [axpy: sm_86 sm_90a sm_120a compute_90]
	plain := realContainers(t, "plain120")        // [no kernels: sm_120 sm_75] [axpy: compute_120 sm_120 sm_75]
	compressed := realContainers(t, "compressed") // [compressed: sm_89 sm_100a] [compressed: compute_89 sm_89 sm_100a]
	nocompress := realContainers(t, "nocompress") // [no kernels: sm_80] [axpy: compute_80 sm_80]
	mixedKernels := realEntries(t, mixed[1])
	for _, c := range []struct {
		name       string
		lib        *Binary
		host       string // compute capability
		driverCUDA string
		want       Status
		says       string
	}{
		{"one translation unit's cubin does not cover another's kernels", libWithFatbin(t, mixed[0], mixed[1], plain[0], plain[1]), "8.6", "13.1", Fail, "CUDA error 209"},
		{"both translation units carry sm_120 code", libWithFatbin(t, mixed[0], mixed[1], plain[0], plain[1]), "12.0", "13.1", OK, "sm_120a cubin"},
		{"a kernel-less container needs no code for the GPU (mixed on 12.1)", libWithFatbin(t, mixed...), "12.1", "13.1", OK, "JIT-compiles compute_90"},
		{"an unreadable compressed container with nothing for the GPU is unknown, never ok", libWithFatbin(t, mixed[0], mixed[1], unreadable(t, compressed[0])), "12.0", "13.1", Unknown, "compressed"},
		{"a compressed container with a cubin for the GPU runs", libWithFatbin(t, compressed...), "8.9", "13.1", OK, "sm_89 cubin"},
		{"compressed containers are read: nothing for the GPU fails", libWithFatbin(t, compressed...), "8.6", "13.1", Fail, "container 2 of 2 (axpy): no kernel for compute capability 8.6 among compute_89 sm_89 sm_100a: CUDA error 209"},
		{"containers with the same verdict are named once, as ranges", libWithFatbin(t, compressed[0], compressed[1], compressed[1], compressed[1], compressed[1], plain[0], plain[1]), "8.6", "13.1", Fail,
			"containers 2-5 of 7 (axpy): no kernel for compute capability 8.6 among compute_89 sm_89 sm_100a: CUDA error 209 (no kernel image is available for execution on the device); container 7 of 7 (axpy): no kernel for compute capability 8.6 among compute_120 sm_120 sm_75: CUDA error 209"},
		{"one verdict for every container with kernels", libWithFatbin(t, compressed[0], compressed[1], compressed[1], compressed[1], compressed[1]), "8.9", "13.1", OK,
			"all 4 containers with kernels, of 5 (axpy; the other 1 defines none): sm_89 cubin runs on compute capability 8.9"},
		{"a compressed kernel-less container needs nothing", libWithFatbin(t, compressed[0], plain[1]), "12.0", "13.1", OK, "container 2 of 2 (axpy): sm_120 cubin"},
		{"the PTX the driver JITs is the highest at most the GPU's, not the first",
			libWithFatbin(t, container(realEntries(t, nocompress[1])[0], realEntries(t, plain[1])[0], realEntries(t, nocompress[1])[1])), "12.1", "13.1", OK, "compute_120 PTX"},
		{"a cubin-less translation unit whose PTX is too new fails even where another's cubin runs",
			libWithFatbin(t, container(mixedKernels[0], mixedKernels[1], mixedKernels[2]), container(mixedKernels[3], realEntries(t, nocompress[1])[1])), "9.0", "12.9", Fail, "CUDA error 222"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(nvidiaHost(c.host, "nvidia", "590.44.01", c.driverCUDA), c.name, Input{Binaries: []*Binary{c.lib}})
			k := verdictFor(r, CheckGPUKernels, "lib/libggml-cuda.so on GPU 0")
			if k == nil || k.Status != c.want || !strings.Contains(k.Reason, c.says) {
				t.Errorf("kernel verdict = %+v, want %s mentioning %q", k, c.want, c.says)
			}
		})
	}
}

// TestKernelsPerGPULibraries: NVIDIA's libraries ship containers for one GPU generation each
// and launch those of the GPU they run on (upstream's CUDA image ran on an H100 with cuBLAS's
// sm_75-only and NCCL's sm_100f-only containers): such containers are not a failure when
// another container has code for the GPU, in those libraries only; with nothing for the GPU
// they still fail, and ggml-cuda's own containers are each needed.
func TestKernelsPerGPULibraries(t *testing.T) {
	mixed := realContainers(t, "mixed")    // [no kernels: sm_86 sm_90a sm_120a] [axpy: sm_86 sm_90a sm_120a compute_90]
	plain := realContainers(t, "plain120") // [no kernels: sm_120 sm_75] [axpy: compute_120 sm_120 sm_75]
	for _, c := range []struct {
		name, soname string
		containers   [][]byte
		want         Status
		says         string
	}{
		{"cuBLASLt's containers for other GPUs", "libcublasLt.so.13", [][]byte{mixed[0], mixed[1], plain[0], plain[1]}, OK,
			"container 4 of 4 holds code only for other GPUs (compute_120 sm_120 sm_75), which libcublasLt.so.13 launches only on those GPUs"},
		{"NCCL's the same", "libnccl.so.2", [][]byte{plain[1], mixed[1]}, OK, "only for other GPUs"},
		{"cuDNN's family by prefix", "libcudnn_ops.so.9", [][]byte{plain[1], mixed[1]}, OK, "only for other GPUs"},
		{"cuBLAS with nothing for the GPU fails", "libcublas.so.13", [][]byte{plain[0], plain[1]}, Fail, "CUDA error 209"},
		{"ggml-cuda needs every container", "libggml-cuda.so", [][]byte{mixed[0], mixed[1], plain[0], plain[1]}, Fail, "container 4 of 4 (axpy): no kernel for compute capability 8.6"},
		{"a library named like one but not NVIDIA's", "libcublas-shim.so", [][]byte{mixed[1], plain[1]}, Fail, "CUDA error 209"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(nvidiaHost("8.6", "nvidia", "590.44.01", "13.1"), c.name, Input{Binaries: []*Binary{namedLibWithFatbin(t, c.soname, c.containers...)}})
			k := verdictFor(r, CheckGPUKernels, "lib/"+c.soname+" on GPU 0")
			if k == nil || k.Status != c.want || !strings.Contains(k.Reason, c.says) {
				t.Errorf("kernel verdict = %+v, want %s mentioning %q", k, c.want, c.says)
			}
		})
	}
}
