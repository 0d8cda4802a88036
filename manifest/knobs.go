package manifest

// IntKnob is an integer llama-server knob a bundle leaves out unless given: its flag (the
// same for llbuild bundle as for llama-server), what the flag says, and where it is kept.
type IntKnob struct {
	Flag  string
	Usage string
	Field func(*ServerKnobs) **int
}

// IntKnobs are the integer knobs of ServerKnobs, in the order bundle lists its flags.
var IntKnobs = []IntKnob{
	{"ctx-size", "llama-server --ctx-size `N`", func(k *ServerKnobs) **int { return &k.CtxSize }},
	{"batch-size", "llama-server --batch-size `N`", func(k *ServerKnobs) **int { return &k.BatchSize }},
	{"ubatch-size", "llama-server --ubatch-size `N`", func(k *ServerKnobs) **int { return &k.UBatchSize }},
	{"threads", "llama-server --threads `N`", func(k *ServerKnobs) **int { return &k.Threads }},
	{"poll", "llama-server --poll `N` (0-100)", func(k *ServerKnobs) **int { return &k.Poll }},
	{"n-gpu-layers", "llama-server --n-gpu-layers `N`", func(k *ServerKnobs) **int { return &k.GPULayers }},
	{"parallel", "llama-server --parallel `N` (slots)", func(k *ServerKnobs) **int { return &k.Parallel }},
	{"spec-draft-n-max", "most tokens to draft, --spec-draft-n-max `N` (needs --draft)", func(k *ServerKnobs) **int { return &k.DraftNMax }},
	{"spec-draft-n-min", "fewest tokens to draft, --spec-draft-n-min `N` (needs --draft)", func(k *ServerKnobs) **int { return &k.DraftNMin }},
	{"spec-draft-threads", "draft threads, --spec-draft-threads `N` (needs --draft)", func(k *ServerKnobs) **int { return &k.ThreadsDraft }},
	{"n-gpu-layers-draft", "llama-server --n-gpu-layers-draft `N` (needs --draft)", func(k *ServerKnobs) **int { return &k.GPULayersDraft }},
}

// DraftKnobs are the flags of the knobs that only a bundle with a draft model takes.
var DraftKnobs = []string{"spec-draft-n-max", "spec-draft-n-min", "spec-draft-p-min", "spec-draft-threads", "n-gpu-layers-draft"}
