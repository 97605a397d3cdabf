// Command switchyard runs Switchyard: worker pods (serve), schema
// migrations (migrate), task enqueueing (enqueue) and the demo producer.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Signals are handled here and nowhere else: the first SIGINT or
	// SIGTERM cancels ctx and every component shuts down gracefully; a
	// second one kills the process the default way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "switchyard:", err)
		os.Exit(1)
	}
}
