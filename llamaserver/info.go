package llamaserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Info is what a llama-server says about itself in /props, /v1/models and /slots.
type Info struct {
	// TotalSlots is its number of slots (--parallel), at least 1.
	TotalSlots int
	// NCtx is a slot's context size.
	NCtx int
	// NVocab is the model's vocabulary size.
	NVocab     int
	ModelPath  string
	ModelAlias string
	// BuildInfo is llama-server's build string ("b10106-1425386fd").
	BuildInfo    string
	BOS, EOS     string
	ChatTemplate string
	// Vision says the server takes images (it was started with a vision projector, --mmproj);
	// MediaMarker is the text that stands for one in a prompt (MediaPrompt).
	Vision      bool
	MediaMarker string
	// Audio says the server takes audio (a projector with an audio encoder).
	Audio bool
	// PromptLogprobs is true when the server advertises native prompt logprobs (a patched
	// llama-server).
	PromptLogprobs bool
	// PromptLogprobsFlat is true when the server can send them as flat number arrays
	// (/props "prompt_logprobs_flat", patch 0008).
	PromptLogprobsFlat bool
	// PromptLogprobsBase64 is true when the flat arrays can come as base64 of their
	// float32 / int32 values (/props "prompt_logprobs_base64", patch 0009).
	PromptLogprobsBase64 bool
	// Series says the server was built with llbuild's patch series: its /props has the
	// prompt_logprobs key (patch 0002), on or off. A request with n_probs > 0 then
	// generates without drafting (0004).
	Series bool
	// Speculative says a slot drafts tokens (GET /slots "speculative").
	Speculative bool
}

// Health says whether GET /health answers 200: the model is loaded.
func (c *Client) Health(ctx context.Context) error {
	resp, err := c.Send(ctx, http.MethodGet, "/health", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Method: http.MethodGet, Path: "/health", Status: resp.StatusCode}
	}
	return nil
}

// ReadInfo reads /props, /v1/models and /slots of a server that is healthy.
func (c *Client) ReadInfo(ctx context.Context) (Info, error) {
	var props Props
	if err := c.GetJSON(ctx, "/props", &props); err != nil {
		return Info{}, fmt.Errorf("reading /props: %w", err)
	}
	var models Models
	if err := c.GetJSON(ctx, "/v1/models", &models); err != nil {
		return Info{}, fmt.Errorf("reading /v1/models: %w", err)
	}
	if len(models.Data) == 0 || models.Data[0].Meta.NVocab <= 0 {
		return Info{}, errors.New("llama-server's /v1/models gives no vocabulary size (meta.n_vocab)")
	}
	info := Info{
		TotalSlots:     max(props.TotalSlots, 1),
		NCtx:           props.Defaults.NCtx,
		NVocab:         models.Data[0].Meta.NVocab,
		ModelPath:      props.ModelPath,
		ModelAlias:     props.ModelAlias,
		BuildInfo:      props.BuildInfo,
		BOS:            props.BOS,
		EOS:            props.EOS,
		ChatTemplate:   props.Template,
		Vision:         props.Modalities.Vision,
		Audio:          props.Modalities.Audio,
		MediaMarker:    props.MediaMarker,
		PromptLogprobs: props.PromptLogprobs != nil && *props.PromptLogprobs,
		Series:         props.PromptLogprobs != nil,
		// Only with prompt logprobs on: flat is a form of them, not a feature of its own.
		PromptLogprobsFlat: props.PromptLogprobs != nil && *props.PromptLogprobs && props.PromptLogprobsFlat,
	}
	info.PromptLogprobsBase64 = info.PromptLogprobsFlat && props.PromptLogprobsB64
	// /slots says whether the server speculates; a server started with --no-slots does not
	// answer it and is taken not to.
	if slots, err := c.Slots(ctx); err == nil {
		for _, sl := range slots {
			info.Speculative = info.Speculative || sl.Speculative
		}
	}
	if info.NCtx == 0 {
		info.NCtx = models.Data[0].Meta.NCtx
	}
	return info, nil
}
