package bench

import (
	"context"
	"encoding/csv"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// smiQuery asks nvidia-smi which processes hold a CUDA context on which GPU, and how much of
// its memory each uses.
var smiQuery = []string{"--query-compute-apps=pid,gpu_bus_id,gpu_name,gpu_uuid,used_memory", "--format=csv,noheader"}

// computeApp is one line of nvidia-smi's compute processes.
type computeApp struct {
	PID    int
	Device Device
	// UsedMiB is the GPU memory the process uses, 0 when nvidia-smi does not say ([N/A]).
	UsedMiB int
}

// nvidiaSMI runs nvidia-smi's query of compute processes.
func nvidiaSMI(ctx context.Context) ([]computeApp, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", smiQuery...).Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi %s: %w", strings.Join(smiQuery, " "), err)
	}
	return parseComputeApps(string(out))
}

// parseComputeApps reads nvidia-smi's CSV of compute processes (pid, bus id, name, uuid).
func parseComputeApps(out string) ([]computeApp, error) {
	r := csv.NewReader(strings.NewReader(out))
	r.TrimLeadingSpace = true
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi's compute processes: %w", err)
	}
	var apps []computeApp
	for _, row := range rows {
		if len(row) != 4 && len(row) != 5 {
			return nil, fmt.Errorf("nvidia-smi's compute processes: %q has %d fields, want 5 (pid, bus id, name, uuid, used memory)", strings.Join(row, ","), len(row))
		}
		pid, err := strconv.Atoi(strings.TrimSpace(row[0]))
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi's compute processes: pid %q: %w", row[0], err)
		}
		app := computeApp{PID: pid, Device: Device{Description: row[2], ID: row[1], UUID: row[3]}}
		if len(row) == 5 {
			// "8612 MiB", or "[N/A]" where the driver does not say (then unknown, 0)
			if f := strings.Fields(row[4]); len(f) > 0 {
				app.UsedMiB, _ = strconv.Atoi(f[0])
			}
		}
		apps = append(apps, app)
	}
	return apps, nil
}

// devicesOf are the GPUs the server process (or a process of its group: a loader or wrapper
// that forked) holds a CUDA context on, as nvidia-smi sees them.
func devicesOf(apps []computeApp, serverPID int) []Device {
	var ds []Device
	seen := map[string]bool{}
	for _, a := range apps {
		if a.PID != serverPID && processGroup(a.PID) != serverPID {
			continue
		}
		if !seen[a.Device.UUID+a.Device.ID] {
			seen[a.Device.UUID+a.Device.ID] = true
			ds = append(ds, a.Device)
		}
	}
	return ds
}

// memoryOf is the GPU memory, MiB, the server's processes (its pid, or its process group) use
// over all their devices.
func memoryOf(apps []computeApp, serverPID int) int {
	used := 0
	for _, a := range apps {
		if a.PID == serverPID || processGroup(a.PID) == serverPID {
			used += a.UsedMiB
		}
	}
	return used
}

// processGroup is pid's process group, 0 when unknown (a process of another PID namespace,
// or gone).
func processGroup(pid int) int {
	f := procStat(pid)
	if len(f) < 3 {
		return 0
	}
	g, _ := strconv.Atoi(f[2]) // pgrp, field 5
	return g
}

// procStat is /proc/PID/stat's fields after the command name (state, ppid, pgrp, ...: the 3rd
// field on), nil where it cannot be read. The name, in parentheses, may hold spaces and
// parentheses: the fields start after its last ')'.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
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

// deviceCell names the run's devices for the table: "NVIDIA H200 00000000:18:00.0", "-" for
// none.
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
