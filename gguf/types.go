package gguf

import "fmt"

// TensorType is a ggml tensor element type (ggml_type).
type TensorType uint32

// Tensor types this package names and writes; others are read as numbers.
const (
	TensorF32  TensorType = 0
	TensorF16  TensorType = 1
	TensorQ4_0 TensorType = 2
	TensorQ8_0 TensorType = 8
	TensorBF16 TensorType = 30
)

type typeTraits struct {
	name  string
	block uint64 // elements per block
	size  uint64 // bytes per block
}

// tensorTypes follows ggml's type_traits (ggml.c) and gguf-py's
// GGML_QUANT_SIZES; numbers missing here were removed from ggml.
var tensorTypes = map[TensorType]typeTraits{
	0: {"F32", 1, 4}, 1: {"F16", 1, 2},
	2: {"Q4_0", 32, 18}, 3: {"Q4_1", 32, 20}, 6: {"Q5_0", 32, 22}, 7: {"Q5_1", 32, 24},
	8: {"Q8_0", 32, 34}, 9: {"Q8_1", 32, 40},
	10: {"Q2_K", 256, 84}, 11: {"Q3_K", 256, 110}, 12: {"Q4_K", 256, 144}, 13: {"Q5_K", 256, 176},
	14: {"Q6_K", 256, 210}, 15: {"Q8_K", 256, 292},
	16: {"IQ2_XXS", 256, 66}, 17: {"IQ2_XS", 256, 74}, 18: {"IQ3_XXS", 256, 98}, 19: {"IQ1_S", 256, 50},
	20: {"IQ4_NL", 32, 18}, 21: {"IQ3_S", 256, 110}, 22: {"IQ2_S", 256, 82}, 23: {"IQ4_XS", 256, 136},
	24: {"I8", 1, 1}, 25: {"I16", 1, 2}, 26: {"I32", 1, 4}, 27: {"I64", 1, 8}, 28: {"F64", 1, 8},
	29: {"IQ1_M", 256, 56}, 30: {"BF16", 1, 2},
	34: {"TQ1_0", 256, 54}, 35: {"TQ2_0", 256, 66},
	39: {"MXFP4", 32, 17}, 40: {"NVFP4", 64, 36}, 41: {"Q1_0", 128, 18}, 42: {"Q2_0", 64, 18},
}

func (t TensorType) String() string {
	if tr, ok := tensorTypes[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// Known reports whether the type's block layout is known, so its tensors'
// sizes can be computed.
func (t TensorType) Known() bool {
	_, ok := tensorTypes[t]
	return ok
}

// fileTypes maps general.file_type (llama.cpp's enum llama_ftype, also
// gguf-py's LlamaFileType) to the enum's name without the LLAMA_FTYPE_
// prefix. Values 4, 5, 6 and 33-35 were removed upstream.
var fileTypes = map[uint32]string{
	0: "ALL_F32", 1: "MOSTLY_F16", 2: "MOSTLY_Q4_0", 3: "MOSTLY_Q4_1",
	7: "MOSTLY_Q8_0", 8: "MOSTLY_Q5_0", 9: "MOSTLY_Q5_1",
	10: "MOSTLY_Q2_K", 11: "MOSTLY_Q3_K_S", 12: "MOSTLY_Q3_K_M", 13: "MOSTLY_Q3_K_L",
	14: "MOSTLY_Q4_K_S", 15: "MOSTLY_Q4_K_M", 16: "MOSTLY_Q5_K_S", 17: "MOSTLY_Q5_K_M",
	18: "MOSTLY_Q6_K", 19: "MOSTLY_IQ2_XXS", 20: "MOSTLY_IQ2_XS", 21: "MOSTLY_Q2_K_S",
	22: "MOSTLY_IQ3_XS", 23: "MOSTLY_IQ3_XXS", 24: "MOSTLY_IQ1_S", 25: "MOSTLY_IQ4_NL",
	26: "MOSTLY_IQ3_S", 27: "MOSTLY_IQ3_M", 28: "MOSTLY_IQ2_S", 29: "MOSTLY_IQ2_M",
	30: "MOSTLY_IQ4_XS", 31: "MOSTLY_IQ1_M", 32: "MOSTLY_BF16",
	36: "MOSTLY_TQ1_0", 37: "MOSTLY_TQ2_0", 38: "MOSTLY_MXFP4_MOE", 39: "MOSTLY_NVFP4",
	40: "MOSTLY_Q1_0", 41: "MOSTLY_Q2_0",
}

// fileTypeGuessed is llama.cpp's LLAMA_FTYPE_GUESSED flag.
const fileTypeGuessed = 1024

// FileTypeName returns the llama_ftype name of a general.file_type value,
// such as "MOSTLY_Q4_K_M", and whether it is known.
func FileTypeName(ft uint32) (string, bool) {
	name, ok := fileTypes[ft&^fileTypeGuessed]
	return name, ok
}

// Quantization returns the short quantisation name of a general.file_type
// value: "F32", "F16", "Q4_K_M", "MXFP4_MOE". Unknown values give
// "ftype(N)".
func Quantization(ft uint32) string {
	name, ok := FileTypeName(ft)
	if !ok {
		return fmt.Sprintf("ftype(%d)", ft)
	}
	for _, p := range []string{"MOSTLY_", "ALL_"} {
		if len(name) > len(p) && name[:len(p)] == p {
			return name[len(p):]
		}
	}
	return name
}
