package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// syclDevices names the Intel GPU a SYCL run was given, from sysfs: the DRM cards whose PCI
// vendor is Intel, in PCI bus order (the order Level Zero numbers them in, as
// ONEAPI_DEVICE_SELECTOR=level_zero:N counts them), by PCI id and bus id. gpu is the --gpus
// entry ("" when the run was given none: every Intel GPU is listed). root is "/" but for tests.
func syclDevices(root, gpu string) []Device {
	if root == "" {
		root = "/"
	}
	cards, _ := filepath.Glob(filepath.Join(root, "sys", "class", "drm", "card[0-9]*"))
	var devs []Device
	seen := map[string]bool{}
	for _, c := range cards {
		if strings.Contains(filepath.Base(c), "-") { // card0-DP-1: a connector, not a card
			continue
		}
		dev := filepath.Join(c, "device")
		vendor, _ := os.ReadFile(filepath.Join(dev, "vendor"))
		if strings.TrimSpace(string(vendor)) != "0x8086" {
			continue
		}
		id, _ := os.ReadFile(filepath.Join(dev, "device"))
		slot := ""
		if ue, err := os.ReadFile(filepath.Join(dev, "uevent")); err == nil {
			for _, l := range strings.Split(string(ue), "\n") {
				if v, ok := strings.CutPrefix(l, "PCI_SLOT_NAME="); ok {
					slot = strings.TrimSpace(v)
				}
			}
		}
		if slot == "" || seen[slot] {
			continue
		}
		seen[slot] = true
		devs = append(devs, Device{Description: fmt.Sprintf("Intel GPU 8086:%s", strings.TrimPrefix(strings.TrimSpace(string(id)), "0x")), ID: slot})
	}
	slices.SortFunc(devs, func(a, b Device) int { return strings.Compare(a.ID, b.ID) })
	if gpu == "" {
		return devs
	}
	n, err := strconv.Atoi(gpu)
	if err != nil || n < 0 || n >= len(devs) {
		return nil
	}
	return []Device{devs[n]}
}
