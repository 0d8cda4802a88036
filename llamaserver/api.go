package llamaserver

import "encoding/json"

// CompletionRequest is a body for llama-server's native POST /completion.
type CompletionRequest struct {
	Prompt   any `json:"prompt"` // text, token ids or a MediaPrompt
	NPredict int `json:"n_predict"`
	// NProbs > 0 asks for the generated tokens' probabilities; it also makes a server with
	// llbuild's series generate without drafting (patch 0004).
	NProbs            int          `json:"n_probs,omitempty"`
	PostSamplingProbs bool         `json:"post_sampling_probs"`
	Temperature       *float64     `json:"temperature,omitempty"`
	TopP              *float64     `json:"top_p,omitempty"`
	TopK              *int         `json:"top_k,omitempty"`
	Samplers          []string     `json:"samplers,omitempty"`
	Seed              *int64       `json:"seed,omitempty"`
	Stop              []string     `json:"stop,omitempty"`
	LogitBias         [][2]float64 `json:"logit_bias,omitempty"`
	PresencePenalty   *float64     `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64     `json:"frequency_penalty,omitempty"`
	MinP              *float64     `json:"min_p,omitempty"`
	TypicalP          *float64     `json:"typical_p,omitempty"`
	RepeatPenalty     *float64     `json:"repeat_penalty,omitempty"`
	IgnoreEOS         bool         `json:"ignore_eos,omitempty"`
	CachePrompt       bool         `json:"cache_prompt"`
	// IDSlot is the slot to run in; -1 lets llama-server choose.
	IDSlot         int      `json:"id_slot"`
	ReturnTokens   bool     `json:"return_tokens"`
	Stream         bool     `json:"stream"`
	ResponseFields []string `json:"response_fields,omitempty"`
	// PromptLogprobs asks a server with native prompt logprobs (patch 0002) for the
	// prompt's, with this many alternatives.
	PromptLogprobs *int `json:"prompt_logprobs,omitempty"`
	// PromptLogprobsFlat asks for them as flat number arrays (patch 0008).
	PromptLogprobsFlat bool `json:"prompt_logprobs_flat,omitempty"`
	// PromptLogprobsBase64 asks for the flat arrays as base64 (patch 0009).
	PromptLogprobsBase64 bool `json:"prompt_logprobs_base64,omitempty"`
}

// MediaPrompt is a /completion prompt with images (or other media) for a server started with a
// projector (--mmproj): Text holds the server's media marker (Info.MediaMarker) once per item
// of Media, in order, and each item is the file's bytes in base64, not a data: URL.
type MediaPrompt struct {
	Text  string   `json:"prompt_string"`
	Media []string `json:"multimodal_data"`
}

// Completion is an answer of POST /completion, or one streamed chunk of it.
type Completion struct {
	Content         string   `json:"content"`
	Tokens          []int    `json:"tokens"`
	Stop            bool     `json:"stop"`
	StopType        string   `json:"stop_type"`
	TokensPredicted int      `json:"tokens_predicted"`
	TokensEvaluated int      `json:"tokens_evaluated"`
	TokensCached    int      `json:"tokens_cached"`
	Timings         *Timings `json:"timings"`
	// Probs are the tokens' probabilities, when the request asked for n_probs.
	Probs []TokenProb `json:"completion_probabilities"`
	// PromptProbs are the prompt's, in the full form (patch 0002).
	PromptProbs *[]TokenProb `json:"prompt_probabilities"`
	// PromptFlat are the prompt's, in the flat form (patches 0008 and 0009).
	PromptFlat *FlatLogprobs `json:"prompt_logprobs_flat"`
	Error      *Error        `json:"error"`
}

// Timings are llama-server's own figures for one response.
type Timings struct {
	CacheN          int     `json:"cache_n"`
	PromptN         int     `json:"prompt_n"`
	PromptMS        float64 `json:"prompt_ms"`
	PromptPerSecond float64 `json:"prompt_per_second"`
	PredictedN      int     `json:"predicted_n"`
	// PredictedMS is the time of the generated tokens' decodes.
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	DraftN             int     `json:"draft_n"`
	DraftNAccepted     int     `json:"draft_n_accepted"`
}

// TokenProb is one token with its raw-logit log probability and the top alternatives at
// its position.
type TokenProb struct {
	ID      int       `json:"id"`
	Logprob float64   `json:"logprob"`
	Top     []TopProb `json:"top_logprobs"`
	// Bytes is the raw text llama-server sent with this token; its content field replaces
	// invalid UTF-8 with U+FFFD, this does not.
	Bytes []int `json:"bytes"`
}

// TopProb is one alternative of a TokenProb.
type TopProb struct {
	ID      int     `json:"id"`
	Logprob float64 `json:"logprob"`
}

// Error is llama-server's error object, in an error answer or a streamed chunk.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

// TokenizeRequest is a body for POST /tokenize.
type TokenizeRequest struct {
	Content    string `json:"content"`
	AddSpecial bool   `json:"add_special"`
	// ParseSpecial, when set, is sent; llama-server parses special tokens by default.
	ParseSpecial *bool `json:"parse_special,omitempty"`
}

// TokenizeResponse is the answer of POST /tokenize.
type TokenizeResponse struct {
	Tokens []int `json:"tokens"`
}

// Props is the part of GET /props that llbuild reads.
type Props struct {
	TotalSlots int    `json:"total_slots"`
	ModelPath  string `json:"model_path"`
	ModelAlias string `json:"model_alias"`
	BuildInfo  string `json:"build_info"`
	BOS        string `json:"bos_token"`
	EOS        string `json:"eos_token"`
	Template   string `json:"chat_template"`
	// MediaMarker is the text that stands for one image in a prompt (and in /apply-template's
	// rendering of an image part); Modalities say which media the projector, if any, takes.
	MediaMarker string `json:"media_marker"`
	Modalities  struct {
		Vision bool `json:"vision"`
		Audio  bool `json:"audio"`
	} `json:"modalities"`
	Defaults struct {
		NCtx int `json:"n_ctx"`
	} `json:"default_generation_settings"`
	// PromptLogprobs is present in a server built with llbuild's series (patch 0002).
	PromptLogprobs     *bool `json:"prompt_logprobs"`
	PromptLogprobsFlat bool  `json:"prompt_logprobs_flat"`
	PromptLogprobsB64  bool  `json:"prompt_logprobs_base64"`
}

// Models is the part of GET /v1/models that llbuild reads.
type Models struct {
	Data []struct {
		ID   string `json:"id"`
		Meta struct {
			NVocab int `json:"n_vocab"`
			NCtx   int `json:"n_ctx"`
		} `json:"meta"`
	} `json:"data"`
}

// Slot is the part of an entry of GET /slots that llbuild reads.
type Slot struct {
	Speculative  bool `json:"speculative"`
	IsProcessing bool `json:"is_processing"`
}

// TokenPiece is one token of an answer of POST /tokenize with_pieces: its piece is a
// string, or an array of byte values when the piece is not valid UTF-8.
type TokenPiece struct {
	ID    int             `json:"id"`
	Piece json.RawMessage `json:"piece"`
}

// PromptLogprobsRequest is a native /completion body asking a server with llbuild's series
// for the prompt's logprobs (patch 0002); the one generated token is forced to a harmless
// one with LogitBias.
type PromptLogprobsRequest struct {
	Prompt         []int        `json:"prompt"`
	NPredict       int          `json:"n_predict"`
	PromptLogprobs int          `json:"prompt_logprobs"`
	Temperature    float64      `json:"temperature"`
	TopK           int          `json:"top_k"`
	Samplers       []string     `json:"samplers"`
	LogitBias      [][2]float64 `json:"logit_bias,omitempty"`
	CachePrompt    bool         `json:"cache_prompt"`
	IDSlot         int          `json:"id_slot"`
	ResponseFields []string     `json:"response_fields"`
	// Flat asks for the flat form (patch 0008), Base64 for its arrays as base64 (0009).
	Flat   bool `json:"prompt_logprobs_flat,omitempty"`
	Base64 bool `json:"prompt_logprobs_base64,omitempty"`
}
