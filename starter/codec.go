package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/deployflow/deployflow/internal/codec"
)

// The operator's commands for the payload codec (issue 37.3): a keys file,
// and the codec server the Temporal UI and the temporal CLI decode
// through.

// runCodecKey prints a new keys file, or, with --rotate, the given one
// with a new active key (the old ones kept, to decrypt what they
// encrypted).
func runCodecKey(_ *globals, fs *flag.FlagSet) runner {
	id := fs.String("id", time.Now().UTC().Format("2006-01-02"), "the new key's ID (letters, digits, '.', '_', '-')")
	rotate := fs.String("rotate", "", "a keys file: print it with the new key added and active")
	return func(_ context.Context, _ []string, stdout io.Writer) error {
		fresh, err := codec.NewKey(*id)
		if err != nil {
			return err
		}
		if *rotate == "" {
			_, err = fmt.Fprintf(stdout, "%s\n", fresh)
			return err
		}
		data, err := os.ReadFile(*rotate)
		if err != nil {
			return usageError{fmt.Errorf("--rotate: %w", err)}
		}
		if _, err := codec.ParseKeys(data); err != nil {
			return usageError{fmt.Errorf("--rotate %s: %w", *rotate, err)}
		}
		var file, add struct {
			Active string            `json:"active"`
			Keys   map[string]string `json:"keys"`
		}
		_ = json.Unmarshal(data, &file)
		_ = json.Unmarshal(fresh, &add)
		if _, taken := file.Keys[*id]; taken {
			return usageError{fmt.Errorf("--id %s: the file has a key of that ID already", *id)}
		}
		file.Keys[*id], file.Active = add.Keys[*id], *id
		out, _ := json.MarshalIndent(file, "", "  ")
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
}

// runCodecServer serves the codec (--codec-keys-file) to the Temporal UI
// and the temporal CLI until interrupted.
func runCodecServer(g *globals, fs *flag.FlagSet) runner {
	listen := fs.String("listen", "127.0.0.1:8081", "host:port to serve on (put TLS in front of it beyond this machine)")
	tokenFile := fs.String("token-file", os.Getenv("DEPLOYFLOW_CODEC_TOKEN_FILE"), "file of the bearer tokens the server accepts, one per line (env DEPLOYFLOW_CODEC_TOKEN_FILE)")
	origins := fs.String("cors-origin", "", "comma-separated browser origins allowed to call it: the Temporal UI's (e.g. http://127.0.0.1:8233)")
	ready := fs.String("ready-file", "", "write the address served on to this file once listening (for scripts)")
	return func(ctx context.Context, _ []string, stdout io.Writer) error {
		c, err := g.cfg.Codec()
		if err != nil {
			return usageError{err}
		}
		if c == nil {
			return usageError{errors.New("--codec-keys-file: give the keys to decode with")}
		}
		tokens, err := readTokens(*tokenFile)
		if err != nil {
			return usageError{err}
		}
		var allowed []string
		for _, o := range strings.Split(*origins, ",") {
			if o = strings.TrimSpace(o); o != "" {
				allowed = append(allowed, o)
			}
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
		srv := &http.Server{Handler: codec.Handler(c, codec.ServerOptions{Tokens: tokens, Origins: allowed}), ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintf(stdout, "codec server on http://%s (POST /encode, /decode; %d tokens)\n", ln.Addr(), len(tokens))
		if *ready != "" {
			if err := os.WriteFile(*ready, []byte(ln.Addr().String()), 0o600); err != nil {
				return err
			}
		}
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// readTokens reads a tokens file: one per line, blank lines and # comments
// skipped; at least one.
func readTokens(path string) ([]string, error) {
	if path == "" {
		return nil, errors.New("--token-file: give the file of the tokens an operator authenticates with (the UI's access token, the temporal CLI's --codec-auth 'Bearer <token>')")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	var tokens []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" && !strings.HasPrefix(t, "#") {
			if len(t) < 16 {
				return nil, fmt.Errorf("--token-file %s: a token of %d characters is too short to guess-proof: use 16 or more", path, len(t))
			}
			tokens = append(tokens, t)
		}
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("--token-file %s: no token in it", path)
	}
	return tokens, sc.Err()
}
