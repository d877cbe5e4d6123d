//go:build !linux

package path

import (
	"context"
	"net/netip"
)

func probeOnce(context.Context, netip.AddrPort, int, Options) (Probe, error) {
	return Probe{}, ErrUnsupported
}
