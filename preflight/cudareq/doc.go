// Package cudareq evaluates a container image's NVIDIA_REQUIRE_* constraints against a host's
// driver and GPUs by the rules nvidia-container-cli applies before it starts a container.
package cudareq
