package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// decodeBody decodes a JSON request body into v strictly: malformed JSON
// and a body that is not one value are 400; unknown fields, wrong types
// and strings holding NUL (which Postgres cannot store) are 422 naming
// every such field with its path, such as "steps[2].task.timeout".
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err // *http.MaxBytesError → 413
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("malformed-json", "the request body is empty; send a JSON object")
	}
	return decodeJSON(body, v)
}

// decodeJSON is decodeBody's work on a body already read.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var (
			syntaxErr *json.SyntaxError
			typeErr   *json.UnmarshalTypeError
		)
		switch {
		case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest("malformed-json", "the request body is not valid JSON: "+err.Error())
		case errors.As(err, &typeErr) && typeErr.Field == "":
			return badRequest("malformed-json", "the request body must be a JSON object")
		}
		// The value is well-formed JSON (the decoder scans a value whole
		// before decoding it): find every field that does not fit.
		if problems := locateProblems(body, reflect.TypeOf(v), false); len(problems) > 0 {
			return problems.err()
		}
		return fallbackDecodeError(err)
	}
	if dec.More() {
		return badRequest("malformed-json", "the request body must hold exactly one JSON value")
	}
	// "\u0000" is the only way to write NUL in JSON; without it there is
	// nothing to look for.
	if bytes.Contains(body, []byte(`\u0000`)) {
		if problems := locateProblems(body, reflect.TypeOf(v), true); len(problems) > 0 {
			return problems.err()
		}
	}
	return nil
}

// fallbackDecodeError maps a decoding error the locator could not place.
func fallbackDecodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		return &jobs.ValidationError{Field: typeErr.Field, Message: fmt.Sprintf("must be %s, got %s", jsonType(typeErr.Type.String()), typeErr.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &jobs.ValidationError{Field: name, Message: "unknown field"}
	}
	return badRequest("malformed-json", "the request body could not be decoded: "+err.Error())
}

// jsonType names a Go type the way a JSON client thinks of it.
func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map"), strings.Contains(goType, "."):
		return "an object"
	}
	return goType
}

// fieldErrors are several invalid fields of one request body.
type fieldErrors []*jobs.ValidationError

func (f fieldErrors) Error() string {
	parts := make([]string, len(f))
	for i, e := range f {
		parts[i] = e.Error()
	}
	return "invalid request body: " + strings.Join(parts, "; ")
}

// err is the problems as one error: the single *jobs.ValidationError when
// there is one.
func (f fieldErrors) err() error {
	if len(f) == 1 {
		return f[0]
	}
	return f
}

// maxLocatedProblems bounds the problems listed for one body.
const maxLocatedProblems = 100

// locateProblems walks body, one well-formed JSON value, against the type
// t points to, the way encoding/json decodes it (null fits anything, field
// names match exactly or else case-insensitively), and lists in document
// order every unknown field, value of the wrong type, value its type's
// UnmarshalJSON rejects, and string or object key holding NUL. With
// nulOnly it lists only the NUL problems. One pass over the tokens, so
// linear in the body's size.
func locateProblems(body []byte, t reflect.Type, nulOnly bool) fieldErrors {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	l := &locator{dec: dec, nulOnly: nulOnly}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	_ = l.value(t, "") // a token error ends the walk; what was found stands
	return l.problems
}

type locator struct {
	dec      *json.Decoder
	nulOnly  bool
	problems fieldErrors
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
	durationType    = reflect.TypeFor[workflow.Duration]()
)

func (l *locator) add(nul bool, field, msg string) {
	if (l.nulOnly && !nul) || len(l.problems) >= maxLocatedProblems {
		return
	}
	l.problems = append(l.problems, &jobs.ValidationError{Field: field, Message: msg})
}

const nulMessage = "must not contain the NUL character (\\u0000)"

