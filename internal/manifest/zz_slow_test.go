package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestZZSlow(t *testing.T) {
	dir := os.Getenv("CORPUS")
	if dir == "" {
		t.Skip()
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		lines := strings.SplitN(string(raw), "\n", 2)
		s := strings.TrimSpace(lines[1])
		s = strings.TrimSuffix(strings.TrimPrefix(s, "[]byte("), ")")
		data, err := strconv.Unquote(s)
		if err != nil { fmt.Println("unquote", f, err); continue }
		start := time.Now()
		checkParse(t, []byte(data)); var perr error
		el := time.Since(start)
		if el > 50*time.Millisecond {
			fmt.Printf("%s %v len=%d err=%v\n%q\n", filepath.Base(f), el, len(data), perr, data[:min(len(data), 300)])
		}
	}
}
