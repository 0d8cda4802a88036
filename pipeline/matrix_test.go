package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordingExecutor stands for an engine: it finishes builds in reverse order and records
// how many ran at once.
type recordingExecutor struct {
	mu          sync.Mutex
	running     int
	maxRunning  int
	fail        string
	calls       atomic.Int32
	delayByName map[string]time.Duration
}

func (r *recordingExecutor) Build(ctx context.Context, p *Plan, out string) (string, error) {
	r.calls.Add(1)
	r.mu.Lock()
	r.running++
	r.maxRunning = max(r.maxRunning, r.running)
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.running--; r.mu.Unlock() }()
	select {
	case <-time.After(r.delayByName[p.Target]):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if p.Target == r.fail {
		return "", errors.New("boom")
	}
	return out + "/" + p.Target, nil
}

func TestBuildAllKeepsInputOrderAndLimit(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	ex := &recordingExecutor{fail: "b", delayByName: map[string]time.Duration{"a": 40 * time.Millisecond, "b": 30 * time.Millisecond, "c": 20 * time.Millisecond, "d": 0}}
	var plans []*Plan
	for _, n := range names {
		plans = append(plans, &Plan{Target: n})
	}
	res := BuildAll(context.Background(), ex, plans, "out", 2)
	for i, r := range res {
		if r.Plan.Target != names[i] {
			t.Errorf("result %d is %s, want %s", i, r.Plan.Target, names[i])
		}
		wantErr := names[i] == "b"
		if (r.Err != nil) != wantErr {
			t.Errorf("result %s err = %v, want error: %v", names[i], r.Err, wantErr)
		}
		if !wantErr && r.Dir != fmt.Sprintf("out/%s", names[i]) {
			t.Errorf("result %s dir = %s", names[i], r.Dir)
		}
	}
	if ex.maxRunning > 2 || ex.maxRunning < 1 {
		t.Errorf("builds at once = %d, want at most 2", ex.maxRunning)
	}
	if ex.calls.Load() != 4 {
		t.Errorf("one failure stopped the others: %d builds ran, want 4", ex.calls.Load())
	}
}

func TestBuildAllStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := BuildAll(ctx, &recordingExecutor{}, []*Plan{{Target: "a"}, {Target: "b"}}, "out", 1)
	for _, r := range res {
		if !errors.Is(r.Err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", r.Plan.Target, r.Err)
		}
	}
}
