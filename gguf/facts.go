package gguf

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"strings"
)

// Facts are what a bundle manifest records about a GGUF model and what a
// bundle checks when pairing a model with a draft.
type Facts struct {
	// Version is the GGUF version.
	Version uint32 `json:"gguf_version"`
	// Architecture is general.architecture, such as "llama" or "gemma4".
	Architecture string `json:"architecture"`
	// Name is general.name.
	Name string `json:"name,omitempty"`
	// FileType is general.file_type (llama.cpp's llama_ftype), or -1 when
	// the file does not say.
	FileType int64 `json:"file_type"`
	// FileTypeName is the llama_ftype name, such as "MOSTLY_Q4_K_M".
	FileTypeName string `json:"file_type_name,omitempty"`
	// Quantization is the short name, such as "Q4_K_M", "F16" or "F32";
	// without general.file_type it is the most common type of the 2-D
	// tensors followed by " (guessed)".
	Quantization string `json:"quantization"`
	// ContextLength is <arch>.context_length, the training context.
	ContextLength uint64 `json:"context_length,omitempty"`
	// BlockCount is <arch>.block_count.
	BlockCount uint64 `json:"block_count,omitempty"`
	// EmbeddingLength is <arch>.embedding_length.
	EmbeddingLength uint64 `json:"embedding_length,omitempty"`
	// VocabSize is the length of tokenizer.ggml.tokens, else
	// <arch>.vocab_size.
	VocabSize uint64 `json:"vocab_size,omitempty"`
	// VocabSHA256 is the SHA-256 of the token list (each token as a
	// little-endian uint64 length and its bytes), so that two files with
	// the same vocabulary size but different tokens can be told apart.
	VocabSHA256 string `json:"vocab_sha256,omitempty"`
	// TokenizerModel is tokenizer.ggml.model, such as "llama" or "gpt2".
	TokenizerModel string `json:"tokenizer_model,omitempty"`
	// TokenizerPre is tokenizer.ggml.pre, the pre-tokenizer.
	TokenizerPre string `json:"tokenizer_pre,omitempty"`
	// BOS and EOS are tokenizer.ggml.bos_token_id and eos_token_id, or -1.
	BOS int64 `json:"bos_token_id"`
	EOS int64 `json:"eos_token_id"`
	// NextNPredictLayers is <arch>.nextn_predict_layers: the number of
	// multi-token-prediction layers the file carries.
	NextNPredictLayers uint64 `json:"nextn_predict_layers,omitempty"`
	// EmbeddingLengthOut is <arch>.embedding_length_out. A gemma4-assistant
	// draft stores its target model's hidden size here.
	EmbeddingLengthOut uint64 `json:"embedding_length_out,omitempty"`
	// TargetHiddenSize is <arch>.target_hidden_size, which EAGLE3 and
	// DFlash drafts record for the model they draft for.
	TargetHiddenSize uint64 `json:"target_hidden_size,omitempty"`
	// DraftFor is the architecture an MTP draft model drafts for, empty
	// for other models. GGUF has no key naming it: llama.cpp's draft
	// architectures are named "<target>-assistant" (gemma4-assistant).
	DraftFor string `json:"draft_for,omitempty"`
	// TensorCount is the number of tensors.
	TensorCount int `json:"tensor_count"`
	// Parameters is the total number of tensor elements.
	Parameters uint64 `json:"parameters"`
}

// assistantSuffix marks an architecture as an MTP draft for the
// architecture named before it.
//
// How llama.cpp (upstream 1425386fd) describes MTP drafts in GGUF:
//   - A separate draft file has its own architecture: LLM_ARCH_GEMMA4_ASSISTANT,
//     "gemma4-assistant" (src/llama-arch.cpp), written by conversion/gemma.py's
//     Gemma4AssistantModel from HF "Gemma4AssistantForCausalLM". No key names
//     the target; the name does. The converter adds
//     gemma4-assistant.embedding_length_out = the target's hidden size
//     (backbone_hidden_size, to compare with gemma4.embedding_length) and
//     gemma4-assistant.nextn_predict_layers = its block count. It is loaded
//     with --model-draft and --spec-type draft-mtp and needs the target's
//     context (ctx_other, src/llama-context.cpp).
//   - Models with built-in MTP heads (deepseek, glm4moe, exaone, bailingmoe,
//     command-r...) keep them in the main file: <arch>.nextn_predict_layers > 0
//     and blk.N.nextn.* tensors.
//   - EAGLE3 and DFlash drafts ("eagle3", "dflash") record
//     <arch>.target_hidden_size and <arch>.target_layers instead.
const assistantSuffix = "-assistant"

