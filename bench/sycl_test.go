package bench

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/manifest"
)

// fakeSysfs writes a /sys/class/drm of an AMD card and two Intel Arc Pro B70s (e20b) in the
// order the kernel numbered them, which is not their PCI order; it stands for a B70 lab's host.
func fakeSysfs(t *testing.T) string {
	root := t.TempDir()
	for _, c := range []struct{ card, vendor, device, slot string }{
		{"card0", "0x1002", "0x744c", "0000:0a:00.0"},
		{"card1", "0x8086", "0xe20b", "0000:83:00.0"},
		{"card2", "0x8086", "0xe20b", "0000:03:00.0"},
	} {
		dev := filepath.Join(root, "sys", "class", "drm", c.card, "device")
		if err := os.MkdirAll(dev, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"vendor": c.vendor + "\n", "device": c.device + "\n", "uevent": "DRIVER=xe\nPCI_SLOT_NAME=" + c.slot + "\n"} {
			if err := os.WriteFile(filepath.Join(dev, name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// a connector, not a card
	if err := os.MkdirAll(filepath.Join(root, "sys", "class", "drm", "card1-DP-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// A SYCL run names its device as a CUDA run does: level_zero:N is the Nth Intel GPU in PCI
// order, named by PCI id and bus id.
func TestSYCLRunsNameTheirDevice(t *testing.T) {
	root := fakeSysfs(t)
	if got := syclDevices(root, ""); len(got) != 2 || got[0].ID != "0000:03:00.0" || got[1].ID != "0000:83:00.0" || got[0].Description != "Intel GPU 8086:e20b" {
		t.Errorf("syclDevices() = %+v, want the two Intel GPUs in PCI order", got)
	}
	if got := syclDevices(root, "1"); len(got) != 1 || got[0].ID != "0000:83:00.0" {
		t.Errorf("level_zero:1 = %+v, want the second in PCI order", got)
	}
	if got := syclDevices(root, "2"); got != nil {
		t.Errorf("level_zero:2 = %+v, want none: there are two", got)
	}
	sycl := func(m *manifest.Manifest) { m.Target = manifest.Target{Name: "b70", Backend: "sycl"} }
	fake := &fakeLlama{flipAt: -1}
	start := func(ctx context.Context, b *Bundle, env []string, log io.Writer) (server, error) {
		return &fakeServer{ts: httptest.NewServer(fake.handler()), fakePID: 77}, nil
	}
	a, b := testBundle(sycl), testBundle(sycl, func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, "--poll", "0") })
	b.Name = "b2"
	res, err := Run(context.Background(), []*Bundle{a, b}, Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), Rounds: 1,
		GPUs: []string{"0", "1"}, start: start, sysRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"0000:03:00.0", "0000:83:00.0"} {
		if d := res.Runs[i].Server.Devices; len(d) != 1 || d[0].ID != want {
			t.Errorf("run %d on level_zero:%d: devices %+v, want %s", i, i, d, want)
		}
	}
}
