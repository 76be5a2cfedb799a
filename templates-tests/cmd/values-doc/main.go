// Command values-doc regenerates the values table of each chart README from its commented values.yaml.
//
//	go run ./templates-tests/cmd/values-doc [charts/valkey charts/valkey-sentinel]
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/valkey-ha/valkey-ha/templates-tests/valuesdoc"
)

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{"charts/valkey", "charts/valkey-sentinel"}
	}
	for _, dir := range dirs {
		if err := update(dir); err != nil {
			fmt.Fprintf(os.Stderr, "values-doc: %s: %v\n", dir, err)
			os.Exit(1)
		}
	}
}

func update(dir string) error {
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return err
	}
	readmePath := filepath.Join(dir, "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	out, err := valuesdoc.Update(readme, values)
	if err != nil {
		return err
	}
	return os.WriteFile(readmePath, []byte(out), 0o644)
}