// value reads one value destined for a t and checks it.
func (l *locator) value(t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := l.dec.Token()
	if err != nil {
		return err
	}
	if tok == nil { // null leaves any Go value as it is
		return nil
	}
	if t == rawMessageType || t.Kind() == reflect.Interface {
		return l.any(tok, path)
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return l.unmarshaler(t, tok, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		if tok != json.Delim('{') {
			l.add(false, path, "must be an object, got "+tokenKind(tok))
			return l.skip(tok, path)
		}
		for l.dec.More() {
			keyTok, err := l.dec.Token()
			if err != nil {
				return err
			}
			key, _ := keyTok.(string)
			sub := joinPath(path, key)
			l.checkNUL(key, sub)
			field, ok := fieldByJSONName(t, key)
			if !ok {
				l.add(false, sub, "unknown field")
				if err := l.skipValue(sub); err != nil {
					return err
				}
				continue
			}
			if err := l.value(field, sub); err != nil {
				return err
			}
		}
		_, err := l.dec.Token() // }
		return err
	case reflect.Map:
		if tok != json.Delim('{') {
			l.add(false, path, "must be an object, got "+tokenKind(tok))
			return l.skip(tok, path)
		}
		for l.dec.More() {
			keyTok, err := l.dec.Token()
			if err != nil {
				return err
			}
			key, _ := keyTok.(string)
			sub := joinPath(path, key)
			l.checkNUL(key, sub)
			if err := l.value(t.Elem(), sub); err != nil {
				return err
			}
		}
		_, err := l.dec.Token()
		return err
	case reflect.Slice, reflect.Array:
		if tok != json.Delim('[') {
			l.add(false, path, "must be an array, got "+tokenKind(tok))
			return l.skip(tok, path)
		}
		for i := 0; l.dec.More(); i++ {
			if err := l.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := l.dec.Token()
		return err
	case reflect.String:
		s, ok := tok.(string)
		if !ok {
			l.add(false, path, "must be a string, got "+tokenKind(tok))
			return l.skip(tok, path)
		}
		l.checkNUL(s, path)
		return nil
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			l.add(false, path, "must be a boolean, got "+tokenKind(tok))
			return l.skip(tok, path)
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			l.add(false, path, "must be an integer, got "+tokenKind(tok))
			return l.skip(tok, path)
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			l.add(false, path, numberMessage(err, "an integer", n))
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := tok.(json.Number)
		if !ok {
			l.add(false, path, "must be a non-negative integer, got "+tokenKind(tok))
			return l.skip(tok, path)
		}
		if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
			l.add(false, path, numberMessage(err, "a non-negative integer", n))
		}
		return nil
	case reflect.Float32, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			l.add(false, path, "must be a number, got "+tokenKind(tok))
			return l.skip(tok, path)
		}
		if _, err := strconv.ParseFloat(n.String(), t.Bits()); err != nil {
			l.add(false, path, numberMessage(err, "a number", n))
		}
		return nil
	}
	// A kind request bodies do not use: accept it, but still look for NUL.
	return l.skip(tok, path)
}

// unmarshaler checks a value against t's own UnmarshalJSON (durations,
// times). A compound value is skipped and judged by its opening bracket.
func (l *locator) unmarshaler(t reflect.Type, tok json.Token, path string) error {
	var raw []byte
	switch v := tok.(type) {
	case json.Delim:
		if err := l.skip(tok, path); err != nil {
			return err
		}
		raw = []byte("{}")
		if v == '[' {
			raw = []byte("[]")
		}
	case json.Number:
		raw = []byte(v)
	default:
		raw, _ = json.Marshal(v)
	}
	if s, ok := tok.(string); ok {
		l.checkNUL(s, path)
	}
	if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
		msg := err.Error()
		var pe *time.ParseError
		switch {
		case t == timeType || errors.As(err, &pe):
			msg = "must be an RFC 3339 time such as 2026-01-02T15:04:05Z"
		case t == durationType:
			msg = `must be a duration such as "90s" or "1h30m"`
		}
		l.add(false, path, msg)
	}
	return nil
}

// any walks a value of any shape (a json.RawMessage field, such as args
// or input), looking only for NUL.
func (l *locator) any(tok json.Token, path string) error {
	switch v := tok.(type) {
	case string:
		l.checkNUL(v, path)
	case json.Delim:
		switch v {
		case '{':
			for l.dec.More() {
				keyTok, err := l.dec.Token()
				if err != nil {
					return err
				}
				key, _ := keyTok.(string)
				sub := joinPath(path, key)
				l.checkNUL(key, sub)
				if err := l.skipValue(sub); err != nil {
					return err
				}
			}
			_, err := l.dec.Token()
			return err
		case '[':
			for i := 0; l.dec.More(); i++ {
				if err := l.skipValue(fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
			_, err := l.dec.Token()
			return err
		}
	}
	return nil
}

// skipValue reads and skips the next value (still reporting NUL in it).
func (l *locator) skipValue(path string) error {
	tok, err := l.dec.Token()
	if err != nil {
		return err
	}
	return l.skip(tok, path)
}

// skip skips the rest of the value tok starts.
func (l *locator) skip(tok json.Token, path string) error { return l.any(tok, path) }

func (l *locator) checkNUL(s, path string) {
	if strings.IndexByte(s, 0) >= 0 {
		l.add(true, path, nulMessage)
	}
}

// numberMessage says why number n does not fit: out of range, or not
// what (such as "an integer").
func numberMessage(err error, what string, n json.Number) string {
	if errors.Is(err, strconv.ErrRange) {
		return "is out of range, got " + n.String()
	}
	return "must be " + what + ", got number " + n.String()
}

// tokenKind names the JSON kind of the value tok starts.
func tokenKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number " + v.String()
	}
	return "null"
}

// joinPath appends an object key to a field path: "a.b" for a plain key,
// `a["x y"]` for any other.
func joinPath(path, key string) string {
	plain := key != "" && utf8.ValidString(key)
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

// fieldByJSONName finds the type of the field of struct t that
// encoding/json decodes key into: an exact name first, else one equal
// under case folding. Embedded structs' fields count as t's own.
func fieldByJSONName(t reflect.Type, key string) (reflect.Type, bool) {
	var folded reflect.Type
	found := false
	var visit func(t reflect.Type) (reflect.Type, bool)
	visit = func(t reflect.Type) (reflect.Type, bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					if typ, ok := visit(ft); ok {
						return typ, true
					}
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if name == key {
				return f.Type, true
			}
			if !found && strings.EqualFold(name, key) {
				folded, found = f.Type, true
			}
		}
		return nil, false
	}
	if typ, ok := visit(t); ok {
		return typ, true
	}
	return folded, found
}
