package llamaserver

import "testing"

// The text is llama-server 34af94cd9's /metrics (tools/server/server-task.cpp to_metrics), cut.
func TestParseSpecMetrics(t *testing.T) {
	const newer = `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 612
# HELP llamacpp:spec_decode_num_draft_tokens_total Speculative: Total draft tokens generated
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 1.2e+03
# HELP llamacpp:spec_decode_num_accepted_tokens_total Speculative: Total draft tokens accepted by the target model
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 977
# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total speculative decoding verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 301
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 290
`
	m, ok, err := ParseSpecMetrics(newer)
	if err != nil || !ok || m != (SpecCounters{Drafted: 1200, Accepted: 977, Drafts: 301}) {
		t.Errorf("ParseSpecMetrics(34af94cd9's) = %+v, %v, %v; want 1200 drafted, 977 accepted, 301 drafts", m, ok, err)
	}
	// 1425386fd's /metrics has no spec-decode counters: not offered, no error
	if _, ok, err := ParseSpecMetrics("llamacpp:prompt_tokens_total 612\nllamacpp:n_decode_total 40\n"); ok || err != nil {
		t.Errorf("an older build's /metrics: ok %v, err %v; want not offered and no error", ok, err)
	}
	if _, _, err := ParseSpecMetrics("llamacpp:spec_decode_num_drafts_total many\n"); err == nil {
		t.Error("a counter that is not a number: no error")
	}
}
