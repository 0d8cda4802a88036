package manifest

import (
	"cmp"
	"fmt"
	"strconv"
)

// IntKnob is an integer llama-server knob a bundle leaves out unless given: its flag (the
// same for llbuild bundle as for llama-server), what the flag says, and where it is kept.
type IntKnob struct {
	Flag  string
	Usage string
	Field func(*ServerKnobs) **int
	// Min and Max are the values llama-server takes; Auto, when true, also lets -1 through
	// (llama-server's "pick for me") below Min.
	Min  int
	Auto bool
	Max  int
}

// autoMeans is what -1 means to the knobs where it is not llama-server's own choice.
var autoMeans = map[string]string{"cache-ram": "no limit"}

// MaxKnob and MinKnob bound every integer knob: llama-server reads them as 32-bit ints.
const (
	MaxKnob = 1<<31 - 1
	MinKnob = -1 << 31
)

// IntKnobs are the integer knobs of ServerKnobs, in the order bundle lists its flags.
var IntKnobs = []IntKnob{
	{"ctx-size", "llama-server --ctx-size `N` (0: the model's)", func(k *ServerKnobs) **int { return &k.CtxSize }, 0, false, MaxKnob},
	{"batch-size", "llama-server --batch-size `N`", func(k *ServerKnobs) **int { return &k.BatchSize }, 1, false, MaxKnob},
	{"ubatch-size", "llama-server --ubatch-size `N`", func(k *ServerKnobs) **int { return &k.UBatchSize }, 1, false, MaxKnob},
	{"threads", "llama-server --threads `N` (0 or less: every hardware thread)", func(k *ServerKnobs) **int { return &k.Threads }, MinKnob, false, MaxKnob},
	{"poll", "llama-server --poll `N` (0-100)", func(k *ServerKnobs) **int { return &k.Poll }, 0, false, 100},
	{"n-gpu-layers", "llama-server --n-gpu-layers `N` (-1: auto, -2: all)", func(k *ServerKnobs) **int { return &k.GPULayers }, -2, false, MaxKnob},
	{"parallel", "llama-server --parallel `N` (slots; -1: auto)", func(k *ServerKnobs) **int { return &k.Parallel }, 1, true, MaxKnob},
	{"spec-draft-n-max", "most tokens to draft, --spec-draft-n-max `N` (needs --draft)", func(k *ServerKnobs) **int { return &k.DraftNMax }, 0, false, MaxKnob},
	{"spec-draft-n-min", "fewest tokens to draft, --spec-draft-n-min `N` (needs --draft)", func(k *ServerKnobs) **int { return &k.DraftNMin }, 0, false, MaxKnob},
	{"spec-draft-threads", "draft threads, --spec-draft-threads `N` (needs --draft)", func(k *ServerKnobs) **int { return &k.ThreadsDraft }, MinKnob, false, MaxKnob},
	{"n-gpu-layers-draft", "llama-server --n-gpu-layers-draft `N` (needs --draft)", func(k *ServerKnobs) **int { return &k.GPULayersDraft }, -2, false, MaxKnob},
}

// RecordedKnobs bound the integer knobs every bundle records (ServerKnobs.CacheRAM and
// CtxCheckpoints), which llama-server reads as 32-bit ints: --cache-ram takes -1 (no limit),
// 0 (none) or MiB; --ctx-checkpoints a count.
var RecordedKnobs = []IntKnob{
	{Flag: "cache-ram", Min: 0, Auto: true, Max: MaxKnob},
	{Flag: "ctx-checkpoints", Min: 0, Max: MaxKnob},
}

// Check says what is wrong with v for the knob ("" when llama-server takes it).
func (k IntKnob) Check(v int) string {
	if (v >= k.Min || k.Auto && v == -1) && v <= k.Max {
		return ""
	}
	if k.Auto {
		return fmt.Sprintf("--%s %d: llama-server takes -1 (%s) or %d to %d", k.Flag, v, cmp.Or(autoMeans[k.Flag], "its own choice"), k.Min, k.Max)
	}
	return fmt.Sprintf("--%s %d: llama-server takes %d to %d", k.Flag, v, k.Min, k.Max)
}

// CheckKnobSetting says what is wrong with a setting of a llama-server flag given as text (a
// sweep's value) when the flag is one of IntKnobs ("" when it is not, or the value is fine).
func CheckKnobSetting(flag, value string) string {
	for _, k := range IntKnobs {
		if "--"+k.Flag != flag {
			continue
		}
		if (k.Flag == "n-gpu-layers" || k.Flag == "n-gpu-layers-draft") && (value == "auto" || value == "all") {
			return "" // llama-server reads them as -1 and -2
		}
		v, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Sprintf("%s=%s: not a whole number", flag, value)
		}
		return k.Check(v)
	}
	return ""
}

// DraftKnobs are the flags of the knobs that only a bundle with a draft model takes.
var DraftKnobs = []string{"spec-draft-n-max", "spec-draft-n-min", "spec-draft-p-min", "spec-draft-threads", "n-gpu-layers-draft"}
