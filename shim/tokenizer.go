package shim

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// handleTokenize is vLLM's POST /tokenize {prompt, add_special_tokens}
// -> {tokens, count, max_model_len}, which lm-evaluation-harness's remote
// tokenizer calls. Special tokens in the text are recognised, so that
// tokenizing eos_token gives the EOS id.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request, u *upstream, req tokenizeRequest, _ time.Time) {
	ids, err := u.tokenize(r.Context(), req.text, req.addSpecial)
	if err != nil {
		s.requestFailed(r, err)
		writeError(w, err)
		return
	}
	if ids == nil {
		ids = []int{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": ids, "count": len(ids), "max_model_len": u.info.NCtx})
}

// handleDetokenize is vLLM's POST /detokenize {tokens} -> {prompt}. vLLM
// answers the Hugging Face tokenizer's decode(tokens), whose decoder for a
// tokenizer that adds a space before the first word strips one leading
// space from the text (decoders.Strip(" ", 1, 0)); llama-server keeps it.
// lm-evaluation-harness decodes token lists and sends the text back to be
// tokenized, so that space would tokenize into another token.
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request, u *upstream, ids []int, _ time.Time) {
	for _, id := range ids {
		if !u.vocab.valid(id) {
			writeError(w, badRequest("tokens", "token id %d is outside the vocabulary of %d tokens", id, u.vocab.size()))
			return
		}
	}
	text, err := u.ls.Detokenize(r.Context(), ids)
	if err != nil {
		err = upstreamFailure(r.Context(), err)
		s.requestFailed(r, err)
		writeError(w, err)
		return
	}
	if u.vocab.spacePrefix {
		text = strings.TrimPrefix(text, " ")
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": text})
}

// tokenizeRequest is a /tokenize request's body.
type tokenizeRequest struct {
	text       string
	addSpecial bool
}

// parseTokenizeRequest reads a /tokenize request's body.
func parseTokenizeRequest(body []byte) (tokenizeRequest, error) {
	f, err := decodeObject(body)
	if err != nil {
		return tokenizeRequest{}, err
	}
	if err := f.checkKnown(tokenizeFields); err != nil {
		return tokenizeRequest{}, err
	}
	if strs, err := f.boolean("return_token_strs"); err != nil {
		return tokenizeRequest{}, err
	} else if strs {
		return tokenizeRequest{}, badRequest("return_token_strs", `"return_token_strs" is not supported: detokenize the ids with POST /detokenize`)
	}
	if _, err := f.str("model"); err != nil {
		return tokenizeRequest{}, err
	}
	if !f.has("prompt") {
		return tokenizeRequest{}, badRequest("prompt", `"prompt" is required: the text to tokenize`)
	}
	text, err := f.str("prompt")
	if err != nil {
		return tokenizeRequest{}, err
	}
	addSpecial := true
	if f.has("add_special_tokens") {
		if addSpecial, err = f.boolean("add_special_tokens"); err != nil {
			return tokenizeRequest{}, err
		}
	}
	return tokenizeRequest{text: text, addSpecial: addSpecial}, nil
}

// parseDetokenizeRequest returns the token ids of a /detokenize request's body.
func parseDetokenizeRequest(body []byte) ([]int, error) {
	f, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	if err := f.checkKnown(detokenizeFields); err != nil {
		return nil, err
	}
	if _, err := f.str("model"); err != nil {
		return nil, err
	}
	raw, ok := f["tokens"]
	var items []json.RawMessage
	if !ok || json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("tokens", `"tokens" is required: an array of token ids`)
	}
	ids, ok := tokenIDs(items)
	if !ok {
		return nil, badRequest("tokens", `"tokens" must be an array of non-negative integer token ids`)
	}
	return ids, nil
}

// handleTokenizerInfo is vLLM's GET /tokenizer_info; lm-evaluation-harness
// requires eos_token in it and derives token ids by tokenizing the
// special tokens it names.
func (s *Server) handleTokenizerInfo(w http.ResponseWriter, r *http.Request) {
	u, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	info := map[string]any{
		"tokenizer_class":  "llama.cpp",
		"eos_token":        u.info.EOS,
		"bos_token":        nullIfEmpty(u.info.BOS),
		"pad_token":        nil,
		"model_max_length": u.info.NCtx,
		"vocab_size":       u.info.NVocab,
	}
	if u.info.ChatTemplate != "" {
		info["chat_template"] = u.info.ChatTemplate
	}
	for i, p := range u.vocab.pieces {
		if u.vocab.control[i] && string(p) == u.info.EOS {
			info["eos_token_id"] = i
		}
		if u.vocab.control[i] && string(p) == u.info.BOS && u.info.BOS != "" {
			info["bos_token_id"] = i
		}
	}
	writeJSON(w, http.StatusOK, info)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
