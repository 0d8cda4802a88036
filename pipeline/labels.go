package pipeline

import "github.com/llbuild/llbuild/patches"

// Labels an image carries beside the plan's runtime labels (RuntimePlan.Labels), which are part
// of the plan's hash; these are not, and are read from the plan by ImageLabels.
const (
	LabelPlanHash = "io.llbuild.plan-hash"
	// LabelVersion is the version of the llbuild that built the artifacts.
	LabelVersion = "io.llbuild.version"
	// LabelPlan is the whole plan the image was built from, as compact JSON (provenance.json's
	// plan), so that the image says what it is without its artifact directory:
	// crane config IMAGE | jq '.config.Labels["io.llbuild.plan"] | fromjson'.
	LabelPlan = "io.llbuild.plan"
	// LabelSeries names the patch series the server carries (scoring, plain, none, custom).
	LabelSeries = "io.llbuild.series"
	// LabelContract says what the server keeps beyond upstream: scoring (echo and prompt-token
	// logprobs) or upstream.
	LabelContract = "io.llbuild.contract"
	// LabelRef is the name llama.cpp's commit was built by (--ref), when it was named.
	LabelRef = "io.llbuild.llama-cpp.ref"
)

// ImageLabels are the labels an image built from the plan carries that the plan decides: its
// runtime labels, its hash, the series and the contract its patches keep, and the ref its
// commit was named by. The image adds LabelPlan and LabelVersion, which name the plan itself
// and the llbuild that built it, and keeps its base image's labels that none of these replace.
func (p *Plan) ImageLabels() map[string]string {
	l := make(map[string]string, len(p.Runtime.Labels)+4)
	for k, v := range p.Runtime.Labels {
		l[k] = v
	}
	l[LabelPlanHash] = p.Hash
	// a plan from before Series was recorded has its patches to say it
	l[LabelSeries] = p.Series
	if l[LabelSeries] == "" {
		l[LabelSeries] = seriesOf(p.Patches)
	}
	l[LabelContract] = patches.Contract(applied(p.Patches))
	if p.Source.Ref != "" {
		l[LabelRef] = p.Source.Ref
	}
	return l
}

// seriesOf names the series the patches are (patches.NameOf).
func seriesOf(ps []Patch) string { return patches.NameOf(applied(ps)) }

func applied(ps []Patch) [][2]string {
	a := make([][2]string, len(ps))
	for i, pt := range ps {
		a[i] = [2]string{pt.Name, pt.SHA256}
	}
	return a
}
