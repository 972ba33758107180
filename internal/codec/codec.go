// Package codec encrypts what deployflow writes into Temporal (issue
// 37.3): every payload (workflow and activity inputs and results, queries,
// updates, signals, memos, carried state) and every failure's message, with
// AES-256-GCM under keys the operator holds, each named by an ID so that
// keys rotate: the newest encrypts, every listed key decrypts. Temporal,
// its database, its UI and its CLI then hold only ciphertext; the UI and
// the CLI decode through the codec server (server.go) for an operator who
// authenticates.
//
// It is a converter.PayloadCodec, the way Temporal's data-converter guide
// describes: a payload arrives as the SDK encoded it, leaves as one
// payload of encoding binary/encrypted whose metadata names the key.
// Payloads written in plain JSON (a deploy started from the UI's Start
// Workflow form, the temporal CLI or tctl) decode as they are.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// The metadata of an encrypted payload.
const (
	// EncodingEncrypted is its encoding.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key that encrypted it.
	MetadataKeyID = "encryption-key-id"
)

// KeySize is a key's length: AES-256.
const KeySize = 32

// Keys are the operator's keys: Active encrypts, each of Keys decrypts
// what it encrypted.
type Keys struct {
	Active string
	Keys   map[string][]byte
}

// keysFile is the keys file's JSON:
//
//	{"active": "2026-11", "keys": {"2026-11": "<base64 of 32 bytes>", "2026-05": "..."}}
type keysFile struct {
	Active string            `json:"active"`
	Keys   map[string]string `json:"keys"`
}

var keyIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// MaxKeysFileBytes bounds the keys file.
const MaxKeysFileBytes = 64 << 10

// LoadKeys reads the keys file at path (--codec-keys-file).
func LoadKeys(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("codec keys file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxKeysFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("codec keys file: %w", err)
	}
	if len(data) > MaxKeysFileBytes {
		return nil, fmt.Errorf("codec keys file %s: larger than %d bytes", path, MaxKeysFileBytes)
	}
	k, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("codec keys file %s: %w", path, err)
	}
	return k, nil
}

// ParseKeys parses a keys file's content. It never quotes a key.
func ParseKeys(data []byte) (*Keys, error) {
	var f keysFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, errors.New(`want JSON {"active": "<id>", "keys": {"<id>": "<base64 of 32 random bytes>"}} (make one with 'deployflow codec-key')`)
	}
	k := &Keys{Active: f.Active, Keys: map[string][]byte{}}
	for id, b64 := range f.Keys {
		if !keyIDRE.MatchString(id) {
			return nil, fmt.Errorf("key ID %q: use 1 to 64 letters, digits, '.', '_' and '-'", truncate(id, 64))
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(key) != KeySize {
			return nil, fmt.Errorf("key %s: want the base64 of %d random bytes (AES-256)", id, KeySize)
		}
		k.Keys[id] = key
	}
	if _, ok := k.Keys[k.Active]; !ok {
		return nil, fmt.Errorf("active %q names no key of the file (keys: %v): name the key that encrypts", truncate(k.Active, 64), slices.Sorted(maps.Keys(k.Keys)))
	}
	return k, nil
}

// NewKey is a fresh key file's content with one key, id.
func NewKey(id string) ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return json.MarshalIndent(keysFile{Active: id, Keys: map[string]string{id: base64.StdEncoding.EncodeToString(key)}}, "", "  ")
}

// Codec is the encrypting payload codec.
type Codec struct {
	active string
	aeads  map[string]cipher.AEAD
}

// New is the codec of keys k.
func New(k *Keys) (*Codec, error) {
	c := &Codec{active: k.Active, aeads: map[string]cipher.AEAD{}}
	for id, key := range k.Keys {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", id, err)
		}
		if c.aeads[id], err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("key %s: %w", id, err)
		}
	}
	if c.aeads[c.active] == nil {
		return nil, fmt.Errorf("no active key %q", c.active)
	}
	return c, nil
}

// Encode encrypts each payload with the active key; the key ID is
// authenticated with it (GCM's additional data).
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.active]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("encode payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return payloads, fmt.Errorf("encode payload: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte(c.active)},
			Data:     aead.Seal(nonce, nonce, plain, []byte(c.active)),
		}
	}
	return out, nil
}

// Decode decrypts each encrypted payload with the key it names; any other
// payload (written in plain JSON by a UI form or a CLI) is left as it is.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		id := string(p.Metadata[MetadataKeyID])
		aead := c.aeads[id]
		if aead == nil {
			return payloads, fmt.Errorf("decode payload: it was encrypted with key %q, which this process does not hold: add it to the codec keys file (keep retired keys there until nothing they encrypted is read)", truncate(id, 64))
		}
		if len(p.Data) < aead.NonceSize() {
			return payloads, errors.New("decode payload: encrypted data too short")
		}
		nonce, sealed := p.Data[:aead.NonceSize()], p.Data[aead.NonceSize():]
		plain, err := aead.Open(nil, nonce, sealed, []byte(id))
		if err != nil {
			return payloads, fmt.Errorf("decode payload with key %s: %w", id, err)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return payloads, fmt.Errorf("decode payload: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}

// DataConverter is the SDK's default data converter with c underneath.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// Apply makes a client encrypt with c: its payloads (DataConverter) and
// its failures' messages and stack traces (FailureConverter), which could
// quote a value too.
func (c *Codec) Apply(opts *client.Options) {
	opts.DataConverter = c.DataConverter()
	opts.FailureConverter = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: opts.DataConverter, EncodeCommonAttributes: true,
	})
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
