package jobs

import (
	"encoding/json"
	"fmt"
)

// Args is implemented by a task type's argument struct. TaskType returns the
// type's stable name: it is stored with every task and routes the task to its
// handler, so renaming it orphans queued tasks.
//
//	type EmailArgs struct {
//		To      string `json:"to"`
//		Subject string `json:"subject"`
//	}
//
//	func (EmailArgs) TaskType() string { return "email.send" }
type Args interface {
	TaskType() string
}

// RawArgs is the untyped form of a task's arguments for producers that have
// no Go type, such as the HTTP API. The Client validates JSON against the
// registered Go type before inserting.
type RawArgs struct {
	Type string
	JSON json.RawMessage
}

// TaskType implements Args.
func (r RawArgs) TaskType() string { return r.Type }

// MarshalJSON emits the raw arguments unchanged.
func (r RawArgs) MarshalJSON() ([]byte, error) {
	if len(r.JSON) == 0 {
		return []byte("{}"), nil
	}
	return r.JSON, nil
}

// encodeArgs returns args as a JSON object.
func encodeArgs(args Args) (json.RawMessage, error) {
	if raw, ok := args.(RawArgs); ok {
		b, _ := raw.MarshalJSON()
		return b, nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode args of %s: %w", args.TaskType(), err)
	}
	return b, nil
}
