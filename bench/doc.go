// Package bench measures a bundle's llama-server the way tuning labs do: fresh-response
// decode throughput (row 0: a prompt the server has not seen), repeated rows as stability
// support, canaries that check greedy outputs before a figure counts, validity (no prompt
// reuse), the run's identity from its manifest, campaign records with promotion, and A/B of
// several bundles interleaved in one run. It starts llama-server with the supervision that
// llbuild serve uses (llamaserver.Start) and reads only manifests.
package bench
