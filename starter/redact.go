package main

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Secret values never reach the CLI's output (issue 37.3). A status, a
// history or a plan carries manifests whose secrets the CLI decoded
// (internal/codec); every JSON or YAML document it prints passes through
// redact first, which blanks each manifest's secretEnv values and its
// credentials' password and token, wherever in the document they are.
// The text output prints no manifest.

// redact is doc with every secret value of a manifest in it replaced by
// manifest.Redacted; a document without any is returned as it is (its
// keys' order kept).
func redact(doc json.RawMessage) json.RawMessage {
	if !bytes.Contains(doc, []byte(`"secretEnv"`)) && !bytes.Contains(doc, []byte(`"credentials"`)) {
		return doc
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return doc
	}
	redactValue(v)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return doc
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

func redactValue(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			m, isObject := x.(map[string]any)
			switch {
			case k == "secretEnv" && isObject:
				for name := range m {
					m[name] = manifest.Redacted
				}
			case k == "credentials" && isObject:
				for _, f := range []string{"password", "token"} {
					if s, ok := m[f].(string); ok && s != "" {
						m[f] = manifest.Redacted
					}
				}
			default:
				redactValue(x)
			}
		}
	case []any:
		for _, x := range t {
			redactValue(x)
		}
	}
}

// jsonWriter writes each JSON document written to it to out, redacted,
// one per line; what is not JSON passes as it is.
type jsonWriter struct {
	pw   *io.PipeWriter
	done chan struct{}
}

func newJSONWriter(out io.Writer) *jsonWriter {
	pr, pw := io.Pipe()
	j := &jsonWriter{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(j.done)
		dec := json.NewDecoder(pr)
		for {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				if err != io.EOF {
					_, _ = io.Copy(out, io.MultiReader(dec.Buffered(), pr))
				}
				return
			}
			_, _ = out.Write(append(redact(v), '\n'))
		}
	}()
	return j
}

func (j *jsonWriter) Write(p []byte) (int, error) { return j.pw.Write(p) }

// Close flushes the last document.
func (j *jsonWriter) Close() error {
	err := j.pw.Close()
	<-j.done
	return err
}
