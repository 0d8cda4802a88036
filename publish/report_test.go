package publish

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestWriteReportSaysWhatEachPlanGot(t *testing.T) {
	results := []Result{
		{Target: "cpu-v3", Tags: []string{"cpu-v3-abc", "cpu-v3"}, Digest: "sha256:aa", Ref: "r/s@sha256:aa", Moved: []string{"cpu-v3"}},
		{Target: "rtx3090", Tags: []string{"rtx3090-abc"}, Err: errors.New("target rtx3090: pushing: refused")},
		{Target: "h200", Tags: []string{"h200-abc"}, Digest: "sha256:bb", Ref: "r/s@sha256:bb", Existing: true},
	}
	t.Run("digests", func(t *testing.T) {
		var out bytes.Buffer
		file := filepath.Join(t.TempDir(), "digests")
		err := WriteReport(&out, results, nil, false, file)
		if err == nil || err.Error() != "target rtx3090: pushing: refused" {
			t.Errorf("WriteReport() = %v, want the failed result's error alone", err)
		}
		if got, want := out.String(), "sha256:aa\nsha256:bb\n"; got != want {
			t.Errorf("stdout %q, want %q: the published digests in result order", got, want)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(b), "cpu-v3\tr/s@sha256:aa\nh200\tr/s@sha256:bb\n"; got != want {
			t.Errorf("digest file %q, want %q", got, want)
		}
	})
	t.Run("json", func(t *testing.T) {
		var out bytes.Buffer
		if err := WriteReport(&out, results, nil, true, ""); err == nil {
			t.Error("WriteReport() = nil, want the failed result's error")
		}
		var got []map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("stdout is not a JSON array: %v\n%s", err, out.String())
		}
		if len(got) != 3 {
			t.Fatalf("%d reports, want one per result (3)", len(got))
		}
		if got[1]["error"] != "target rtx3090: pushing: refused" || got[1]["digest"] != nil {
			t.Errorf("the failed plan's report is %v, want its error and no digest", got[1])
		}
		if !reflect.DeepEqual(got[1]["moved"], []any{}) || got[2]["existing"] != true {
			t.Errorf("reports %v, want moved [] (not null) and existing true for the image the registry held", got)
		}
		if _, ok := got[0]["gate"]; ok {
			t.Errorf("report %v has a gate verdict without a gate", got[0])
		}
	})
	t.Run("an unwritable digest file joins the results' errors", func(t *testing.T) {
		err := WriteReport(&bytes.Buffer{}, results, nil, false, filepath.Join(t.TempDir(), "no", "such", "dir", "digests"))
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "writing --digest-file") {
			t.Errorf("WriteReport() = %v, want both the push's and the digest file's errors", err)
		}
	})
}
