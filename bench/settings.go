package bench

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// Settings are a bench's options as llbuild bench's flags give them, before the mode's
// defaults fill them in: Canaries and Rows below 0 take the mode's, PromptFile names a file
// whose text is the prompt, GPUs is a list such as "0,1,2,3". The judge, the invocation and
// where progress goes are the caller's to add.
type Settings struct {
	Mode                           string
	Canaries, CanaryTokens, Rows   int
	Prompt, PromptFile             string
	PromptTokens, Generate, Rounds int
	Chat                           bool
	GPUs, Dir, Name, Note          string
	ReadyTimeout                   time.Duration
}

// Options is the bench's Options for s: the mode's protocol with the settings given (the
// prompt's token count kept only for the filled-long prompt), the devices and the name
// checked. Its errors name the flag: a mode or a prompt file that cannot be used alone, the
// protocol's and the scheduling's problems all together, then a name that cannot head a label.
func (s Settings) Options() (Options, error) {
	p, err := DefaultProtocol(s.Mode)
	if err != nil {
		return Options{}, fmt.Errorf("--%w", err)
	}
	if s.Canaries >= 0 {
		p.Canaries = s.Canaries
	}
	if s.Rows >= 0 {
		p.Rows = s.Rows
	}
	p.CanaryTokens, p.Generate, p.Prompt, p.PromptTokens, p.Chat = s.CanaryTokens, s.Generate, s.Prompt, s.PromptTokens, s.Chat
	if s.PromptFile != "" {
		b, err := os.ReadFile(s.PromptFile)
		if err != nil {
			return Options{}, fmt.Errorf("--prompt-file: %w", err)
		}
		p.Prompt, p.PromptFile, p.PromptText = PromptFile, s.PromptFile, string(b)
		if p.Chat {
			images, _ := chatImages(p.PromptText) // its problems are Validate's to report
			p.Images = len(images)
		}
	}
	if p.Prompt != PromptFilledLong {
		p.PromptTokens = 0
	}
	var problems []string
	if s.Rounds < 0 {
		problems = append(problems, fmt.Sprintf("--rounds %d: must be 1 or more", s.Rounds))
	}
	if s.Rounds > MaxRounds {
		problems = append(problems, fmt.Sprintf("--rounds %d: at most %d", s.Rounds, MaxRounds))
	}
	if s.ReadyTimeout < 0 {
		problems = append(problems, fmt.Sprintf("--ready-timeout %v: must be more than 0 (or 0 for the default, 10 minutes)", s.ReadyTimeout))
	}
	gpus, err := parseGPUs(s.GPUs)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if err := p.Validate(); err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	if len(problems) > 0 {
		return Options{}, fmt.Errorf("bench: %s", strings.Join(problems, "; "))
	}
	for _, r := range s.Name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '=') {
			return Options{}, fmt.Errorf("--label %q: use letters, digits, '.', '_' and '=' (it names the runs' directories)", s.Name)
		}
	}
	return Options{Protocol: p, Dir: s.Dir, Rounds: s.Rounds, GPUs: gpus, ReadyTimeout: s.ReadyTimeout, Name: s.Name, Note: s.Note}, nil
}

// parseGPUs reads a list of devices: distinct device numbers separated by commas, spaces around
// them ignored; an empty list is no device. A number may name a sub-device (1.0, Level Zero's
// tiles); a CUDA device may also be named by its UUID (GPU-..., MIG-..., as nvidia-smi -L prints
// it). Anything else is refused: CUDA_VISIBLE_DEVICES stops at an entry it cannot read and shows
// the run no device at all, so a typo would bench the CPU.
var deviceName = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?|(GPU|MIG)-[0-9A-Za-z/-]+)$`)

func parseGPUs(list string) ([]string, error) {
	list = strings.TrimSpace(list)
	if list == "" {
		return nil, nil
	}
	var gpus []string
	seen := map[string]bool{}
	for _, d := range strings.Split(list, ",") {
		d = strings.TrimSpace(d)
		if !deviceName.MatchString(d) || seen[d] {
			return nil, fmt.Errorf("--gpus %q: give distinct device numbers separated by commas (0,1,2,3), or CUDA UUIDs as nvidia-smi -L prints them (GPU-...)", list)
		}
		seen[d] = true
		gpus = append(gpus, d)
	}
	return gpus, nil
}
