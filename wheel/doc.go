// Package wheel reads and checks built llama-cpp-python wheels against their target and
// writes PEP 503 simple indexes of them, one per variant (cu131, cpu, ...).
package wheel
