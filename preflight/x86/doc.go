// Package x86 length-decodes x86-64 machine code and classifies each instruction by the
// instruction-set extension it needs, covering legacy, VEX, EVEX and XOP encodings.
package x86
