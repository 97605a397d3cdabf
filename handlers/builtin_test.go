package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/switchyard/switchyard/jobs"
)

func TestBuiltinConfigWithDefaults(t *testing.T) {
	t.Parallel()
	cfg := BuiltinConfig{}.WithDefaults()
	if cfg.MaxResponseBody != 1<<20 {
		t.Errorf("MaxResponseBody = %d; want 1 MiB", cfg.MaxResponseBody)
	}
	if cfg.HTTPClient == nil || cfg.HTTPClient == http.DefaultClient {
		t.Fatalf("HTTPClient = %v; want a dedicated client", cfg.HTTPClient)
	}
	tr, ok := cfg.HTTPClient.Transport.(*http.Transport)
	if !ok || tr == http.DefaultTransport {
		t.Fatalf("Transport = %T; want a dedicated *http.Transport", cfg.HTTPClient.Transport)
	}
	if tr.TLSHandshakeTimeout <= 0 || tr.IdleConnTimeout <= 0 {
		t.Errorf("transport lacks timeouts: TLS handshake %s, idle %s", tr.TLSHandshakeTimeout, tr.IdleConnTimeout)
	}
	if (BuiltinConfig{}).WithDefaults().HTTPClient == cfg.HTTPClient {
		t.Error("WithDefaults shares one client between calls")
	}

	client := &http.Client{}
	set := BuiltinConfig{HTTPClient: client, MaxResponseBody: 10}.WithDefaults()
	if set.HTTPClient != client || set.MaxResponseBody != 10 {
		t.Errorf("WithDefaults changed set fields: %+v", set)
	}
}

func TestRegisterBuiltins(t *testing.T) {
	t.Parallel()
	reg, mux := jobs.NewRegistry(), NewMux()
	if err := RegisterBuiltins(reg, mux, BuiltinConfig{}); err != nil {
		t.Fatalf("RegisterBuiltins: %v", err)
	}
	want := []string{"http.request", "noop", "sleep"}
	if got := reg.Names(); !slices.Equal(got, want) {
		t.Errorf("registered types = %v; want %v", got, want)
	}
	if got := mux.Types(); !slices.Equal(got, want) {
		t.Errorf("handled types = %v; want %v", got, want)
	}

	httpType, err := reg.Lookup("http.request")
	if err != nil {
		t.Fatalf("Lookup(http.request): %v", err)
	}
	if p := httpType.Config.Retry; p.MaxAttempts != 10 || p.MaxBackoff != HTTPRequestRetryPolicy().MaxBackoff {
		t.Errorf("http.request retry policy = %+v; want %+v", p, HTTPRequestRetryPolicy())
	}
	if httpType.Config.Timeout <= MaxHTTPTimeout {
		t.Errorf("http.request attempt timeout %s does not leave room for a %s request", httpType.Config.Timeout, MaxHTTPTimeout)
	}
	sleepType, err := reg.Lookup("sleep")
	if err != nil {
		t.Fatalf("Lookup(sleep): %v", err)
	}
	if sleepType.Config.Timeout <= MaxSleep {
		t.Errorf("sleep attempt timeout %s does not leave room for a %s sleep", sleepType.Config.Timeout, MaxSleep)
	}
}

func TestRegisterBuiltinsHandlersWork(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pong")
	}))
	t.Cleanup(srv.Close)
	reg, mux := jobs.NewRegistry(), NewMux()
	if err := RegisterBuiltins(reg, mux, BuiltinConfig{HTTPClient: srv.Client()}); err != nil {
		t.Fatalf("RegisterBuiltins: %v", err)
	}

	run := func(args jobs.Args) (any, error) {
		h, ok := mux.Handler(args.TaskType())
		if !ok {
			t.Fatalf("no handler for %s", args.TaskType())
		}
		return h.ProcessTask(context.Background(), newTask(t, args))
	}
	if out, err := run(NoopArgs{}); out != nil || err != nil {
		t.Errorf("noop = %v, %v; want nil, nil", out, err)
	}
	if out, err := run(SleepArgs{Duration: "1ms"}); err != nil || out != (SleepOutput{Slept: "1ms"}) {
		t.Errorf("sleep = %v, %v; want slept 1ms", out, err)
	}
	out, err := run(HTTPRequestArgs{URL: srv.URL})
	if res, ok := out.(HTTPRequestOutput); err != nil || !ok || res.Body != "pong" {
		t.Errorf("http.request = %+v, %v; want body pong", out, err)
	}
}

