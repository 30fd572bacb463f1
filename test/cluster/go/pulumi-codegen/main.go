// Command pulumi-codegen writes the Python SDK of a Pulumi package schema: what
// `pulumi package gen-sdk --language python` does through the Python language host, with the same
// code generator (github.com/pulumi/pulumi/pkg/v3/codegen/python) called directly.
//
//	pulumi-codegen SCHEMA.json OUT_DIR
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// noPackages loads no other package: Hive's schema refers to none, and nothing is fetched.
type noPackages struct{}

func (noPackages) LoadPackage(pkg string, _ *semver.Version) (*schema.Package, error) {
	return nil, fmt.Errorf("the schema refers to package %q, which is not loaded here", pkg)
}

func (n noPackages) LoadPackageV2(_ context.Context, d *schema.PackageDescriptor) (*schema.Package, error) {
	return n.LoadPackage(d.Name, nil)
}

func (n noPackages) LoadPackageReference(pkg string, v *semver.Version) (schema.PackageReference, error) {
	return nil, fmt.Errorf("the schema refers to package %q, which is not loaded here", pkg)
}

func (n noPackages) LoadPackageReferenceV2(
	_ context.Context, d *schema.PackageDescriptor,
) (schema.PackageReference, error) {
	return n.LoadPackageReference(d.Name, nil)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pulumi-codegen: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: pulumi-codegen SCHEMA.json OUT_DIR")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		fail("%s is no package schema: %v", os.Args[1], err)
	}
	pkg, diags, err := schema.BindSpec(spec, noPackages{}, schema.ValidationOptions{})
	if err != nil {
		fail("binding the schema: %v", err)
	}
	if diags.HasErrors() {
		fail("the schema has errors: %v", diags)
	}
	files, err := python.GeneratePackage("pulumi-codegen", pkg, nil, noPackages{})
	if err != nil {
		fail("generating the Python SDK: %v", err)
	}
	for name, content := range files {
		path := filepath.Join(os.Args[2], name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fail("%v", err)
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			fail("%v", err)
		}
	}
}
