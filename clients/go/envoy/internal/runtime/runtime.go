// Package runtime reads the configuration files from the runtime directory laid out as
// envoyproxy/ratelimit's (goruntime's): their names, which files count, and a reload when any
// of them changes (polled, so that a swapped symlink, a Kubernetes ConfigMap's ..data swap and
// an edit in place are all seen).
package runtime

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/envoy/internal/config"
)

// Directory is where the files are, and how they are named.
type Directory struct {
	Root, Subdirectory, AppDirectory string
	WatchRoot, IgnoreDotFiles        bool
}

// Files reads the configuration files, named as the peer names them: their path from the
// directory walked, with / as . (config.limits.yaml when the root is watched).
func (d Directory) Files() []config.File {
	base, prefix := "", ""
	if d.WatchRoot {
		if d.Root == "" || d.Subdirectory == "" {
			return nil // the peer's nil loader: no files, an empty configuration
		}
		base, prefix = filepath.Join(d.Root, d.Subdirectory), d.AppDirectory+"."
	} else {
		base = filepath.Join(d.Root, d.Subdirectory, d.AppDirectory)
	}
	var files []config.File
	_ = filepath.Walk(base, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			slog.Warn("runtime: error processing", "path", path, "error", err)
			return nil
		}
		hidden := d.IgnoreDotFiles && strings.HasPrefix(info.Name(), ".")
		if info.IsDir() {
			if hidden && path != base {
				return filepath.SkipDir
			}
			return nil
		}
		if hidden {
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			slog.Warn("runtime: error reading", "path", path, "error", err)
			return nil
		}
		rel, err := filepath.Rel(base, path)
		if err != nil {
			return nil
		}
		name := strings.ReplaceAll(rel, "/", ".")
		if strings.HasPrefix(name, prefix) {
			files = append(files, config.File{Name: name, Text: string(text)})
		}
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files
}

func fingerprint(files []config.File) []byte {
	var b bytes.Buffer
	for _, f := range files {
		b.WriteString(f.Name)
		b.WriteByte(0)
		b.WriteString(f.Text)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// Watch calls load with the files each time they differ from the last seen (loaded: those read
// at start), until ctx ends.
func (d Directory) Watch(ctx context.Context, every time.Duration, loaded []config.File, load func([]config.File)) {
	seen := fingerprint(loaded)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			files := d.Files()
			if now := fingerprint(files); !bytes.Equal(now, seen) {
				seen = now
				load(files)
			}
		}
	}
}