func TestRegisterBuiltinsValidatesThroughRegistry(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	if err := RegisterBuiltins(reg, NewMux(), BuiltinConfig{}); err != nil {
		t.Fatalf("RegisterBuiltins: %v", err)
	}
	tests := []struct {
		typ, args string
		wantField string // "" for valid
	}{
		{"http.request", `{"url":"https://example.test/","retry_on":["5xx","404"]}`, ""},
		{"http.request", `{"url":"https://example.test/","retry_on":["5xx","bogus"]}`, "args.retry_on[1]"},
		{"http.request", `{"method":"GET"}`, "args.url"},
		{"http.request", `{"url":"https://example.test/","timeout":"1h"}`, "args.timeout"},
		{"http.request", `{"url":5}`, "args.url"}, // wrong JSON type, reported by jobs
		{"sleep", `{"duration":"250ms"}`, ""},
		{"sleep", `{"duration":"-1s"}`, "args.duration"},
		{"sleep", `{}`, "args.duration"},
		{"noop", `{}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.typ+" "+tt.args, func(t *testing.T) {
			t.Parallel()
			typ, err := reg.Lookup(tt.typ)
			if err != nil {
				t.Fatalf("Lookup(%s): %v", tt.typ, err)
			}
			err = typ.Validate(json.RawMessage(tt.args))
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate = %v; want nil", err)
				}
				return
			}
			var ve *jobs.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.wantField {
				t.Fatalf("Validate = %v; want a ValidationError on %s", err, tt.wantField)
			}
		})
	}
}

func TestRegisterBuiltinsClashLeavesNothingHalfDone(t *testing.T) {
	t.Parallel()
	t.Run("twice", func(t *testing.T) {
		t.Parallel()
		reg, mux := jobs.NewRegistry(), NewMux()
		if err := RegisterBuiltins(reg, mux, BuiltinConfig{}); err != nil {
			t.Fatalf("first RegisterBuiltins: %v", err)
		}
		if err := RegisterBuiltins(reg, mux, BuiltinConfig{}); err == nil {
			t.Fatal("second RegisterBuiltins succeeded; want an error")
		}
	})
	t.Run("type already registered", func(t *testing.T) {
		t.Parallel()
		reg, mux := jobs.NewRegistry(), NewMux()
		if err := jobs.Register[SleepArgs](reg, jobs.TypeConfig{}); err != nil {
			t.Fatalf("Register: %v", err)
		}
		if err := RegisterBuiltins(reg, mux, BuiltinConfig{}); err == nil {
			t.Fatal("RegisterBuiltins succeeded; want an error")
		}
		if got := reg.Names(); !slices.Equal(got, []string{"sleep"}) {
			t.Errorf("registry = %v; want only the pre-existing sleep", got)
		}
		if got := mux.Types(); len(got) != 0 {
			t.Errorf("mux = %v; want untouched", got)
		}
	})
	t.Run("handler already registered", func(t *testing.T) {
		t.Parallel()
		reg, mux := jobs.NewRegistry(), NewMux()
		mux.HandleFunc("http.request", func(context.Context, *jobs.Task) (any, error) { return nil, nil })
		if err := RegisterBuiltins(reg, mux, BuiltinConfig{}); err == nil {
			t.Fatal("RegisterBuiltins succeeded; want an error")
		}
		if got := reg.Names(); len(got) != 0 {
			t.Errorf("registry = %v; want untouched", got)
		}
	})
	t.Run("nil arguments", func(t *testing.T) {
		t.Parallel()
		if err := RegisterBuiltins(nil, NewMux(), BuiltinConfig{}); err == nil {
			t.Error("RegisterBuiltins(nil registry) succeeded; want an error")
		}
		if err := RegisterBuiltins(jobs.NewRegistry(), nil, BuiltinConfig{}); err == nil {
			t.Error("RegisterBuiltins(nil mux) succeeded; want an error")
		}
	})
}
