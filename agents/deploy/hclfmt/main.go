// Command hclfmt checks Terraform files the way `terraform fmt -check -recursive` does, with
// the formatter terraform fmt is built on (hclwrite), for machines without terraform: it
// lists every .tf and .tfvars file under the given directories whose formatting differs, or
// that does not parse, and exits non-zero if there is any.
package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hclfmt DIR...")
		os.Exit(2)
	}
	bad, checked := 0, 0
	for _, dir := range os.Args[1:] {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == ".terraform" {
					return filepath.SkipDir
				}
				return nil
			}
			if ext := filepath.Ext(path); ext != ".tf" && ext != ".tfvars" {
				return nil
			}
			checked++
			if msg := check(path); msg != "" {
				fmt.Println(msg)
				bad++
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "hclfmt:", err)
			os.Exit(2)
		}
	}
	if checked == 0 {
		fmt.Fprintln(os.Stderr, "hclfmt: no .tf or .tfvars files found")
		os.Exit(2)
	}
	if bad > 0 {
		os.Exit(3)
	}
}

// check returns why path is not canonically formatted, or "".
func check(path string) string {
	src, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("%s: %v", path, err)
	}
	f, diags := hclwrite.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return fmt.Sprintf("%s: %s", path, diags.Error())
	}
	// Bytes runs the formatter over the parsed tokens, as terraform fmt's output does.
	if out := f.Bytes(); !bytes.Equal(out, src) {
		return fmt.Sprintf("%s: formatting differs", path)
	}
	return ""
}
