package bench

import (
	"errors"
	"fmt"
	"strings"
)

// Modes of a run: a screen is cheap and only finds candidates; only a full run can be
// promoted to a campaign's record.
const (
	ModeScreen = "screen"
	ModeFull   = "full"
)

// Prompt kinds.
const (
	// PromptFilledLong is a deterministic filler text cut to exactly PromptTokens tokens.
	PromptFilledLong = "filled-long"
	// PromptShort is a one-sentence prompt.
	PromptShort = "short"
	// PromptFile is the text of a file, used whole.
	PromptFile = "file"
)

// Protocol is how a run measures: how many canary checks, how many rows, which prompt and
// how many tokens each row generates.
type Protocol struct {
	// Mode is ModeScreen or ModeFull.
	Mode string `json:"mode"`
	// Canaries is the number of canary checks (greedy outputs compared with their reference).
	Canaries int `json:"canaries"`
	// CanaryTokens is how many tokens each canary check generates.
	CanaryTokens int `json:"canaryTokens"`
	// Rows is the number of measured responses: row 0 fresh, rows 1..Rows-1 repeating its prompt.
	Rows int `json:"rows"`
	// Prompt is PromptFilledLong, PromptShort or PromptFile.
	Prompt string `json:"prompt"`
	// PromptTokens is the prompt's length in tokens for PromptFilledLong.
	PromptTokens int `json:"promptTokens,omitempty"`
	// PromptFile is the file of PromptFile; PromptText its text.
	PromptFile string `json:"promptFile,omitempty"`
	PromptText string `json:"-"`
	// Generate is the number of tokens each row generates, end of sequence ignored.
	Generate int `json:"generate"`
	// Chat sends the rows' prompt as a chat turn: the prompt text as one user message (or, for a
	// prompt file holding a JSON array of messages, those messages) rendered by the server's own
	// chat template (/apply-template), as an app calling /v1/chat/completions sends it.
	Chat bool `json:"chat,omitempty"`
	// Images is how many images the chat messages of the prompt file hold (image_url parts):
	// each is sent to the server's projector with the rows' prompt, its tokens part of the
	// prefill. Runs with images are a protocol of their own.
	Images int `json:"images,omitempty"`
}

// DefaultProtocol returns the lab's defaults for mode: a screen runs 128 canary checks and
// one row, a full run 384 checks and 8 rows; both use a filled-long prompt of 588 tokens
// generating 512.
func DefaultProtocol(mode string) (Protocol, error) {
	p := Protocol{Mode: mode, CanaryTokens: 16, Prompt: PromptFilledLong, PromptTokens: 588, Generate: 512}
	switch mode {
	case ModeScreen:
		p.Canaries, p.Rows = 128, 1
	case ModeFull:
		p.Canaries, p.Rows = 384, 8
	default:
		return Protocol{}, fmt.Errorf("mode %q: use %s or %s", mode, ModeScreen, ModeFull)
	}
	return p, nil
}

// FullMode is the full-mode protocol for a sweep's leader measured with p's settings: full
// mode's canaries and rows, p's prompt, generation, canary tokens and chat, and p's canaries
// too when keepCanaries (the user gave them).
func (p Protocol) FullMode(keepCanaries bool) Protocol {
	fp, _ := DefaultProtocol(ModeFull)
	fp.Prompt, fp.PromptTokens, fp.PromptFile, fp.PromptText = p.Prompt, p.PromptTokens, p.PromptFile, p.PromptText
	fp.Generate, fp.CanaryTokens, fp.Chat, fp.Images = p.Generate, p.CanaryTokens, p.Chat, p.Images
	if keepCanaries {
		fp.Canaries = p.Canaries
	}
	return fp
}

// The most rounds, rows and canary checks a bench takes: far past any campaign's need (a run
// of MaxRows rows is hours on a GPU), and small enough that a typo's schedule cannot fill the
// memory before the first run starts.
const (
	MaxRounds   = 1000
	MaxRows     = 1000
	MaxCanaries = 100000
)