// Facts extracts the manifest facts from the header.
func (f *File) Facts() Facts {
	fa := Facts{Version: f.Version, FileType: -1, BOS: -1, EOS: -1, TensorCount: len(f.Tensors)}
	fa.Architecture = f.str("general.architecture")
	fa.Name = f.str("general.name")
	arch := fa.Architecture
	if v, ok := f.Get("general.file_type"); ok {
		if ft, ok := v.AsUint(); ok && ft <= 0xffffffff {
			fa.FileType = int64(ft)
			fa.FileTypeName, _ = FileTypeName(uint32(ft))
			fa.Quantization = Quantization(uint32(ft))
		}
	}
	if fa.FileType < 0 {
		fa.Quantization = f.guessQuantization()
	}
	if arch != "" {
		fa.ContextLength = f.uint(arch + ".context_length")
		fa.BlockCount = f.uint(arch + ".block_count")
		fa.EmbeddingLength = f.uint(arch + ".embedding_length")
		fa.NextNPredictLayers = f.uint(arch + ".nextn_predict_layers")
		fa.EmbeddingLengthOut = f.uint(arch + ".embedding_length_out")
		fa.TargetHiddenSize = f.uint(arch + ".target_hidden_size")
		if target, ok := strings.CutSuffix(arch, assistantSuffix); ok && target != "" {
			fa.DraftFor = target
		}
	}
	if v, ok := f.Get("tokenizer.ggml.tokens"); ok && v.Type() == TypeArray {
		fa.VocabSize = uint64(v.Len())
		if l, ok := v.v.(*lazyStrings); ok && l.order == binary.LittleEndian {
			// The encoded array is exactly what vocabDigest hashes.
			sum := sha256.Sum256(l.raw)
			fa.VocabSHA256 = hex.EncodeToString(sum[:])
		} else if tokens, ok := v.AsStrings(); ok {
			fa.VocabSHA256 = vocabDigest(tokens)
		}
	} else if arch != "" {
		fa.VocabSize = f.uint(arch + ".vocab_size")
	}
	fa.TokenizerModel = f.str("tokenizer.ggml.model")
	fa.TokenizerPre = f.str("tokenizer.ggml.pre")
	if v, ok := f.Get("tokenizer.ggml.bos_token_id"); ok {
		if id, ok := v.AsInt(); ok {
			fa.BOS = id
		}
	}
	if v, ok := f.Get("tokenizer.ggml.eos_token_id"); ok {
		if id, ok := v.AsInt(); ok {
			fa.EOS = id
		}
	}
	for _, t := range f.Tensors {
		fa.Parameters += t.Elements()
	}
	return fa
}

// ReadFacts reads the facts of the model file at path. It refuses what is not a regular
// file (a pipe or a device is no model to pack) and a file without general.architecture,
// which no llama.cpp loader would take.
func ReadFacts(path string) (Facts, error) {
	fh, err := os.Open(path)
	if err != nil {
		return Facts{}, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return Facts{}, err
	}
	if !fi.Mode().IsRegular() {
		return Facts{}, errors.New("not a regular file")
	}
	f, err := Read(fh, fi.Size())
	if err != nil {
		return Facts{}, err
	}
	facts := f.Facts()
	if facts.Architecture == "" {
		return facts, errors.New("general.architecture is missing")
	}
	return facts, nil
}

func (f *File) str(key string) string {
	v, _ := f.Get(key)
	s, _ := v.AsString()
	return s
}

func (f *File) uint(key string) uint64 {
	v, _ := f.Get(key)
	u, _ := v.AsUint()
	return u
}

// guessQuantization names the most common type among 2-D tensors, as
// llama.cpp guesses a missing file type.
func (f *File) guessQuantization() string {
	counts := map[TensorType]int{}
	var best TensorType
	found := false
	for _, t := range f.Tensors {
		if len(t.Dims) < 2 {
			continue
		}
		counts[t.Type]++
		if !found || counts[t.Type] > counts[best] || counts[t.Type] == counts[best] && t.Type < best {
			best, found = t.Type, true
		}
	}
	if !found {
		return ""
	}
	return best.String() + " (guessed)"
}

func vocabDigest(tokens []string) string {
	h := sha256.New()
	buf := make([]byte, 0, 64<<10)
	for _, t := range tokens {
		if len(buf)+8+len(t) > cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
		buf = binary.LittleEndian.AppendUint64(buf, uint64(len(t)))
		if len(t) > cap(buf) {
			h.Write(buf)
			h.Write([]byte(t))
			buf = buf[:0]
			continue
		}
		buf = append(buf, t...)
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}
