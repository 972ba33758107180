// Package version says which build of deployflow runs: the release version
// (set at link time, or the module version go install records), the build
// ID that names this exact build (the VCS revision, with "-dirty" for
// uncommitted changes; or a hash of the binary), and the Go version.
package version

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// Version is the release version; `go build -ldflags "-X
// github.com/deployflow/deployflow/internal/version.Version=v0.3.0"` sets
// it. Empty means the module version, or "dev".
var Version string

// Info is what runs.
type Info struct {
	Version   string `json:"version"`
	BuildID   string `json:"buildID"`
	GoVersion string `json:"goVersion"`
}

var (
	once sync.Once
	info Info
)

// Get returns this binary's Info.
func Get() Info {
	once.Do(func() {
		info = Info{Version: Version, GoVersion: runtime.Version()}
		bi, ok := debug.ReadBuildInfo()
		if info.Version == "" {
			info.Version = "dev"
			if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				info.Version = bi.Main.Version
			}
		}
		var rev, dirty string
		if ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					if s.Value == "true" {
						dirty = "-dirty"
					}
				}
			}
		}
		switch {
		case rev != "":
			info.BuildID = rev[:min(12, len(rev))] + dirty
		default:
			info.BuildID = binaryHash()
		}
	})
	return info
}

// binaryHash names a build without VCS information by its executable.
func binaryHash() string {
	exe, err := os.Executable()
	if err != nil {
		return "unknown"
	}
	f, err := os.Open(exe)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unknown"
	}
	return "bin-" + hex.EncodeToString(h.Sum(nil))[:12]
}