// Validate reports every problem of p together.
func (p Protocol) Validate() error {
	var errs []error
	if p.Mode != ModeScreen && p.Mode != ModeFull {
		errs = append(errs, fmt.Errorf("mode %q: use %s or %s", p.Mode, ModeScreen, ModeFull))
	}
	if p.Canaries < 0 || p.Canaries > MaxCanaries {
		errs = append(errs, fmt.Errorf("canaries %d: must be 0 to %d", p.Canaries, MaxCanaries))
	}
	if p.Canaries > 0 && p.CanaryTokens < 1 {
		errs = append(errs, fmt.Errorf("canary tokens %d: must be at least 1", p.CanaryTokens))
	}
	if p.Rows < 1 || p.Rows > MaxRows {
		errs = append(errs, fmt.Errorf("rows %d: must be 1 to %d (row 0 is the headline)", p.Rows, MaxRows))
	}
	if p.Generate < 2 {
		errs = append(errs, fmt.Errorf("generate %d: must be at least 2 tokens to time decoding", p.Generate))
	}
	switch p.Prompt {
	case PromptFilledLong:
		if p.PromptTokens < 8 {
			errs = append(errs, fmt.Errorf("prompt tokens %d: must be at least 8", p.PromptTokens))
		}
	case PromptShort:
	case PromptFile:
		if strings.TrimSpace(p.PromptText) == "" {
			errs = append(errs, fmt.Errorf("prompt file %q is empty", p.PromptFile))
		}
	default:
		errs = append(errs, fmt.Errorf("prompt %q: use %s, %s or a --prompt-file", p.Prompt, PromptFilledLong, PromptShort))
	}
	if p.Chat && p.Prompt == PromptFile {
		images, err := chatImages(p.PromptText)
		for _, e := range unjoin(err) {
			errs = append(errs, fmt.Errorf("prompt file %s: %w", p.PromptFile, e))
		}
		if err == nil && len(images) != p.Images {
			errs = append(errs, fmt.Errorf("images %d: the prompt file's messages hold %d", p.Images, len(images)))
		}
	} else if p.Images != 0 {
		errs = append(errs, fmt.Errorf("images %d: only the messages of a --chat prompt file hold images", p.Images))
	}
	return errors.Join(errs...)
}

// unjoin is the errors errors.Join joined into err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

// key says which runs' figures are comparable: same prompt (and images) and generation length.
func (p Protocol) key() string {
	if p.Chat {
		q := p
		q.Chat = false
		return "chat-" + q.key()
	}
	switch p.Prompt {
	case PromptFilledLong:
		return fmt.Sprintf("%s-p%d-g%d", p.Prompt, p.PromptTokens, p.Generate)
	case PromptFile:
		if p.Images > 0 {
			return fmt.Sprintf("file:%s-img%d-g%d", shortHash([]byte(p.PromptText)), p.Images, p.Generate)
		}
		return fmt.Sprintf("file:%s-g%d", shortHash([]byte(p.PromptText)), p.Generate)
	}
	return fmt.Sprintf("%s-g%d", p.Prompt, p.Generate)
}

// filler is the text a filled-long prompt is cut from: plain prose with numbered entries.
const filler = "The workshop log records each measurement in order. Entry %d: the operator checked the " +
	"gauge, noted the temperature, wrote the reading beside the previous one and compared the two " +
	"before moving on to the next station along the line. "

// fillerText returns filler paragraphs of at least 8 bytes per wanted token, more than any
// tokenizer needs to give that many tokens; the prompt is cut to length after tokenizing.
func fillerText(tokens int) string {
	var b strings.Builder
	for i := 1; b.Len() < 8*tokens+64; i++ {
		fmt.Fprintf(&b, filler, i)
	}
	return b.String()
}

// shortPrompt is the short mode's prompt.
const shortPrompt = "Write a short story about a lighthouse keeper who finds a message in a bottle."

// canaryPrompts are the canaries' fixed prompts; check i uses prompt i mod len.
var canaryPrompts = []string{
	"The capital of France is",
	"Once upon a time, in a small village,",
	"def fibonacci(n):\n",
	"The three primary colors are",
	"Water boils at a temperature of",
	"In the beginning of the twentieth century,",
	"A list of prime numbers: 2, 3, 5,",
	"The quick brown fox",
}

// Key says which runs' figures are comparable (prompt, generation, chat) with the mode, canaries
// and rows: two measurements with the same Key were taken the same way.
func (p Protocol) Key() string {
	return fmt.Sprintf("%s-%s-c%d-t%d-r%d", p.key(), p.Mode, p.Canaries, p.CanaryTokens, p.Rows)
}
