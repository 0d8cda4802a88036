package fatbin

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestBlobKernels reads which containers of real nvcc 13.0 builds hold kernels. nvcc -shared
// emits two containers for one kernel.cu: the first (no .text.* section in its cubins) holds
// no kernel; the second defines axpy. Compressed payloads (zstd, -Xfatbin=-compress-all)
// are read as well as plain ones.
func TestBlobKernels(t *testing.T) {
	for _, c := range []struct {
		file string
		want string // per blob: kernel names, "-" for none, "?" for unknown
	}{
		{"mixed", "- axpy"},
		{"plain120", "- axpy"},
		{"family", "- axpy"},
		{"nocompress", "- axpy"},
		{"compressed", "- axpy"},
	} {
		t.Run(c.file, func(t *testing.T) {
			var got []string
			for _, b := range Blobs(realEntries(t, c.file)) {
				names, known := b.Kernels()
				switch {
				case !known:
					got = append(got, "?")
				case len(names) == 0:
					got = append(got, "-")
				default:
					got = append(got, strings.Join(names, ","))
				}
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("blob kernels = %q, want %q", strings.Join(got, " "), c.want)
			}
		})
	}
}

// TestPTXKernelsRead: an uncompressed PTX entry names its kernels by .entry.
func TestPTXKernelsRead(t *testing.T) {
	var got []string
	for _, e := range realEntries(t, "nocompress") {
		got = append(got, fmt.Sprintf("%s:%v:%v", e.Arch(), e.Inspected, e.Kernels))
	}
	want := "[sm_80:true:[] compute_80:true:[axpy] sm_80:true:[axpy]]"
	if fmt.Sprint(got) != want {
		t.Errorf("entries = %v, want %v", got, want)
	}
}

// TestBlobSelect names the code the driver uses for a device: a cubin that runs as it is,
// else the PTX of the highest compute capability at most the device's.
func TestBlobSelect(t *testing.T) {
	blob := Blob{Entries: []Entry{
		{Kind: PTX, SM: 80}, {Kind: Cubin, SM: 86}, {Kind: PTX, SM: 120}, {Kind: PTX, SM: 90}, {Kind: Cubin, SM: 120, ArchSpecific: true},
	}}
	for _, c := range []struct{ dev, want string }{
		{"8.6", "sm_86"},
		{"8.9", "sm_86"},
		{"9.0", "compute_90"},
		{"12.1", "compute_120"},
		{"12.0", "sm_120a"},
		{"7.5", ""},
	} {
		dev, err := ParseCC(c.dev)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if e, ok := blob.Select(dev); ok {
			got = e.Arch()
		}
		if got != c.want {
			t.Errorf("Select(%s) = %q, want %q", c.dev, got, c.want)
		}
	}
}

// TestCompressedPayloadsRead: nvcc 13's compressed payloads are zstd frames; read, they name
// the same kernels as the uncompressed build of the same kernel.cu. A payload that does not
// decompress (damaged, or another format) leaves its blob's kernels unknown, not "none".
func TestCompressedPayloadsRead(t *testing.T) {
	var got []string
	for _, e := range realEntries(t, "compressed") {
		if !e.Compressed || !e.Decompressed || !e.Inspected {
			t.Errorf("%s: compressed %v, decompressed %v, inspected %v; want all", e.Arch(), e.Compressed, e.Decompressed, e.Inspected)
		}
		got = append(got, fmt.Sprintf("%s:%v", e.Arch(), e.Kernels))
	}
	want := "[sm_89:[] sm_100a:[] compute_89:[axpy] sm_89:[axpy] sm_100a:[axpy]]"
	if fmt.Sprint(got) != want {
		t.Errorf("kernels of the compressed build = %v, want %v", got, want)
	}

	data, err := os.ReadFile("testdata/realbuild/compressed.nv_fatbin")
	if err != nil {
		t.Fatal(err)
	}
	for _, damage := range []struct {
		name string
		at   int // into each payload
		b    byte
	}{
		{"not a zstd frame", 0, 0x29},
		{"a damaged frame", 6, 0xff},
	} {
		t.Run(damage.name, func(t *testing.T) {
			d := append([]byte{}, data...)
			for _, e := range realEntries(t, "compressed") {
				d[e.Offset+e.HeaderSize+damage.at] ^= damage.b
			}
			es, err := Parse(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range Blobs(es) {
				if names, known := b.Kernels(); known {
					t.Errorf("blob %d of a damaged build: kernels %v known, want unknown", b.Index, names)
				}
			}
		})
	}
}
