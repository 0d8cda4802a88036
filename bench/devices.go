package bench

import (
	"bufio"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// usingDevice is llama.cpp's line for each device a model is loaded on (src/llama.cpp,
// llama_model_load_from_file_impl): "using device CUDA0 (NVIDIA H200) (0000:18:00.0) - 140362
// MiB free", the id "unknown id" where the backend has none.
var usingDevice = regexp.MustCompile(`using device (\S+) \((.*)\) \(([^()]*)\) - (\d+) MiB free`)

// devicesInLog reads the devices a llama-server's log says the model was loaded on.
func devicesInLog(r io.Reader) []Device {
	var ds []Device
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		m := usingDevice.FindStringSubmatch(sc.Text())
		if m == nil || seen[m[1]] { // a restarted server logs its devices again
			continue
		}
		seen[m[1]] = true
		free, _ := strconv.Atoi(m[4])
		d := Device{Name: m[1], Description: m[2], ID: m[3], FreeMiB: free}
		if d.ID == "unknown id" {
			d.ID = ""
		}
		ds = append(ds, d)
	}
	return ds
}

// sharedDevices names the devices that runs given different --gpus entries were loaded on
// alike: their lanes shared a GPU, so their figures are not independent. The map is device id
// to the entries that used it.
func sharedDevices(runs []*Record) map[string][]string {
	byID := map[string]map[string]bool{}
	for _, r := range runs {
		if r == nil || r.Identity.GPU == "" {
			continue
		}
		for _, d := range r.Server.Devices {
			if d.ID == "" {
				continue
			}
			if byID[d.ID] == nil {
				byID[d.ID] = map[string]bool{}
			}
			byID[d.ID][r.Identity.GPU] = true
		}
	}
	shared := map[string][]string{}
	for id, gpus := range byID {
		if len(gpus) > 1 {
			shared[id] = slices.Sorted(maps.Keys(gpus))
		}
	}
	return shared
}

// deviceCell names the run's devices for the table: "NVIDIA H200 0000:18:00.0", "-" for none.
func (s ServerInfo) deviceCell() string {
	if len(s.Devices) == 0 {
		return "-"
	}
	var parts []string
	for _, d := range s.Devices {
		parts = append(parts, strings.TrimSpace(d.Description+" "+d.ID))
	}
	return strings.Join(parts, ", ")
}
