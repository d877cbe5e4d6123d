package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"stormwatch/agents/internal/config"
)

// Off-cloud with no subnet override, the subnet is the mesh interface's prefix, so peers on
// other networks are not taken for one subnet; an override or the metadata still wins.
func TestTheSubnetIsTheMeshInterfacesPrefixWhenNothingGivesIt(t *testing.T) {
	off := false
	cfg := config.Config{APIURL: "http://127.0.0.1:9"}
	cfg.Metadata.Detect = &off
	d := Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	md := Metadata(context.Background(), cfg, d)
	if md.PrivateIP != "127.0.0.1" || md.Subnet != "127.0.0.0/8" {
		t.Fatalf("private IP %q, subnet %q: want 127.0.0.1 on loopback's 127.0.0.0/8", md.PrivateIP, md.Subnet)
	}
	cfg.Metadata.Subnet = "lab-vlan-7"
	if md := Metadata(context.Background(), cfg, d); md.Subnet != "lab-vlan-7" {
		t.Fatalf("subnet %q, want the override", md.Subnet)
	}
}
