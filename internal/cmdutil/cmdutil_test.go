package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/inputerr"
)

func TestErrorsCarryTheirExitStatus(t *testing.T) {
	var coder cli.ExitCoder
	for _, tc := range []struct {
		name  string
		err   error
		usage bool
	}{
		{"Usagef", Usagef("no target given"), true},
		{"wrapped usage", fmt.Errorf("loading: %w", Usage(errors.New("x"))), true},
		{"a library's input error", UsageOf(inputerr.Errorf("bad value")), true},
		{"another error stays", UsageOf(errors.New("disk full")), false},
	} {
		if got := IsUsage(tc.err); got != tc.usage {
			t.Errorf("%s: IsUsage(%v) = %v, want %v", tc.name, tc.err, got, tc.usage)
		}
		if tc.usage && (!errors.As(tc.err, &coder) || coder.ExitCode() != ExitUsage) {
			t.Errorf("%s: %v is not a cli.ExitCoder with status %d", tc.name, tc.err, ExitUsage)
		}
	}
}

func TestStreamsOfQuietHaveNoEngineLogNorStatusLine(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		var out, errs bytes.Buffer
		q := quiet
		var got Streams
		app := &cli.App{Writer: &out, ErrWriter: &errs, Action: func(c *cli.Context) error { got = StreamsOf(c); return nil }}
		ctx := WithOutput(context.Background(), Output{Log: slog.New(slog.NewTextHandler(&errs, nil)), Quiet: &q, Version: "v1"})
		if err := app.RunContext(ctx, []string{"llbuild"}); err != nil {
			t.Fatal(err)
		}
		if got.Stdout != &out || got.Stderr != &errs || got.Log == nil || got.Version != "v1" {
			t.Errorf("quiet %v: streams %+v are not the app's", quiet, got)
		}
		if (got.EngineLog == nil) != quiet || got.Term != nil {
			t.Errorf("quiet %v: engine log %v, status line %v; want an engine log only without --quiet and no status line off a terminal", quiet, got.EngineLog, got.Term)
		}
	}
}
